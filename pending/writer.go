package pending

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Durability of a write. An intent (a row that must exist before anything
// is sent) and an operator's decision are committed with a full fsync. An
// outcome may commit with synchronous=NORMAL: if a power cut loses it, the
// call recovers as unknown, which is the safe direction.
type durability int

const (
	lazy durability = iota
	durable
	// deciding is durable, for a write that appends to the decision chain:
	// on PostgreSQL such writes queue for the chain before they begin.
	deciding
	// durableSelfChecked is durable, on PostgreSQL, for a write whose own
	// statement checks the owner lock (recordIntentAtOnce): it waits on no
	// check beside it.
	durableSelfChecked
)

// writeReq is one unit of work for the writer goroutine. fn runs inside a
// savepoint of a shared transaction: if it fails, only its own changes are
// rolled back and the rest of the batch still commits.
type writeReq struct {
	sync durability
	fn   func(ctx context.Context, c *sql.Conn) error
	done chan error
	// afterLoss: RecordOutcomeAfterLoss, the one write taken after the
	// journal's WAL was lost and this process's calls written back.
	afterLoss bool
}

// maxBatch bounds one group commit; beyond it, latency grows for no gain.
const maxBatch = 256

// write queues fn and waits for its batch to commit. Once queued, fn is
// waited for even if ctx ends, so a caller never walks away from a row that
// may yet be committed.
func (j *Journal) write(ctx context.Context, sync durability, fn func(ctx context.Context, c *sql.Conn) error) error {
	if j.readOnly {
		return ErrWriteReadOnly
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	req := &writeReq{sync: sync, fn: fn, done: make(chan error, 1), afterLoss: ctx.Value(afterLossKey{}) != nil}
	j.closeMu.RLock()
	if j.closed {
		j.closeMu.RUnlock()
		return ErrClosed
	}
	if j.pg != nil {
		j.pg.writes.Add(1) // Close waits for it
		j.closeMu.RUnlock()
		defer j.pg.writes.Done()
		return j.pg.write(ctx, j, sync, fn)
	}
	j.writes <- req // never closed while a reader lock is held
	j.closeMu.RUnlock()
	return <-req.done
}

// writer is the journal's only writer in this process. It takes everything
// queued while the previous commit was running and commits it as one
// transaction: concurrent intents share one fsync (group commit) instead of
// queueing one each.
func (j *Journal) writer() {
	defer close(j.done)
	ctx := context.Background()
	current := -1 // synchronous level set on the connection
	for req := range j.writes {
		batch := []*writeReq{req}
	drain:
		for len(batch) < maxBatch {
			select {
			case r, ok := <-j.writes:
				if !ok {
					break drain
				}
				batch = append(batch, r)
			default:
				break drain
			}
		}
		level := lazy
		for _, r := range batch {
			if r.sync >= durable {
				level = durable
			}
		}
		if int(level) != current {
			pragma := "PRAGMA synchronous=NORMAL"
			if level == durable {
				pragma = "PRAGMA synchronous=FULL"
			}
			if _, err := j.wconn.ExecContext(ctx, pragma); err != nil {
				fail(batch, fmt.Errorf("set %s: %w", pragma, err))
				continue
			}
			current = int(level)
		}
		j.commitBatch(ctx, batch, level)
	}
}

// CommitObserver is told of each commit of this process's writer: whether
// it was durable (a full fsync: an intent, a decision), how long it took
// from BEGIN to the end of COMMIT, and its error. It runs on the writer
// goroutine and must not block (a metrics histogram).
type CommitObserver func(durable bool, took time.Duration, err error)

// ObserveCommits sets the journal's CommitObserver (nil: none); it may be
// called while the journal is in use.
func (j *Journal) ObserveCommits(fn CommitObserver) {
	if fn == nil {
		j.onCommit.Store(nil)
		return
	}
	j.onCommit.Store(&fn)
}

func (j *Journal) commitBatch(ctx context.Context, batch []*writeReq, level durability) {
	began := time.Now()
	err := j.commit(ctx, batch, level)
	if obs := j.onCommit.Load(); obs != nil {
		(*obs)(level == durable, time.Since(began), err)
	}
}

// commit runs batch in one transaction and releases its callers; it
// returns the error that failed the whole batch, nil when it committed.
func (j *Journal) commit(ctx context.Context, batch []*writeReq, level durability) error {
	if j.broken != nil {
		if batch = j.refuseBroken(batch); len(batch) == 0 {
			return j.broken
		}
	}
	if _, err := j.wconn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		err = fmt.Errorf("begin: %w", err)
		fail(batch, err)
		return err
	}
	results := make([]error, len(batch))
	for i, r := range batch {
		results[i] = j.runInSavepoint(ctx, r.fn)
	}
	if err := j.beforeCommit(level); err != nil {
		j.rollback()
		if errors.Is(err, ErrJournalReplaced) && !batch[0].afterLoss {
			// Found now: what this process wrote goes back into the
			// journal as it now is before anyone is told (walloss.go).
			j.salvage()
		}
		fail(batch, err)
		return err
	}
	if _, err := j.wconn.ExecContext(ctx, "COMMIT"); err != nil {
		j.rollback()
		err = fmt.Errorf("commit: %w", err)
		fail(batch, err)
		return err
	}
	for i, r := range batch {
		r.done <- results[i]
	}
	return nil
}

// beforeCommit checks, just before a batch commits, that the commit will
// land where every other process reads: the journal's WAL and file are
// still the ones Open found (else this and every later write fail with
// ErrJournalReplaced), and, for a durable batch (an intent, a decision),
// that this owner's lock file is in place, put back if something removed it.
func (j *Journal) beforeCommit(level durability) error {
	if err := j.files.check(j.path); err != nil {
		j.broken = err
		return err
	}
	if level == durable {
		return j.owner.ensure()
	}
	return nil
}

func (j *Journal) runInSavepoint(ctx context.Context, fn func(context.Context, *sql.Conn) error) (err error) {
	if _, err := j.exec(ctx, j.wconn, "SAVEPOINT op"); err != nil {
		return err
	}
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("journal write panicked: %v", p)
		}
		if err != nil {
			_, _ = j.exec(ctx, j.wconn, "ROLLBACK TO op")
		}
		_, _ = j.exec(ctx, j.wconn, "RELEASE op")
	}()
	return fn(ctx, j.wconn)
}

func fail(batch []*writeReq, err error) {
	for _, r := range batch {
		r.done <- err
	}
}

// exec and queryRow run a statement on the writer connection through a
// cache of prepared statements: parsing SQL was a fifth of an intent's cost.
// Only the writer goroutine calls them, so the cache needs no lock.
func (j *Journal) exec(ctx context.Context, c *sql.Conn, query string, args ...any) (sql.Result, error) {
	if j.pg != nil { // many writers at once; pgx caches each connection's statements itself
		return c.ExecContext(ctx, query, args...)
	}
	st, err := j.prepared(ctx, c, query)
	if err != nil {
		return nil, err
	}
	return st.ExecContext(ctx, args...)
}

// execAtCommit runs a statement whose result no one reads, among the last
// of a write: on SQLite now, through exec; on PostgreSQL it is sent with
// the COMMIT, in the same round trip (pgConn), or before any statement
// that follows it. Its error, if any, is the write's.
func (j *Journal) execAtCommit(ctx context.Context, c *sql.Conn, query string, args ...any) error {
	if j.pg == nil {
		_, err := j.exec(ctx, c, query, args...)
		return err
	}
	return c.Raw(func(dc any) error { return dc.(*pgConn).deferExec(query, args) })
}

// queryRowAtCommit is execAtCommit for a statement that returns one row
// (an insert's RETURNING), scanned into dest: on SQLite now; on
// PostgreSQL when it is sent, so dest is known only once the write has
// committed. Nothing in the write may read dest.
func (j *Journal) queryRowAtCommit(ctx context.Context, c *sql.Conn, dest []any, query string, args ...any) error {
	if j.pg == nil {
		return j.queryRow(ctx, c, query, args...).Scan(dest...)
	}
	return c.Raw(func(dc any) error { return dc.(*pgConn).deferQueryRow(query, args, dest) })
}

// rowScanner is a *sql.Row, or on PostgreSQL a pgRow.
type rowScanner interface{ Scan(dest ...any) error }

func (j *Journal) queryRow(ctx context.Context, c *sql.Conn, query string, args ...any) rowScanner {
	if j.pg != nil {
		return pgRow{ctx: ctx, c: c, query: query, args: args}
	}
	st, err := j.prepared(ctx, c, query)
	if err != nil {
		return c.QueryRowContext(ctx, query, args...) // reports the same error through Scan
	}
	return st.QueryRowContext(ctx, args...)
}

// pgRow is a write's one-row query on PostgreSQL, run when it is scanned:
// with the statements pending on the connection, in one round trip, when
// there are any (pgConn.queryRow).
type pgRow struct {
	ctx   context.Context
	c     *sql.Conn
	query string
	args  []any
}

func (r pgRow) Scan(dest ...any) error {
	var pending bool
	err := r.c.Raw(func(dc any) error {
		pc := dc.(*pgConn)
		if pending = len(pc.pending) > 0; pending {
			return pc.queryRow(r.ctx, r.query, r.args, dest)
		}
		return nil
	})
	if pending || err != nil {
		return err
	}
	return r.c.QueryRowContext(r.ctx, r.query, r.args...).Scan(dest...)
}

func (j *Journal) prepared(ctx context.Context, c *sql.Conn, query string) (*sql.Stmt, error) {
	if st, ok := j.stmts[query]; ok {
		return st, nil
	}
	st, err := c.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	if j.stmts == nil {
		j.stmts = map[string]*sql.Stmt{}
	}
	j.stmts[query] = st
	return st, nil
}
