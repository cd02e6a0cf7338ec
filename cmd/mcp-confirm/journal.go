package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/mcp-confirm/mcp-confirm/pending"
)

// openJournal opens the journal named by --db, $MCP_CONFIRM_DB or the XDG
// default. On failure it prints one line saying what to do and returns
// exitUnavailable.
func openJournal(ctx context.Context, e *env, g *globalOpts) (*pending.Journal, int) {
	path := g.db
	if path == "" {
		p, err := pending.DefaultPath(e.getenv)
		if err != nil {
			fmt.Fprintf(e.stderr, "mcp-confirm: %v\n", err)
			return nil, exitUnavailable
		}
		path = p
	}
	j, err := pending.Open(ctx, path, pending.Options{})
	if err != nil {
		hint := "check the path, or pass another with --db"
		switch {
		case errors.Is(err, pending.ErrNotJournal):
			hint = "this file is not an mcp-confirm journal; pass the journal's path with --db"
		case errors.Is(err, pending.ErrNewerSchema):
			hint = "upgrade mcp-confirm to read it; nothing was changed"
		}
		fmt.Fprintf(e.stderr, "mcp-confirm: cannot open the journal: %v\n%s.\n", err, capitalize(hint))
		return nil, exitUnavailable
	}
	return j, exitOK
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return string(s[0]-'a'+'A') + s[1:]
}
