package pending

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
)

// The journal's operations are written once, in SQL both dialects read,
// with SQLite's '?' placeholders; they run on PostgreSQL through
// database/sql and pgx's driver, wrapped here so that nothing above this
// file knows which database it is on. The wrapper does two things:
//
//   - it renumbers '?' as PostgreSQL's $1, $2, … (once per statement text;
//     pgx then prepares and caches the statement per connection);
//   - it stores text as PostgreSQL's text can hold it (pgText): a hostile
//     server's result may carry invalid UTF-8 or a NUL, which SQLite
//     keeps and PostgreSQL refuses, and a refused outcome would leave the
//     call in flight. []byte arguments are text too (json.RawMessage):
//     no column of the journal is bytea.

// openPGDB is a database/sql pool on config through the wrapper.
func openPGDB(config *pgx.ConnConfig, maxConns int) *sql.DB {
	db := sql.OpenDB(pgConnector{stdlib.GetConnector(*config)})
	db.SetMaxOpenConns(maxConns)
	db.SetMaxIdleConns(maxConns)
	return db
}

type pgConnector struct{ base driver.Connector }

func (c pgConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.base.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &pgConn{Conn: conn.(*stdlib.Conn)}, nil
}

func (c pgConnector) Driver() driver.Driver { return c.base.Driver() }

// pgConn is pgx's connection with its statements renumbered; everything
// else (transactions, pings, session reset) is pgx's own, promoted.
//
// It also saves round trips, which cost 0.15-0.4 ms each on this machine
// kind, about half of a bare insert with its flush: a guarded write took
// 16 of them. A write's transaction (pgBackend.tx) leaves statements with
// the connection, to be sent in order, in one pipeline, with the next
// statement that is run (its BEGIN and SET LOCALs, an intent's lock, with
// its first read) or with COMMIT (the statements whose results no one
// reads, or only once it has committed: an intent's call and attempt,
// an outcome's updates; pgConn.commit).
type pgConn struct {
	*stdlib.Conn
	pending []pgQueued
	// beginPending: BEGIN is among pending, so no statement of the
	// transaction has reached the server yet.
	beginPending bool
}

type pgQueued struct {
	sql  string
	args []any
	scan []any // where its one row goes (deferQueryRow); nil: no row is read
	// setup: a statement that changes nothing a commit would keep (BEGIN,
	// SET LOCAL, a lock), so that a transaction of only these is no
	// transaction at all.
	setup bool
}

// begin leaves BEGIN and the given setup statements with the connection.
func (c *pgConn) begin(setup ...string) {
	c.pending, c.beginPending = []pgQueued{{sql: "BEGIN", setup: true}}, true
	for _, q := range setup {
		c.pending = append(c.pending, pgQueued{sql: q, setup: true})
	}
}

// deferSetup leaves a setup statement with the connection if BEGIN has
// not gone yet, and says whether it did.
func (c *pgConn) deferSetup(query string) bool {
	if !c.beginPending {
		return false
	}
	c.pending = append(c.pending, pgQueued{sql: query, setup: true})
	return true
}

// deferExec leaves a statement with the connection, to go with the next
// one, or with COMMIT. Its arguments are converted as database/sql
// converts them, then stored as text PostgreSQL can hold
// (CheckNamedValue).
func (c *pgConn) deferExec(query string, args []any) error {
	return c.deferQueryRow(query, args, nil)
}

// deferQueryRow is deferExec for a statement whose one row is scanned
// into dest when it is sent (an insert's RETURNING): dest holds it once
// the next statement, or COMMIT, has returned.
func (c *pgConn) deferQueryRow(query string, args []any, dest []any) error {
	values, err := pgValues(query, args)
	if err != nil {
		return err
	}
	c.pending = append(c.pending, pgQueued{sql: rebind(query), args: values, scan: dest})
	return nil
}

// pgValues are query's arguments as pgx is given them, past database/sql.
func pgValues(query string, args []any) ([]any, error) {
	values := make([]any, len(args))
	for i, a := range args {
		v, err := pgValue(a)
		if err != nil {
			return nil, fmt.Errorf("argument %d of %q: %w", i+1, query, err)
		}
		values[i] = v
	}
	return values, nil
}

func pgValue(a any) (any, error) {
	v, err := driver.DefaultParameterConverter.ConvertValue(a)
	if err != nil {
		return nil, err
	}
	switch t := v.(type) {
	case string:
		v = pgText(t)
	case []byte:
		v = pgText(string(t))
	}
	return v, nil
}

func (c *pgConn) Prepare(query string) (driver.Stmt, error) {
	return c.PrepareContext(context.Background(), query)
}

func (c *pgConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	if err := c.sendPending(ctx); err != nil {
		return nil, err
	}
	return c.Conn.PrepareContext(ctx, rebind(query))
}

func (c *pgConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	if len(c.pending) == 0 {
		return c.Conn.ExecContext(ctx, rebind(query), args)
	}
	values := make([]any, len(args))
	for i, a := range args {
		values[i] = a.Value // already through CheckNamedValue
	}
	var tag pgconn.CommandTag
	err := c.pipeline(ctx, query, values, func(br pgx.BatchResults) (err error) {
		tag, err = br.Exec()
		return err
	})
	if err != nil {
		return nil, err
	}
	return driver.RowsAffected(tag.RowsAffected()), nil
}

func (c *pgConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	if err := c.sendPending(ctx); err != nil {
		return nil, err
	}
	return c.Conn.QueryContext(ctx, rebind(query), args)
}

// queryRow runs query with what is pending, in one pipeline, and scans
// its first row into dest (sql.ErrNoRows if it has none: pgx.ErrNoRows
// is one).
func (c *pgConn) queryRow(ctx context.Context, query string, args []any, dest []any) error {
	values, err := pgValues(query, args)
	if err != nil {
		return err
	}
	return c.pipeline(ctx, query, values, func(br pgx.BatchResults) error {
		return br.QueryRow().Scan(dest...)
	})
}

// pipeline sends what is pending and then query in one batch, and reads
// query's result with last. A pending statement that fails is the error,
// and query is not run (a pipeline skips to its end after an error).
func (c *pgConn) pipeline(ctx context.Context, query string, args []any, last func(pgx.BatchResults) error) error {
	b := &pgx.Batch{}
	queued := c.take(b)
	b.Queue(rebind(query), args...)
	br := c.Conn.Conn().SendBatch(ctx, b)
	if err := readPending(br, queued); err != nil {
		_ = br.Close()
		return err
	}
	err := last(br)
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return err
}

// take queues what is pending on b, and returns it.
func (c *pgConn) take(b *pgx.Batch) []pgQueued {
	for _, q := range c.pending {
		b.Queue(q.sql, q.args...)
	}
	queued := c.pending
	c.pending, c.beginPending = nil, false
	return queued
}

// readPending reads the results of queued, in order: a statement's row
// into its scan, when it has one.
func readPending(br pgx.BatchResults, queued []pgQueued) error {
	for _, q := range queued {
		var err error
		if q.scan != nil {
			err = br.QueryRow().Scan(q.scan...)
		} else {
			_, err = br.Exec()
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// sendPending sends what is pending, in order, and nothing else.
func (c *pgConn) sendPending(ctx context.Context) error {
	if len(c.pending) == 0 {
		return nil
	}
	b := &pgx.Batch{}
	queued := c.take(b)
	br := c.Conn.Conn().SendBatch(ctx, b)
	err := readPending(br, queued)
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return err
}

// commit sends what is pending, the change notice and COMMIT in one
// pipeline, and reports COMMIT's tag. A statement that fails before
// COMMIT leaves the transaction aborted, and COMMIT unsent (a pipeline
// skips to its end after an error): commit rolls it back itself, and
// returns that statement's error.
func (c *pgConn) commit(ctx context.Context, notify string) (pgconn.CommandTag, error) {
	if c.beginPending && !slices.ContainsFunc(c.pending, func(q pgQueued) bool { return !q.setup }) {
		c.pending, c.beginPending = nil, false // nothing was run: no transaction to end
		return pgconn.NewCommandTag("COMMIT"), nil
	}
	c.pending = append(c.pending, pgQueued{sql: notify})
	var tag pgconn.CommandTag
	reached := false // COMMIT ran: it ends the transaction, whatever it says
	err := c.pipeline(ctx, "COMMIT", nil, func(br pgx.BatchResults) (err error) {
		reached = true
		tag, err = br.Exec()
		return err
	})
	var pe *pgconn.PgError
	if reached || !errors.As(err, &pe) {
		return tag, err // committed, refused at COMMIT, or no answer: it may have got as far as COMMIT
	}
	if _, rerr := c.Conn.Conn().Exec(ctx, "ROLLBACK"); rerr != nil {
		_ = c.Conn.Conn().Close(ctx) // and the pool drops it (ResetSession)
	}
	return tag, err
}

// discard forgets what is pending, for a transaction rolled back, and
// says whether BEGIN had gone, so that there is something to roll back.
func (c *pgConn) discard() (begun bool) {
	begun = !c.beginPending
	c.pending, c.beginPending = nil, false
	return begun
}

// CheckNamedValue runs for every argument, of statements prepared or not.
func (c *pgConn) CheckNamedValue(nv *driver.NamedValue) error {
	switch v := nv.Value.(type) {
	case string:
		nv.Value = pgText(v)
	case []byte:
		if v != nil {
			nv.Value = pgText(string(v))
		}
	}
	return c.Conn.CheckNamedValue(nv)
}

var rebound sync.Map // statement text -> its PostgreSQL form

// rebind renumbers the '?' placeholders of query as $1, $2, …, outside
// quoted text. The journal's statements are a fixed set, so the cache
// stays small.
func rebind(query string) string {
	if !strings.Contains(query, "?") {
		return query
	}
	if q, ok := rebound.Load(query); ok {
		return q.(string)
	}
	var b strings.Builder
	n := 0
	var quote byte // the quote character we are inside, or 0
	for i := 0; i < len(query); i++ {
		ch := query[i]
		switch {
		case quote != 0:
			if ch == quote {
				quote = 0
			}
		case ch == '\'' || ch == '"':
			quote = ch
		case ch == '?':
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteByte(ch)
	}
	q := b.String()
	rebound.Store(query, q)
	return q
}
