// Package pending is the durable journal of write calls: a SQLite file in
// which a call exists, committed with a full fsync, before a single byte of
// it is sent, and from which nothing is ever deleted or silently changed.
// It knows nothing of MCP or of any UI.
package pending

import (
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"modernc.org/sqlite" // pure-Go SQLite driver "sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// Errors callers branch on. Open wraps them with the path; every error of
// Open whose cause is known carries one of them (integrity.go).
var (
	ErrNotJournal  = errors.New("not an mcp-confirm journal")
	ErrNewerSchema = errors.New("journal was written by a newer mcp-confirm")
	ErrNoSuchCall  = errors.New("no such call")
	ErrClosed      = errors.New("journal closed")
	// ErrHardLinked: the file has more than one hard link (refused).
	ErrHardLinked = errors.New("the journal has more than one hard link")
	// ErrCorrupt: the file says it is SQLite but is damaged.
	ErrCorrupt = errors.New("the journal is damaged")
	// ErrDiskFull: no space left for the journal, its WAL or its lock files.
	ErrDiskFull = errors.New("the disk holding the journal is full")
	// ErrReadOnly: the file, its folder or its file system cannot be written.
	ErrReadOnly = errors.New("the journal cannot be written (read-only file, folder or file system)")
	// ErrLocked: another process held a lock on it past Options.BusyTimeout.
	ErrLocked = errors.New("the journal is locked by another process")
	// ErrJournalReplaced: the journal's WAL (or the file itself) was removed
	// or replaced while this process had it open. The write that found it
	// and every later one fail; reads go on.
	ErrJournalReplaced = errors.New("the journal's WAL file was removed or replaced while open")
	// ErrNoJournal: OpenReadOnly found no file at the path (it creates none).
	ErrNoJournal = errors.New("no journal")
	// ErrNeedsMigration: OpenReadOnly found a journal of an older schema (or
	// one not yet initialised); a writing open upgrades it.
	ErrNeedsMigration = errors.New("the journal needs a schema upgrade")
	// ErrWriteReadOnly: a write on a journal opened with OpenReadOnly.
	ErrWriteReadOnly = errors.New("the journal was opened read-only")
)

// Options tune Open. The zero value is what the product uses.
type Options struct {
	// Now is the clock; tests set it. Default time.Now.
	Now func() time.Time
	// BusyTimeout bounds how long a writer waits for another process's
	// write transaction. Default 10s.
	BusyTimeout time.Duration
	// SkipRecovery opens without turning dead owners' in-flight calls into
	// unknown (tests of recovery itself use it). The product never sets it.
	SkipRecovery bool
	// OnTighten is told of each file of this user that Open found open to
	// other users and narrowed (0644 -> 0600); the CLI prints a line.
	OnTighten func(Tightening)
	// Host names the machine each decision is recorded as made on.
	// Default os.Hostname(); "" when that fails.
	Host string
}

// withDefaults fills in what opts leaves unset, on either backend.
func (opts Options) withDefaults() Options {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.BusyTimeout == 0 {
		opts.BusyTimeout = 10 * time.Second
	}
	if opts.Host == "" {
		opts.Host, _ = os.Hostname()
	}
	return opts
}

// check fills in opts' defaults and refuses a path SQLite's DSN would
// misread (Open and OpenReadOnly alike).
func (opts Options) check(path string) (Options, error) {
	opts = opts.withDefaults()
	if strings.ContainsAny(path, "?#") {
		return opts, fmt.Errorf("open journal %s: the path may not contain '?' or '#'", path)
	}
	return opts, nil
}

// readPoolSize is the number of reader connections a journal keeps.
const readPoolSize = 4

// Journal is an open journal file. It is safe for concurrent use.
type Journal struct {
	path     string
	now      func() time.Time
	host     string  // recorded with each decision (Options.Host)
	readOnly bool    // OpenReadOnly: no writer, no owner lock, no recovery
	read     *sql.DB // readers: a small pool, never blocked by writers (WAL)
	wdb      *sql.DB // the single writer connection's pool
	wconn    *sql.Conn
	writes   chan *writeReq
	done     chan struct{} // closed by the writer goroutine when it has ended
	// closeMu guards closed and the closing of writes: write sends under
	// the read lock, Close closes under the write lock, so no send ever
	// meets a closed channel and a second Close finds closed set.
	closeMu sync.RWMutex
	closed  bool
	owner   *ownerLock
	files   fileIDs       // the file and WAL Open found; checked before each commit
	broken  error         // ErrJournalReplaced once found; writer goroutine, then Close
	loss    lossState     // what was done about it (walloss.go)
	stopWAL chan struct{} // ends watchWAL; closed by Close
	secret  []byte        // fingerprint key (secret.go); nil when read-only

	recovered []int64    // calls turned unknown by recovery on open
	noteMu    sync.Mutex // guards noteOff (see unrecorded.go)
	noteOff   int64
	version   versionConn
	stmts     map[string]*sql.Stmt // writer goroutine only
	readStmts readStmts
	onCommit  atomic.Pointer[CommitObserver]

	pg *pgBackend // the PostgreSQL backend's own state; nil on SQLite (pg.go)
}

// DefaultPath is the journal path when --db is not given (SPEC §4):
// $MCP_CONFIRM_DB, else $XDG_STATE_HOME/mcp-confirm/journal.db, else
// ~/.local/state/mcp-confirm/journal.db.
func DefaultPath(getenv func(string) string) (string, error) {
	if p := getenv("MCP_CONFIRM_DB"); p != "" {
		return p, nil
	}
	if d := getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "mcp-confirm", "journal.db"), nil
	}
	home := getenv("HOME")
	if home == "" {
		h, err := os.UserHomeDir()
		if err != nil {
			return "", &NoPathError{Err: err}
		}
		home = h
	}
	return filepath.Join(home, ".local", "state", "mcp-confirm", "journal.db"), nil
}

// NoPathError: DefaultPath found neither $MCP_CONFIRM_DB, $XDG_STATE_HOME
// nor a home folder; the front-end says how to name a journal.
type NoPathError struct{ Err error }

func (e *NoPathError) Error() string {
	return fmt.Sprintf("no journal path: set $MCP_CONFIRM_DB (%v)", e.Err)
}
func (e *NoPathError) Unwrap() error { return e.Err }

// Open opens or creates the journal at path, runs pending migrations, and
// recovers in-flight calls whose owner process is gone. A file that is not a
// journal, or one from a newer schema, is refused before anything is written,
// and so are a file with more than one hard link and one shorter than its
// header says. The journal is known by its real path (symlinks resolved),
// whatever path reached it.
func Open(ctx context.Context, path string, opts Options) (*Journal, error) {
	if IsPostgres(path) {
		return openPG(ctx, path, opts, false)
	}
	opts, err := opts.check(path)
	if err != nil {
		return nil, err
	}
	if err := createFile(path); err != nil {
		return nil, fmt.Errorf("open journal %s: %w", path, classify(err))
	}
	path, err = checkFile(path, opts)
	if err != nil {
		return nil, err
	}
	j := &Journal{path: path, now: opts.Now, host: opts.Host, writes: make(chan *writeReq, 1024), done: make(chan struct{})}
	ok := false
	defer func() {
		if !ok {
			j.closeHandles()
		}
	}()
	refuse := func(what string, err error) (*Journal, error) {
		return nil, fmt.Errorf("open journal %s: %s%w", path, what, classify(canNotOpen(err, path)))
	}
	dsn := fmt.Sprintf("%s?_pragma=busy_timeout(%d)&_pragma=foreign_keys(1)", path, opts.BusyTimeout.Milliseconds())
	if j.wdb, err = sql.Open("sqlite", dsn); err != nil {
		return refuse("", err)
	}
	j.wdb.SetMaxOpenConns(1)
	if j.wconn, err = j.wdb.Conn(ctx); err != nil {
		return refuse("", err)
	}
	if err := j.checkSchema(ctx); err != nil {
		return refuse("", err)
	}
	if err := j.setWAL(ctx, opts.BusyTimeout); err != nil {
		return refuse("set WAL mode: ", err)
	}
	if err := j.migrate(ctx); err != nil {
		return refuse("", err)
	}
	if err := j.bindSecret(ctx); err != nil {
		return refuse("", err)
	}
	if j.files, err = statFiles(path); err != nil {
		return refuse("", err)
	}
	if j.read, err = sql.Open("sqlite", dsn+"&_pragma=query_only(1)"); err != nil {
		return refuse("", err)
	}
	j.read.SetMaxOpenConns(readPoolSize)
	j.read.SetMaxIdleConns(readPoolSize)
	if j.owner, err = acquireOwner(path); err != nil {
		return refuse("", err)
	}
	go j.writer()
	j.stopWAL = make(chan struct{})
	go j.watchWAL(j.files, j.stopWAL)
	if !opts.SkipRecovery {
		if j.recovered, err = j.Recover(ctx); err != nil {
			j.Close()
			ok = true // Close has done what closeHandles would
			return refuse("recover: ", err)
		}
	}
	ok = true
	return j, nil
}

// checkFile resolves the journal's real path and checks, before SQLite
// touches anything, its links, its header and who owns it and its files.
// The checks that only read come first: ownership may tighten a mode, and
// a file must be known to be a journal (or an empty one being made)
// before anything about it is changed: a mistyped --db naming a shared
// file of someone else is refused as it was found.
func checkFile(path string, opts Options) (string, error) {
	real, err := resolvePath(path)
	if err != nil {
		return "", fmt.Errorf("open journal %s: %w", path, classify(err))
	}
	for _, check := range []func(string) error{
		checkLinks,
		checkHeader,
		checkIdentity,
		func(p string) error { return checkOwnership(p, opts.OnTighten) },
	} {
		if err := check(real); err != nil {
			if errors.Is(err, fs.ErrPermission) {
				// Unreadable: another user's file, most often. The
				// ownership check says so better, and changes nothing
				// on a file this user may not read (only root may
				// chmod another's file, and root reads it).
				if oerr := checkOwnership(real, opts.OnTighten); oerr != nil {
					err = oerr
				}
			}
			return "", fmt.Errorf("open journal %s: %w", real, classify(err))
		}
	}
	return real, nil
}

// checkIdentity reads the SQLite header's application id (and, when it is
// not this program's, its user version and schema cookie) straight from
// the file, so another application's database is refused before SQLite
// opens it (which could create a -wal and -shm beside it) and before its
// mode is touched. A journal's id, version and tables are committed in one
// transaction, and a checkpoint copies whole committed pages, so a file
// whose header names no application and yet has tables or a version is
// not a journal, whatever its WAL holds. An empty database (a journal
// whose first migration may still be in its WAL) passes; checkSchema
// judges it through SQLite.
func checkIdentity(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	head := make([]byte, 100)
	if n, _ := io.ReadFull(f, head); n < len(head) {
		return nil // empty: checkHeader has judged it
	}
	appID := binary.BigEndian.Uint32(head[68:72])
	version := binary.BigEndian.Uint32(head[60:64])
	cookie := binary.BigEndian.Uint32(head[40:44])
	switch {
	case appID == applicationID:
		return nil
	case appID == 0 && version == 0 && cookie == 0:
		return nil // an empty database
	}
	return fmt.Errorf("%w: it is a SQLite database of another application", ErrNotJournal)
}

// OpenReadOnly opens an existing journal for reading only (list, show,
// export, stats): it creates no journal or folder (a missing journal is
// ErrNoJournal), takes no lock that a writer could wait on, holds no owner
// lock of its own; it recovers (by a brief writing open, which takes the
// write lock) only when a call of an owner that died is in flight, so
// what it reads is true and, most of the time, no writer can delay it.
// A journal whose schema
// is older than this build's is refused with ErrNeedsMigration rather
// than upgraded. Ownership is checked as by Open, and too-open files of
// this user are tightened (a change of mode, not of content). Writes
// return ErrWriteReadOnly.
func OpenReadOnly(ctx context.Context, path string, opts Options) (*Journal, error) {
	if IsPostgres(path) {
		return openPG(ctx, path, opts, true)
	}
	opts, err := opts.check(path)
	if err != nil {
		return nil, err
	}
	if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
		return nil, &typedError{kind: ErrNoJournal, msg: "no journal at " + path}
	}
	path, err = checkFile(path, opts)
	if err != nil {
		return nil, err
	}
	j := &Journal{path: path, now: opts.Now, host: opts.Host, readOnly: true, done: make(chan struct{})}
	close(j.done)
	ok := false
	defer func() {
		if !ok {
			j.closeHandles()
		}
	}()
	refuse := func(err error) (*Journal, error) {
		return nil, fmt.Errorf("open journal %s: %w", path, classify(canNotOpen(err, path)))
	}
	// mode=ro: SQLite opens the file O_RDONLY, never creates it, and a
	// read-only connection does not checkpoint the WAL when it closes.
	// It still needs the WAL index (-shm), which it opens read-write when
	// it can, as any reader of a WAL database does; taking no write lock,
	// it is never kept waiting by another process's write transaction.
	uri := (&url.URL{Scheme: "file", Path: path}).String()
	dsn := fmt.Sprintf("%s?mode=ro&_pragma=busy_timeout(%d)&_pragma=query_only(1)", uri, opts.BusyTimeout.Milliseconds())
	if j.read, err = sql.Open("sqlite", dsn); err != nil {
		return refuse(err)
	}
	j.read.SetMaxOpenConns(4)
	j.read.SetMaxIdleConns(4)
	var appID, version, tables int
	err = j.read.QueryRowContext(ctx, `SELECT
		(SELECT application_id FROM pragma_application_id),
		(SELECT user_version FROM pragma_user_version),
		(SELECT count(*) FROM sqlite_master)`).Scan(&appID, &version, &tables)
	switch {
	case err != nil:
		return refuse(err)
	case appID != applicationID && !(appID == 0 && tables == 0 && version == 0):
		return refuse(fmt.Errorf("%w: it is a SQLite database of another application", ErrNotJournal))
	case version > len(migrations):
		return refuse(fmt.Errorf("%w (schema %d, this build knows %d): upgrade mcp-confirm", ErrNewerSchema, version, len(migrations)))
	case version < len(migrations):
		return refuse(&typedError{kind: ErrNeedsMigration, msg: fmt.Sprintf(
			"the journal has schema %d and this build reads %d; a read command does not upgrade it: "+
				"run a writing command (the console, call, note) on it once", version, len(migrations))})
	}
	// A read must show what is true: a call whose owner died is unknown,
	// not in flight. Only when such a call exists (a lock-free look) is a
	// writing open made, briefly, to recover it: it takes the write lock,
	// as every recovery must, and creates nothing but its owner lock file.
	if !opts.SkipRecovery {
		if dead, err := j.deadOwnerInFlight(ctx); err != nil {
			return refuse(err)
		} else if dead {
			w, err := Open(ctx, path, opts)
			if err != nil {
				return nil, err
			}
			if err := w.Close(); err != nil {
				return refuse(err)
			}
		}
	}
	ok = true
	return j, nil
}

// ReadOnly reports whether the journal was opened with OpenReadOnly.
func (j *Journal) ReadOnly() bool { return j.readOnly }

// Now is the journal's clock (Options.Now): the time it stamps rows with.
func (j *Journal) Now() time.Time { return j.now() }

// Path is the journal file's real path: absolute, symlinks resolved. On
// PostgreSQL it is the connection as postgres://user@host:port/database,
// without its password.
func (j *Journal) Path() string { return j.path }

// Owner is this process's liveness token, stored on the calls it sends.
func (j *Journal) Owner() string {
	if j.pg != nil {
		return j.pg.ownerID()
	}
	if j.owner == nil {
		return ""
	}
	return j.owner.id
}

// Recovered lists the calls that Open turned from in_flight into unknown
// because their owner had died.
func (j *Journal) Recovered() []int64 { return j.recovered }

// Close stops the writer after it has committed everything queued, and
// releases this process's owner lock. In-flight calls of this owner stay
// in_flight in the file until the next Open anywhere recovers them; callers
// (guard) end their attempts before closing. Close may be called more than
// once and from several goroutines: the first closes; the others return
// nil once the writer has stopped. A write after Close is ErrClosed.
func (j *Journal) Close() error {
	j.closeMu.Lock()
	if j.closed {
		j.closeMu.Unlock()
		<-j.done
		return nil // closed already, or being closed by another call
	}
	j.closed = true
	if j.pg != nil {
		j.closeMu.Unlock()
		return j.pg.close(j)
	}
	if j.readOnly {
		defer j.closeMu.Unlock()
		return j.closeHandles()
	}
	close(j.writes)
	if j.stopWAL != nil {
		close(j.stopWAL)
	}
	j.closeMu.Unlock()
	<-j.done
	if j.broken == nil {
		j.broken = j.files.check(j.path)
	}
	if j.broken != nil && j.loss.salvaged {
		// Written back, and every connection now is to the journal as
		// it now is: closed as usual.
		return errors.Join(j.broken, j.closeHandles())
	}
	if j.broken != nil {
		// The WAL this process wrote is not the journal's any more. Closing
		// the last connection would have SQLite copy it into the file, over
		// whatever other processes committed meanwhile: the connections are
		// left open, and the rows only this process saw die with it.
		return errors.Join(j.broken, j.owner.release())
	}
	return j.closeHandles()
}

func (j *Journal) closeHandles() error {
	var errs []error
	if j.version.conn != nil {
		errs = append(errs, j.version.conn.Close())
	}
	for _, st := range j.stmts {
		errs = append(errs, st.Close())
	}
	errs = append(errs, j.readStmts.close())
	if j.wconn != nil {
		errs = append(errs, j.wconn.Close())
	}
	if j.wdb != nil {
		errs = append(errs, j.wdb.Close())
	}
	if j.read != nil {
		errs = append(errs, j.read.Close())
	}
	if j.owner != nil {
		errs = append(errs, j.owner.release())
	}
	return errors.Join(errs...)
}

// createFile makes the folder 0700 and the file 0600 if they do not exist,
// so SQLite never creates them with the umask's looser modes.
func createFile(path string) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create folder: %w", err)
	}
	if err := checkFolder(dir); err != nil {
		return err // before a file is made in a folder others can write
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		return nil
	}
	if err != nil {
		return err
	}
	return f.Close()
}

// checkSchema refuses another application's database and a newer schema,
// reading only.
func (j *Journal) checkSchema(ctx context.Context) error {
	// One statement, so one snapshot: read one by one, another process's
	// first migration could commit in between (tables, but no id yet), and
	// a new journal would be taken for another application's database.
	var appID, version, tables int
	err := j.wconn.QueryRowContext(ctx, `SELECT
		(SELECT application_id FROM pragma_application_id),
		(SELECT user_version FROM pragma_user_version),
		(SELECT count(*) FROM sqlite_master)`).Scan(&appID, &version, &tables)
	if err != nil {
		return err // classified by Open: the header said SQLite, so this is damage, a lock, ...
	}
	if appID == 0 && tables == 0 && version == 0 {
		return nil // a new, empty database
	}
	if appID != applicationID {
		return fmt.Errorf("%w: it is a SQLite database of another application", ErrNotJournal)
	}
	if version > len(migrations) {
		return fmt.Errorf("%w (schema %d, this build knows %d): upgrade mcp-confirm", ErrNewerSchema, version, len(migrations))
	}
	return nil
}

// setWAL puts the journal in WAL mode (kept in the file, so only its first
// opening changes anything). SQLite answers a mode change that meets another
// connection's lock with SQLITE_BUSY at once, without its busy handler:
// processes opening a new journal together (four identical calls started at
// once) would have one fail. So a busy answer is retried here, within the
// same bound as any other wait for a lock.
func (j *Journal) setWAL(ctx context.Context, wait time.Duration) error {
	// Already in WAL mode (every journal after its first open): nothing to
	// change, and asking to change it is not asked of SQLite.
	var current string
	if err := j.wconn.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&current); err == nil && strings.EqualFold(current, "wal") {
		return nil
	}
	deadline := time.Now().Add(wait)
	for pause := time.Millisecond; ; pause = min(2*pause, 50*time.Millisecond) {
		var mode string
		err := j.wconn.QueryRowContext(ctx, "PRAGMA journal_mode=WAL").Scan(&mode)
		if err == nil && !strings.EqualFold(mode, "wal") {
			err = fmt.Errorf("SQLite kept journal mode %q", mode)
		}
		if err == nil || !isBusy(err) || !time.Now().Before(deadline) {
			return err
		}
		pause = min(pause, time.Until(deadline)+time.Millisecond)
		select {
		case <-time.After(pause):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// isBusy: SQLite said the database is locked (SQLITE_BUSY, or one of its
// extended codes, which keep the primary code in the low byte).
func isBusy(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_BUSY
}

// migrate runs the migrations the file lacks, in one IMMEDIATE
// transaction. A journal already at this build's schema (every open but
// the first after an upgrade) is left alone without taking the write lock,
// so opening never waits for another process's write transaction.
func (j *Journal) migrate(ctx context.Context) error {
	var current int
	if err := j.wconn.QueryRowContext(ctx, "PRAGMA user_version").Scan(&current); err != nil {
		return err
	}
	if current >= len(migrations) {
		return nil // checkSchema has refused a newer one
	}
	if _, err := j.wconn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	var version int
	if err := j.wconn.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version); err != nil {
		j.rollback()
		return err
	}
	for i := version; i < len(migrations); i++ {
		if _, err := j.wconn.ExecContext(ctx, migrations[i]); err != nil {
			j.rollback()
			return fmt.Errorf("migration %d: %w", i+1, err)
		}
		if code, ok := migrationCode[i+1]; ok {
			err := code.run(ctx, j.wconn)
			if err == nil {
				_, err = j.wconn.ExecContext(ctx, code.then)
			}
			if err != nil {
				j.rollback()
				return fmt.Errorf("migration %d: %w", i+1, err)
			}
		}
	}
	if version < len(migrations) {
		stmt := fmt.Sprintf("PRAGMA application_id = %d; PRAGMA user_version = %d", applicationID, len(migrations))
		if _, err := j.wconn.ExecContext(ctx, stmt); err != nil {
			j.rollback()
			return err
		}
	}
	_, err := j.wconn.ExecContext(ctx, "COMMIT")
	return err
}

func (j *Journal) rollback() {
	_, _ = j.wconn.ExecContext(context.Background(), "ROLLBACK")
}
