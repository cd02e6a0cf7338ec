package pending

import (
	"context"
	"crypto/rand"
	"database/sql"
	"database/sql/driver"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	mrand "math/rand/v2"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// The journal on PostgreSQL (issue 22): a team's journal, written by
// proxies and consoles on many machines. The operations (write.go,
// read.go, chain.go) are the same code on both backends; what differs
// lives here and in pgschema.go, pgowners.go and pgdriver.go:
//
//   - Writes. SQLite has one writer at a time (BEGIN IMMEDIATE), which is
//     what makes each operation's read-check-write (the resend hold, the
//     key check, a decision's state check) safe. On PostgreSQL each write
//     is a READ COMMITTED transaction of its own, and the reads it decides
//     on take locks instead, so that each sees the last committed word:
//     an intent takes a transaction lock on its (server, tool), under which
//     the key check and the hold run (two proxies sending the identical
//     write at once: one sends, the other is held); an operation on a call
//     reads its state FOR UPDATE (two operators deciding one call: one
//     wins, the other is refused by the state machine); a decision queues
//     on the chain's lock before it begins. (SERIALIZABLE did the same
//     without the locks, and under two processes' intents lost to
//     predicate-lock conflicts a dozen times running.) There is no group
//     commit in the process: concurrent writes commit on connections of
//     their own, and PostgreSQL groups their WAL flushes itself.
//   - Durability. An intent or a decision commits with synchronous_commit
//     on (a flush, on the standby too where one is configured); an outcome
//     with it off, as SQLite's outcome uses synchronous=NORMAL: a crash of
//     the server may lose the outcome, and the call recovers as unknown.
//   - Liveness. Each process holds an advisory lock keyed by its owner id
//     for as long as it lives (pgowners.go); an in-flight call is
//     recovered as unknown only once its owner's lock can be taken.
//   - Change notices. Every write sends NOTIFY inside its transaction
//     (delivered at commit); DataVersion counts the notices a listening
//     connection receives, and moves on each reconnect too, because
//     notices sent while it was away are not replayed.
//   - The fingerprint secret lives in the table mcp_confirm_secret, apart
//     from the calls (see pgMigrations).

// pgTestDial, set by tests only, wraps the journal's connections (to
// count the round trips a write makes).
var pgTestDial func(pgconn.DialFunc) pgconn.DialFunc

// IsPostgres reports whether db names a PostgreSQL journal rather than a
// SQLite file: a postgres:// or postgresql:// URL, or a libpq key/value
// string ("host=/run/postgresql dbname=team").
func IsPostgres(db string) bool {
	if strings.HasPrefix(db, "postgres://") || strings.HasPrefix(db, "postgresql://") {
		return true
	}
	key, _, ok := strings.Cut(strings.TrimSpace(db), "=")
	return ok && pgKeywords[strings.TrimSpace(key)]
}

// pgKeywords are libpq's connection keywords that begin a key/value string.
var pgKeywords = map[string]bool{
	"host": true, "hostaddr": true, "port": true, "dbname": true, "user": true, "password": true,
	"passfile": true, "service": true, "sslmode": true, "connect_timeout": true, "application_name": true,
	"sslrootcert": true, "sslcert": true, "sslkey": true, "options": true, "target_session_attrs": true,
}

const (
	pgPoolSize     = 16               // connections for reads and writes together
	pgMaxTries     = 12               // runs of one write that lost to a concurrent one
	pgWriteTimeout = 30 * time.Second // bounds a write on a server that stopped answering
	pgChannel      = "mcp_confirm"    // the NOTIFY channel
	pgLockSecret   = 2                // (pgLockClass, 2): making the secret
	pgLockIntents  = pgLockClass + 1  // (pgLockIntents, hash of server and tool)
)

// pgBackend is the PostgreSQL backend's state of an open Journal.
type pgBackend struct {
	conn   string // as given (it may hold a password): for the owner lock's reconnects
	config *pgx.ConnConfig

	ownerMu sync.Mutex // the owner lock's connection runs one query at a time
	owner   *pgOwnerLock
	closed  bool           // under ownerMu: the owner lock was given back
	writes  sync.WaitGroup // writes under way, which Close waits for

	// checkMu guards the owner checks durable writes wait on
	// (startOwnerCheck): the one running, and the one to run after it.
	checkMu      sync.Mutex
	checkRunning *ownerCheck
	checkNext    *ownerCheck

	// commitFault, set by tests only, runs in place of each COMMIT: it may
	// call commit and then lose its reply, or fail without calling it.
	commitFault func(commit func() error) error

	listenOnce sync.Once
	version    atomic.Int64
	// changedMu guards changed, closed (and replaced) at each notice so
	// that any number of watchers wake at once (Journal.Changed).
	changedMu  sync.Mutex
	changed    chan struct{}
	stopListen context.CancelFunc
	listenDone chan struct{}
}

func (p *pgBackend) ownerID() string {
	if p.owner == nil {
		return ""
	}
	return p.owner.id
}

// pgName is how a PostgreSQL journal is named in messages and by Path:
// without its password.
func pgName(c *pgx.ConnConfig) string {
	host := c.Host
	if strings.HasPrefix(host, "/") {
		host = "[" + host + "]" // a socket folder
	}
	return fmt.Sprintf("postgres://%s@%s:%d/%s", c.User, host, c.Port, c.Database)
}

// openPG is Open (or OpenReadOnly) of a PostgreSQL journal.
func openPG(ctx context.Context, conn string, opts Options, readOnly bool) (*Journal, error) {
	opts = opts.withDefaults()
	config, err := pgx.ParseConfig(conn)
	if err != nil {
		var pe *pgconn.ParseConfigError
		if errors.As(err, &pe) && errors.Unwrap(pe) != nil {
			err = errors.Unwrap(pe) // the text of pe may echo a password
		}
		return nil, fmt.Errorf("open journal: the PostgreSQL connection string is not valid: %v", err)
	}
	if config.ConnectTimeout == 0 {
		config.ConnectTimeout = opts.BusyTimeout
	}
	// pgx prepares each statement once per connection. After five runs
	// PostgreSQL may switch a prepared statement to a generic plan, one
	// that does not know the state a list asks for: on a 1M-call journal it
	// walked every call in date order and filtered, 250-585 ms for an empty
	// tab, against 0.2-0.4 ms with the state index (BenchmarkMillionCallsPG).
	// The journal's statements are cheap to plan; plan each for its values.
	if _, set := config.RuntimeParams["plan_cache_mode"]; !set {
		config.RuntimeParams["plan_cache_mode"] = "force_custom_plan"
	}
	if pgTestDial != nil {
		config.DialFunc = pgTestDial(config.DialFunc)
	}
	name := pgName(config)
	refuse := func(what string, err error) (*Journal, error) {
		return nil, fmt.Errorf("open journal %s: %s%w", name, what, err)
	}
	c, err := pgx.ConnectConfig(ctx, config)
	if err != nil {
		return refuse("connect: ", err)
	}
	if readOnly {
		err = pgCheckSchema(ctx, c)
	} else {
		err = pgMigrate(ctx, c)
	}
	c.Close(context.Background())
	if err != nil {
		return refuse("", err)
	}
	j := &Journal{path: name, now: opts.Now, host: opts.Host, readOnly: readOnly, done: make(chan struct{}),
		pg: &pgBackend{conn: conn, config: config}}
	close(j.done)
	j.read = openPGDB(config, pgPoolSize)
	j.wdb = j.read
	ok := false
	defer func() {
		if !ok {
			j.pg.close(j)
		}
	}()
	if readOnly {
		if !opts.SkipRecovery {
			dead, err := j.pgDeadOwnerInFlight(ctx)
			if err != nil {
				return refuse("", err)
			}
			if dead { // a read must show what is true: recover, by a brief writing open
				w, err := openPG(ctx, conn, opts, false)
				if err != nil {
					return nil, err
				}
				if err := w.Close(); err != nil {
					return refuse("", err)
				}
			}
		}
		ok = true
		return j, nil
	}
	if err := j.pgBindSecret(ctx); err != nil {
		return refuse("", err)
	}
	if j.pg.owner, err = acquirePGOwner(ctx, conn); err != nil {
		return refuse("", err)
	}
	if !opts.SkipRecovery {
		if j.recovered, err = j.Recover(ctx); err != nil {
			return refuse("recover: ", err)
		}
	}
	ok = true
	return j, nil
}

// pgCheckSchema is OpenReadOnly's check: a journal of this build's schema,
// which a read does not create or upgrade.
func pgCheckSchema(ctx context.Context, c *pgx.Conn) error {
	var marked bool
	if err := c.QueryRow(ctx, "SELECT to_regclass('mcp_confirm_schema') IS NOT NULL").Scan(&marked); err != nil {
		return err
	}
	if !marked {
		return &typedError{kind: ErrNoJournal, msg: "no journal in this database (it has no mcp_confirm_schema table); a read command creates none"}
	}
	var version int
	if err := c.QueryRow(ctx, "SELECT version FROM mcp_confirm_schema").Scan(&version); err != nil {
		return err
	}
	switch {
	case version > len(pgMigrations):
		return fmt.Errorf("%w (schema %d, this build knows %d): upgrade mcp-confirm", ErrNewerSchema, version, len(pgMigrations))
	case version < len(pgMigrations):
		return &typedError{kind: ErrNeedsMigration, msg: fmt.Sprintf(
			"the journal has schema %d and this build reads %d; a read command does not upgrade it: "+
				"run a writing command (the console, call, note) on it once", version, len(pgMigrations))}
	}
	return nil
}

// write runs fn in a transaction of its own, again from the start when it
// lost to a concurrent one (a deadlock), and commits it. Once begun it is
// seen through whatever ctx does, as a write queued on SQLite is: a
// caller never walks away from a row that may yet be committed.
func (p *pgBackend) write(ctx context.Context, j *Journal, level durability, fn func(context.Context, *sql.Conn) error) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), pgWriteTimeout)
	defer cancel()
	for try := 1; ; try++ {
		began := time.Now()
		committing, err := p.tx(ctx, j, level, fn)
		if obs := j.onCommit.Load(); obs != nil && committing {
			(*obs)(level >= durable, time.Since(began), err)
		}
		if !pgRetryable(err) || try == pgMaxTries {
			return err
		}
		// Back off a little, at random, so that the two do not meet again.
		time.Sleep(time.Duration(mrand.IntN(1<<min(try, 6))) * time.Millisecond)
	}
}

// tx is one run of write; committing says it got as far as COMMIT.
func (p *pgBackend) tx(ctx context.Context, j *Journal, level durability, fn func(context.Context, *sql.Conn) error) (committing bool, err error) {
	c, err := j.wdb.Conn(ctx)
	if err != nil {
		return false, err
	}
	defer c.Close()
	// BEGIN waits on the connection to go with the first statement
	// (pgConn); the statements whose results are not read go with COMMIT.
	// A write's statements find their rows by key, which a generic plan
	// does as well as a custom one, and planning each run was a third of
	// an intent's time (force_custom_plan is for the lists; openPG).
	setup := []string{"SET LOCAL plan_cache_mode = auto"}
	if level == lazy {
		setup = append(setup, "SET LOCAL synchronous_commit = off")
	}
	var pc *pgConn
	if err := c.Raw(func(dc any) error { pc = dc.(*pgConn); return nil }); err != nil {
		return false, err
	}
	if level == deciding {
		// Every decision reads and moves the chain's head: two at once
		// cannot both commit, and sixteen at once would mostly run again.
		// They queue on the chain's advisory lock instead, taken before the
		// transaction's snapshot so that each sees the one before it.
		if _, err := c.ExecContext(ctx, "SELECT pg_advisory_lock(?, ?)", pgLockClass, pgLockChain); err != nil {
			return false, fmt.Errorf("wait for the decision chain: %w", err)
		}
		defer c.ExecContext(context.Background(), "SELECT pg_advisory_unlock(?, ?)", pgLockClass, pgLockChain)
	}
	pc.begin(setup...)
	ended := false
	defer func() {
		if !ended && pc.discard() {
			_, _ = c.ExecContext(context.Background(), "ROLLBACK")
		}
	}()
	var owner *ownerCheck
	if level == durable || level == deciding {
		owner = p.startOwnerCheck()
	}
	if err := runGuarded(ctx, c, fn); err != nil {
		return false, err
	}
	if owner != nil {
		if err := owner.wait(ctx); err != nil {
			return false, err
		}
	}
	ended = true
	var unconfirmed error
	err = c.Raw(func(any) error {
		// database/sql hides COMMIT's reply, and PostgreSQL answers COMMIT
		// of a transaction a statement failed in with ROLLBACK, not an
		// error: an intent would seem committed that is not.
		commit := func() error {
			tag, err := pc.commit(ctx, "SELECT pg_notify('"+pgChannel+"', '')")
			if err == nil && tag.String() != "COMMIT" {
				return &pgconn.PgError{Code: "25P02", Message: fmt.Sprintf("the server rolled the transaction back (%s)", tag)}
			}
			return err
		}
		var err error
		if p.commitFault != nil {
			err = p.commitFault(commit)
		} else {
			err = commit()
		}
		var pe *pgconn.PgError
		if err != nil && !errors.As(err, &pe) {
			// No reply: the connection broke, or the clock ran out, with
			// COMMIT on its way. It may have committed. The connection is
			// dropped (its transaction, if still open, dies with it).
			unconfirmed = err
			return driver.ErrBadConn
		}
		return err
	})
	if unconfirmed != nil {
		return true, fmt.Errorf("commit: %w (%v)", ErrCommitUnconfirmed, unconfirmed)
	}
	if err != nil {
		return true, fmt.Errorf("commit: %w", err)
	}
	return true, nil
}

// ErrCommitUnconfirmed: the journal's server gave no answer to a COMMIT
// (the connection broke on the way), so the write may or may not have
// committed. Not retried: a write is run again only when it surely did not.
var ErrCommitUnconfirmed = errors.New("the journal did not confirm the commit")

// forUpdate is the clause that locks the rows a write's read decides on
// (of table alias, when the query joins): PostgreSQL's FOR UPDATE; on
// SQLite nothing, whose writes are one at a time and which has no such
// clause.
func (j *Journal) forUpdate(alias string) string {
	switch {
	case j.pg == nil:
		return ""
	case alias != "":
		return " FOR UPDATE OF " + alias
	}
	return " FOR UPDATE"
}

// lockIntents makes concurrent intents for one (server, tool) take turns,
// on PostgreSQL, until the transaction ends: the key check and the resend
// hold are both within a (server, tool), and must see each other's rows.
func (j *Journal) lockIntents(ctx context.Context, c *sql.Conn, server, tool string) error {
	if j.pg == nil {
		return nil
	}
	h := fnv.New32a()
	h.Write([]byte(server + "\x00" + tool))
	// First in the transaction: it goes with the BEGIN before it and the
	// key check after it (or the one-trip insert that holds the check,
	// recordIntentAtOnce), in one round trip (pgConn). The check is the
	// next statement, so it sees what the lock's last holder committed.
	lock := fmt.Sprintf("SELECT pg_advisory_xact_lock(%d, %d)", pgLockIntents, int32(h.Sum32()))
	var deferred bool
	if err := c.Raw(func(dc any) error { deferred = dc.(*pgConn).deferSetup(lock); return nil }); err != nil || deferred {
		return err
	}
	_, err := j.exec(ctx, c, lock)
	return err
}

// runGuarded runs fn, turning a panic into an error so that the
// transaction is rolled back and the connection given back.
func runGuarded(ctx context.Context, c *sql.Conn, fn func(context.Context, *sql.Conn) error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("journal write panicked: %v", p)
		}
	}()
	return fn(ctx, c)
}

// pgRetryable: the transaction lost to a concurrent one (a deadlock, a
// serialization failure) and ran nothing that lasts; run it again.
func pgRetryable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40001" || pe.Code == "40P01")
}

// ownerCheck is one run of ensureOwner, which durable writes wait on.
type ownerCheck struct {
	done chan struct{}
	err  error
}

func (o *ownerCheck) wait(ctx context.Context) error {
	select {
	case <-o.done:
		return o.err
	case <-ctx.Done():
		return fmt.Errorf("%w: the check of this process's journal lock did not end: %v", ErrOwnerLockLost, ctx.Err())
	}
}

// startOwnerCheck gives a durable write a check of the owner lock that
// starts at or after this moment, for it to wait on before its COMMIT:
// the lock is then known to have been held during the transaction. The
// check runs beside the transaction's statements rather than after them
// (a round trip less to wait for), and writes at once share one: those
// that come while a check runs share the next, which starts when it ends.
func (p *pgBackend) startOwnerCheck() *ownerCheck {
	p.checkMu.Lock()
	defer p.checkMu.Unlock()
	if p.checkRunning == nil {
		p.checkRunning = &ownerCheck{done: make(chan struct{})}
		go p.runOwnerChecks(p.checkRunning)
		return p.checkRunning
	}
	if p.checkNext == nil {
		p.checkNext = &ownerCheck{done: make(chan struct{})}
	}
	return p.checkNext
}

// runOwnerChecks runs check, then each next one asked for meanwhile.
func (p *pgBackend) runOwnerChecks(check *ownerCheck) {
	for check != nil {
		ctx, cancel := context.WithTimeout(context.Background(), pgWriteTimeout)
		check.err = p.ensureOwner(ctx)
		cancel()
		close(check.done)
		p.checkMu.Lock()
		check, p.checkNext = p.checkNext, nil
		p.checkRunning = check
		p.checkMu.Unlock()
	}
}

// ensureOwner is checked before every durable commit: this process's
// liveness lock must still be held. A lost one is taken again on a new
// connection; until then nothing is committed, so nothing is sent.
func (p *pgBackend) ensureOwner(ctx context.Context) error {
	p.ownerMu.Lock()
	defer p.ownerMu.Unlock()
	if p.closed {
		return fmt.Errorf("%w: the journal is closed", ErrOwnerLockLost)
	}
	err := p.owner.ensure(ctx)
	if !errors.Is(err, ErrOwnerLockLost) {
		return err
	}
	if rerr := p.owner.reacquire(ctx, p.conn); rerr != nil {
		return fmt.Errorf("%w; nothing was recorded or sent (%v)", err, rerr)
	}
	// Taken again. Another process may have recovered this owner's calls
	// meanwhile: what comes back for them is recorded as a late answer.
	return nil
}

func (p *pgBackend) close(j *Journal) error {
	p.writes.Wait()
	p.listenOnce.Do(func() {}) // no listener starts after this
	if p.stopListen != nil {
		p.stopListen()
		<-p.listenDone
	}
	var errs []error
	if j.read != nil {
		errs = append(errs, j.read.Close())
	}
	if p.owner != nil {
		p.ownerMu.Lock()
		errs = append(errs, p.owner.release(context.Background()))
		p.closed = true
		p.ownerMu.Unlock()
	}
	return errors.Join(errs...)
}

// dataVersion is DataVersion on PostgreSQL: the count of change notices
// (and reconnects) the listening connection has seen. The listener starts
// on first use.
func (p *pgBackend) dataVersion() int64 {
	p.listenOnce.Do(p.listen)
	return p.version.Load()
}

// bump counts a notice (or a reconnect) and wakes the watchers.
func (p *pgBackend) bump() {
	p.version.Add(1)
	p.changedMu.Lock()
	if p.changed != nil {
		close(p.changed)
		p.changed = nil
	}
	p.changedMu.Unlock()
}

// wake is closed at the next notice.
func (p *pgBackend) wake() <-chan struct{} {
	p.listenOnce.Do(p.listen)
	p.changedMu.Lock()
	defer p.changedMu.Unlock()
	if p.changed == nil {
		p.changed = make(chan struct{})
	}
	return p.changed
}

func (p *pgBackend) listen() {
	ctx, cancel := context.WithCancel(context.Background())
	p.stopListen, p.listenDone = cancel, make(chan struct{})
	go func() {
		defer close(p.listenDone)
		for ctx.Err() == nil {
			conn, err := pgx.ConnectConfig(ctx, p.config)
			if err == nil {
				if _, err = conn.Exec(ctx, "LISTEN "+pgChannel); err == nil {
					p.bump() // what was missed while away is re-read
					for err == nil {
						if _, err = conn.WaitForNotification(ctx); err == nil {
							p.bump()
						}
					}
				}
				conn.Close(context.Background())
			}
			select {
			case <-ctx.Done():
			case <-time.After(500 * time.Millisecond):
			}
		}
	}()
}

// pgRecover is Recover on PostgreSQL: in one write, the in-flight calls of
// every owner whose liveness lock can be taken (its session is gone)
// become unknown. The locks taken stay held until that write commits, so
// an owner cannot come back half way through.
func (j *Journal) pgRecover(ctx context.Context) ([]int64, error) {
	var recovered []int64
	err := j.write(ctx, durable, func(ctx context.Context, c *sql.Conn) error {
		recovered = nil
		owners, err := queryColumn[string](ctx, c,
			"SELECT DISTINCT owner FROM calls WHERE state = 'in_flight' AND owner <> ?", j.Owner())
		if err != nil {
			return err
		}
		dead, err := pgDeadOwners(ctx, c, owners)
		if err != nil {
			return err
		}
		now := formatTime(j.now())
		for _, o := range dead {
			ids, err := j.recoverOwner(ctx, c, o, nil, now)
			if err != nil {
				return err
			}
			recovered = append(recovered, ids...)
		}
		return nil
	})
	return recovered, err
}

// pgDeadOwnerInFlight reports whether an in-flight call's owner is gone,
// without writing (OpenReadOnly's look).
func (j *Journal) pgDeadOwnerInFlight(ctx context.Context) (bool, error) {
	tx, err := j.read.BeginTx(ctx, nil)
	if err != nil {
		return false, err
	}
	defer tx.Rollback()
	rows, err := tx.QueryContext(ctx, "SELECT DISTINCT owner FROM calls WHERE state = 'in_flight'")
	if err != nil {
		return false, err
	}
	var owners []string
	for rows.Next() {
		var o string
		if err := rows.Scan(&o); err != nil {
			rows.Close()
			return false, err
		}
		owners = append(owners, o)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return false, err
	}
	dead, err := pgDeadOwners(ctx, tx, owners)
	return len(dead) > 0, err
}

// pgSecretWhere names where a PostgreSQL journal keeps its secret.
const pgSecretWhere = "(the table mcp_confirm_secret)"

// pgBindSecret loads the journal's fingerprint secret from the database,
// making it for a new journal, under the secret's advisory lock so that
// processes opening a new journal together make one.
func (j *Journal) pgBindSecret(ctx context.Context) error {
	tx, err := j.wdb.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, "SELECT pg_advisory_xact_lock(?, ?)", pgLockClass, pgLockSecret); err != nil {
		return fmt.Errorf("take the secret's lock: %w", err)
	}
	var check, stored string
	err = tx.QueryRowContext(ctx, "SELECT value FROM meta WHERE name = 'secret_check'").Scan(&check)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return err
	}
	err = tx.QueryRowContext(ctx, "SELECT secret FROM mcp_confirm_secret LIMIT 1").Scan(&stored)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("read the fingerprint secret %s: %w", pgSecretWhere, err)
	}
	switch {
	case check != "" && stored == "":
		return &typedError{kind: ErrSecretMissing, msg: "the journal's fingerprint secret " + pgSecretWhere +
			" is missing: without it no new call can be matched with the calls already recorded"}
	case check != "":
		secret, err := hex.DecodeString(stored)
		if err != nil {
			return &typedError{kind: ErrSecretMismatch, msg: "the journal's fingerprint secret " + pgSecretWhere + " is not hex"}
		}
		return j.useSecret(secret, check)
	}
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, "DELETE FROM mcp_confirm_secret"); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO mcp_confirm_secret (secret) VALUES (?)", hex.EncodeToString(secret)); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO meta (name, value) VALUES ('secret_check', ?)", seal(secret, secretCheckInput)); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	j.secret = secret
	return nil
}

// HidePassword is db as it may be shown or written down: a PostgreSQL
// connection string's password, if it has one, replaced by "xxxxx";
// anything else unchanged. (A password belongs in ~/.pgpass or
// $PGPASSWORD, which libpq and pgx read.)
func HidePassword(db string) string {
	if !IsPostgres(db) {
		return db
	}
	if u, err := url.Parse(db); err == nil && u.Scheme != "" {
		return u.Redacted()
	}
	return pgPasswordField.ReplaceAllString(db, "${1}xxxxx")
}

// HasPassword reports whether a PostgreSQL connection string carries a
// password of its own.
func HasPassword(db string) bool { return IsPostgres(db) && HidePassword(db) != db }

var pgPasswordField = regexp.MustCompile(`(\bpassword\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)`)

// ReasonIntentUnconfirmed is the reason of a call whose intent the journal
// committed without confirming it (ErrCommitUnconfirmed): it was not sent.
const ReasonIntentUnconfirmed = "not sent: the journal did not confirm the commit of its intent"

// settleUnconfirmedIntent follows an intent whose COMMIT was not answered.
// Nothing was sent either way (the caller sends only after a confirmed
// commit). But if it did commit, it is in flight under this live process,
// and would one day be recovered as unknown: a write that was never sent,
// shown as one that may have happened. So once the journal answers again
// (it is retried for a while, as after a server restart) the call is
// looked up by its key and, if there, settled as failed, not sent.
func (j *Journal) settleUnconfirmedIntent(ctx context.Context, in Intent, cause error) error {
	var id int64
	recorded, err := j.settleUnconfirmed(ctx, func(ctx context.Context) (bool, error) {
		return true, j.read.QueryRowContext(ctx, "SELECT id FROM calls WHERE server = ? AND tool = ? AND key = ? AND owner = ? AND state = 'in_flight'",
			in.Server, in.Tool, in.Key, j.Owner()).Scan(&id)
	}, func(ctx context.Context) error {
		return j.RecordOutcome(ctx, id, 1, Outcome{Event: EventFailed, Reason: ReasonIntentUnconfirmed})
	})
	switch {
	case err != nil:
		return fmt.Errorf("%w; nothing was sent, but whether it was recorded cannot be read (%v): "+
			"if it was, it stays in flight until recovery makes it unknown", cause, err)
	case !recorded:
		return fmt.Errorf("%w; it was not recorded, and nothing was sent", cause)
	}
	return fmt.Errorf("%w; it was recorded as call %d, now failed (not sent): nothing was sent", cause, id)
}

// settleUnconfirmed is the loop of both settles: find says whether the
// row an unconfirmed COMMIT may have made is there (a sql.ErrNoRows is "not
// there"; a query with no row to miss returns false itself); if so, end
// settles it. Both are tried again every 200 ms, as the journal may be
// restarting, for pgWriteTimeout at most; the error is the last one.
func (j *Journal) settleUnconfirmed(ctx context.Context, find func(context.Context) (bool, error), end func(context.Context) error) (recorded bool, err error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), pgWriteTimeout)
	defer cancel()
	for {
		var there bool
		there, err = find(ctx)
		if errors.Is(err, sql.ErrNoRows) || (err == nil && !there) {
			return false, nil
		}
		if err == nil {
			if err = end(ctx); err == nil {
				return true, nil
			}
		}
		select {
		case <-ctx.Done():
			return false, err
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// ReasonRetryUnconfirmed is the reason of a retry's attempt that the
// journal committed without confirming it: it was not sent.
const ReasonRetryUnconfirmed = "not sent: the journal did not confirm the commit of the retry"

// settleUnconfirmedRetry follows a retry whose COMMIT was not answered,
// as settleUnconfirmedIntent does an intent: nothing was sent, but if the
// retry committed, its attempt n is open under this live process, the call
// in flight until recovery one day makes it unknown. So the attempt is
// ended, not sent, and the call goes back to where it was: unknown stays
// unknown (the earlier attempt may have taken effect; "failed" would be a
// false outcome), failed stays failed.
func (j *Journal) settleUnconfirmedRetry(ctx context.Context, callID int64, n int, prior State, cause error) error {
	o := Outcome{Event: EventFailed, Reason: ReasonRetryUnconfirmed}
	if prior == StateUnknown {
		o = Outcome{Event: EventLost, Reason: ReasonRetryUnconfirmed + "; the earlier attempt's outcome is still unknown"}
	}
	recorded, err := j.settleUnconfirmed(ctx, func(ctx context.Context) (bool, error) {
		var open int
		err := j.read.QueryRowContext(ctx, "SELECT count(*) FROM attempts WHERE call_id = ? AND n = ? AND owner = ? AND ended_at IS NULL",
			callID, n, j.Owner()).Scan(&open)
		return open > 0, err
	}, func(ctx context.Context) error { return j.RecordOutcome(ctx, callID, n, o) })
	switch {
	case err != nil:
		return fmt.Errorf("%w; nothing was sent, but whether the retry of call %d was recorded cannot be read (%v): "+
			"if it was, the call stays in flight until recovery makes it unknown", cause, callID, err)
	case !recorded:
		return fmt.Errorf("%w; the retry of call %d was not recorded, and nothing was sent", cause, callID)
	}
	return fmt.Errorf("%w; the retry of call %d was recorded as attempt %d, now ended not sent: nothing was sent", cause, callID, n)
}
