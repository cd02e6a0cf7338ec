package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/mcp-confirm/mcp-confirm/pending"
)

// openJournal opens the journal named by --db, $MCP_CONFIRM_DB or the XDG
// default. On failure it prints one line saying what to do and returns
// exitUnavailable.
func openJournal(ctx context.Context, e *env, g *globalOpts) (*pending.Journal, int) {
	return openJournalWith(ctx, e, g, pending.Open)
}

// openJournalReadOnly is openJournal for the read commands (list, show,
// export, stats): it creates nothing ("no journal at PATH", exit 5), takes
// no write lock and runs no recovery.
func openJournalReadOnly(ctx context.Context, e *env, g *globalOpts) (*pending.Journal, int) {
	return openJournalWith(ctx, e, g, pending.OpenReadOnly)
}

func openJournalWith(ctx context.Context, e *env, g *globalOpts,
	open func(context.Context, string, pending.Options) (*pending.Journal, error)) (*pending.Journal, int) {
	path := g.db
	if path == "" {
		p, err := pending.DefaultPath(e.getenv)
		if err != nil {
			fmt.Fprintf(e.stderr, "mcp-confirm: %s\n", noPathText(err))
			return nil, exitUnavailable
		}
		path = p
	}
	j, err := open(ctx, path, pending.Options{OnTighten: func(t pending.Tightening) {
		fmt.Fprintf(e.stderr, "mcp-confirm: %s\n", t)
	}})
	if err != nil {
		fmt.Fprintf(e.stderr, "mcp-confirm: cannot open the journal: %v%s\n%s.\n", err, cliHint(err), capitalize(openHint(err, path)))
		return nil, exitUnavailable
	}
	return j, exitOK
}

// journalDir is the folder for files kept beside the journal (the demo
// server's database): the journal file's own, or, for a journal on
// PostgreSQL, this machine's state folder.
func journalDir(e *env, j *pending.Journal) string {
	if !pending.IsPostgres(j.Path()) {
		return filepath.Dir(j.Path())
	}
	return localStateDir(e)
}

// localStateDir is the folder the default journal would be in, whatever
// $MCP_CONFIRM_DB says (it may name a journal on PostgreSQL).
func localStateDir(e *env) string {
	p, err := pending.DefaultPath(func(k string) string {
		if k == "MCP_CONFIRM_DB" {
			return ""
		}
		return e.getenv(k)
	})
	if err != nil {
		return os.TempDir()
	}
	return filepath.Dir(p)
}

// openHint says what to do about an error of pending.Open, by its cause.
func openHint(err error, path string) string {
	switch {
	case errors.Is(err, pending.ErrNoJournal):
		return "pass the journal's path with --db or $MCP_CONFIRM_DB; read commands create no journal"
	case errors.Is(err, pending.ErrNeedsMigration):
		return "nothing was changed"
	case errors.Is(err, pending.ErrNotOwned), errors.Is(err, pending.ErrTooOpen):
		return "nothing was read or written; mcp-confirm keeps the journal's files as ssh keeps its keys"
	case errors.Is(err, pending.ErrSecretMissing), errors.Is(err, pending.ErrSecretMismatch):
		return "put the journal's own .secret file (named above) back beside it, from where the journal was backed up; " +
			"nothing was sent, and read commands (list, show, export) still work without it"
	case errors.Is(err, pending.ErrNotJournal):
		return "this file is not an mcp-confirm journal; pass the journal's path with --db"
	case errors.Is(err, pending.ErrNewerSchema):
		return "upgrade mcp-confirm to read it; nothing was changed"
	case errors.Is(err, pending.ErrHardLinked):
		return "find its other names with 'find / -xdev -samefile " + path + "', remove all but one, and use that one"
	case errors.Is(err, pending.ErrCorrupt):
		return "stop every mcp-confirm using it before you restore it; " +
			"the outcome of calls sent since the backup is to be checked on their servers"
	case errors.Is(err, pending.ErrDiskFull):
		return "free space on the disk that holds the journal, then run the command again; nothing was sent"
	case errors.Is(err, pending.ErrReadOnly):
		return "this user cannot write the journal or its folder (mcp-confirm writes a WAL and lock files beside it): " +
			"fix the permissions or the mount, or pass another path with --db"
	case errors.Is(err, pending.ErrLocked):
		return "another process held the journal locked too long; run the command again, " +
			"or stop the process that holds it (a stuck mcp-confirm, a sqlite3 shell in a transaction)"
	}
	if pending.IsPostgres(path) {
		return "check the connection string (host, port, dbname, user, sslmode; a password in ~/.pgpass or $PGPASSWORD) " +
			"and that the server is up; nothing was sent"
	}
	return "check the path, or pass another with --db"
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return string(s[0]-'a'+'A') + s[1:]
}
