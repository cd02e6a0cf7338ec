package pending

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// The journal's soundness: a file SQLite cannot keep consistent (a
// truncated tail) is refused before a row can be lost, and every error of
// Open says which cause it is.

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
var typedKinds = []error{ErrNotJournal, ErrNewerSchema, ErrCorrupt, ErrDiskFull, ErrReadOnly, ErrLocked}

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
	case n == 0 && err == io.EOF:
		return nil // empty: a new journal
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

var errShort = &typedError{kind: ErrCorrupt, msg: "the journal is damaged (file shorter than its header says); " +
	"restore it from a backup, or run 'mcp-confirm stats --check'"}

func hasContent(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Size() > 0
}

// QuickCheck runs SQLite's quick_check over the whole journal and returns
// the problems it finds: none when the journal is sound. Damage that stops
// the check itself is returned as a problem too.
func (j *Journal) QuickCheck(ctx context.Context) ([]string, error) {
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
