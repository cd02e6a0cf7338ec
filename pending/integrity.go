package pending

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// The journal's identity and soundness (SPEC §9 "Journal identity"): the
// file is known by what it is, not by the path typed; a file SQLite cannot
// keep consistent (hard links, a truncated tail, a WAL replaced under a
// running process) is refused or reported before a row can be lost; and
// every error of Open says which of these, or which other cause, it is.

// typedError is an error callers branch on with errors.Is(err, kind) that
// keeps its cause reachable (errors.As finds the driver's *sqlite.Error or
// the *fs.PathError under it).
type typedError struct {
	kind  error  // one of the Err* sentinels
	msg   string // the whole message; empty: the kind's, then the cause's
	cause error
}

func (e *typedError) Error() string {
	switch {
	case e.msg != "":
		return e.msg
	case e.cause == nil:
		return e.kind.Error()
	}
	return e.kind.Error() + ": " + e.cause.Error()
}

func (e *typedError) Unwrap() []error {
	if e.cause == nil {
		return []error{e.kind}
	}
	return []error{e.kind, e.cause}
}

// typedKinds are the sentinels an error of Open may already carry.
var typedKinds = []error{ErrNotJournal, ErrNewerSchema, ErrHardLinked, ErrCorrupt, ErrDiskFull,
	ErrReadOnly, ErrLocked, ErrJournalReplaced, ErrNotOwned, ErrTooOpen, ErrNoJournal, ErrNeedsMigration}

// classify gives an error met while opening the journal the kind of what
// went wrong, from SQLite's result code or the system's errno. An error
// that already has a kind, or whose cause is none of these, is returned as
// it is.
func classify(err error) error {
	if err == nil {
		return nil
	}
	for _, k := range typedKinds {
		if errors.Is(err, k) {
			return err
		}
	}
	if kind := kindOf(err); kind != nil {
		return &typedError{kind: kind, cause: err}
	}
	return err
}

func kindOf(err error) error {
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff { // extended codes keep the primary one in the low byte
		case sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB:
			// checkHeader has already seen SQLite's magic: a file SQLite then
			// calls no database is a damaged one.
			return ErrCorrupt
		case sqlite3.SQLITE_FULL:
			return ErrDiskFull
		case sqlite3.SQLITE_READONLY, sqlite3.SQLITE_PERM:
			return ErrReadOnly
		case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
			return ErrLocked
		}
	}
	switch {
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return ErrDiskFull
	case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM), errors.Is(err, syscall.EROFS):
		return ErrReadOnly
	}
	return nil
}

// canNotOpen classifies SQLite's SQLITE_CANTOPEN, which does not say why:
// when the journal's folder or file cannot be written (the WAL and its
// index are created beside the file), it is ErrReadOnly.
func canNotOpen(err error, path string) error {
	var se *sqlite.Error
	if !errors.As(err, &se) || se.Code()&0xff != sqlite3.SQLITE_CANTOPEN {
		return err
	}
	for _, p := range []string{filepath.Dir(path), path} {
		if aerr := syscall.Access(p, 2 /* W_OK */); aerr != nil && kindOf(aerr) == ErrReadOnly {
			return &typedError{kind: ErrReadOnly, cause: err}
		}
	}
	return err
}

// resolvePath is the journal's own path: absolute, with every symlink and
// ".." resolved, so that every process reaching the file by any path agrees
// on its owners folder (SQLite resolves symlinks for its -wal and -shm the
// same way). The file must exist.
func resolvePath(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", err
	}
	if strings.ContainsAny(real, "?#") {
		return "", fmt.Errorf("the journal's real path %s may not contain '?' or '#'", real)
	}
	return real, nil
}

// checkLinks refuses a journal file with more than one hard link: SQLite
// names its WAL after the path, so two processes using two links would
// write two WAL files and lose committed rows.
func checkLinks(path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return nil // a folder, say: checkHeader says what it is
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && sys.Nlink > 1 {
		return &typedError{kind: ErrHardLinked, msg: fmt.Sprintf(
			"the journal has %d hard links; SQLite does not support that: use one path (remove the extra links)", sys.Nlink)}
	}
	return nil
}

// sqliteMagic opens every SQLite database file.
const sqliteMagic = "SQLite format 3\x00"

// checkHeader refuses, before the driver touches the file, a non-empty file
// that is not SQLite, and one shorter than its own header says (a truncated
// copy, a disk that lost the tail): SQLite would accept the latter and write
// into it. The size is only judged when no WAL or rollback journal beside
// the file holds pages still to be copied into it (a process killed during
// a checkpoint leaves the file short and the WAL whole, and SQLite completes
// it); a failed judgement is made again after a pause, in case a checkpoint
// was copying pages meanwhile.
func checkHeader(path string) error {
	var err error
	for _, pause := range []time.Duration{0, 20 * time.Millisecond, 100 * time.Millisecond} {
		time.Sleep(pause)
		if err = readHeader(path); !errors.Is(err, ErrCorrupt) {
			return err
		}
	}
	return err
}

// emptyFileAge is how old an empty file must be to be refused: a journal
// another process is making is empty only for the moment between its
// creation and its first write.
const emptyFileAge = 2 * time.Second

func readHeader(path string) error {
	pendingPages := hasContent(path+"-wal") || hasContent(path+"-journal")
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if st.IsDir() {
		return fmt.Errorf("%w: it is a folder", ErrNotJournal)
	}
	head := make([]byte, 100)
	n, err := io.ReadFull(f, head)
	switch {
	case n == 0 && err == io.EOF && !pendingPages && time.Since(st.ModTime()) > emptyFileAge:
		// Not one being made now: someone's empty file, or a journal whose
		// making was cut before its first write. Neither is ours to fill.
		return fmt.Errorf("%w: it is an empty file; mcp-confirm makes its own journal, so give --db a path "+
			"that does not exist yet (or remove the file if an interrupted mcp-confirm left it)", ErrNotJournal)
	case n == 0 && err == io.EOF:
		return nil // empty and new: a journal being made (perhaps by another process)
	case n < len(sqliteMagic) || string(head[:len(sqliteMagic)]) != sqliteMagic:
		return fmt.Errorf("%w: the file is not a SQLite database", ErrNotJournal)
	case n < len(head):
		return errShort
	}
	pageSize := int64(binary.BigEndian.Uint16(head[16:18]))
	if pageSize == 1 {
		pageSize = 65536
	}
	if pageSize < 512 || pageSize > 65536 || pageSize&(pageSize-1) != 0 {
		return &typedError{kind: ErrCorrupt, msg: fmt.Sprintf(
			"the journal is damaged (its header gives the page size %d); restore it from a backup", pageSize)}
	}
	pages := int64(binary.BigEndian.Uint32(head[28:32]))
	sizeValid := pages > 0 && binary.BigEndian.Uint32(head[24:28]) == binary.BigEndian.Uint32(head[92:96])
	if sizeValid && !pendingPages && st.Size() < pages*pageSize {
		return errShort
	}
	return nil
}

// ErrTruncated: the journal file is shorter than its header says (it is
// also ErrCorrupt); the front-end may offer its own integrity check.
var ErrTruncated = errors.New("the journal file is shorter than its header says")

var errShort = &typedError{kind: ErrCorrupt, cause: ErrTruncated,
	msg: "the journal is damaged (file shorter than its header says); restore it from a backup"}

func hasContent(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Size() > 0
}

// fileIDs is what the journal's files were when Open had made them: the
// database file and its WAL. SQLite keeps its descriptor of each open for as
// long as the writer connection lives, so neither inode can be reused, and
// it never removes or recreates either while a connection of this process
// is open (checkpoints reuse or truncate the WAL in place; another process's
// close leaves it alone while this one holds the WAL index). So a file at
// either path that is missing or another one means someone removed or
// replaced it: this process's commits would go where no other process reads
// them.
type fileIDs struct {
	db, wal fs.FileInfo
}

func statFiles(path string) (fileIDs, error) {
	db, err := os.Stat(path)
	if err != nil {
		return fileIDs{}, err
	}
	wal, err := os.Stat(path + "-wal")
	if err != nil {
		return fileIDs{}, fmt.Errorf("the WAL of a journal in WAL mode: %w", err)
	}
	return fileIDs{db: db, wal: wal}, nil
}

// check returns ErrJournalReplaced when the file at path or path-wal is no
// longer the one Open found.
func (ids fileIDs) check(path string) error {
	if ids.db == nil {
		return nil
	}
	if st, err := os.Stat(path + "-wal"); err != nil || !os.SameFile(st, ids.wal) {
		return &typedError{kind: ErrJournalReplaced, msg: fmt.Sprintf("the journal's WAL file %s-wal was removed or "+
			"replaced while open; committed rows may be lost; stop every mcp-confirm process using this journal and check it", path)}
	}
	if st, err := os.Stat(path); err != nil || !os.SameFile(st, ids.db) {
		return &typedError{kind: ErrJournalReplaced, msg: fmt.Sprintf("the journal file %s was removed or "+
			"replaced while open; committed rows may be lost; stop every mcp-confirm process using this journal and check it", path)}
	}
	return nil
}

// QuickCheck runs SQLite's quick_check over the whole journal and returns
// the problems it finds: none when the journal is sound. Damage that stops
// the check itself is returned as a problem too.
func (j *Journal) QuickCheck(ctx context.Context) ([]string, error) {
	if j.pg != nil {
		return nil, nil // PostgreSQL checks its own pages (data checksums, amcheck); nothing here to add
	}
	rows, err := j.read.QueryContext(ctx, "PRAGMA quick_check")
	if err != nil {
		if kindOf(err) == ErrCorrupt {
			return []string{err.Error()}, nil
		}
		return nil, err
	}
	defer rows.Close()
	var problems []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		if s != "ok" {
			problems = append(problems, s)
		}
	}
	if err := rows.Err(); err != nil {
		if kindOf(err) == ErrCorrupt {
			return append(problems, err.Error()), nil
		}
		return nil, err
	}
	return problems, nil
}
