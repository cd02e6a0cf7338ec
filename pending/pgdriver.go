package pending

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
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
// It also saves round trips, which cost 0.15-0.3 ms each on this machine
// kind, about half of a bare insert's flush: a guarded write took 16 of
// them. A write's transaction (pgBackend.tx) leaves two kinds of
// statement with it to send later, in order, before anything else:
//
//   - prefix: simple statements that return nothing (BEGIN, SET LOCAL),
//     sent in the same simple query as the next statement that has no
//     arguments (an intent's lock), or alone before any other;
//   - atCommit: statements whose results no one reads (an attempt's
//     insert, an outcome's updates), sent in one pipeline with the
//     notice and COMMIT (pgConn.commit); any other statement sends them
//     first, so their order is always the order they were given in.
type pgConn struct {
	*stdlib.Conn
	prefix   string
	atCommit []pgQueued
}

type pgQueued struct {
	sql  string
	args []any
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
	if c.prefix != "" && len(args) == 0 && len(c.atCommit) == 0 {
		query, c.prefix = c.prefix+"; "+query, ""
		return c.Conn.ExecContext(ctx, query, nil) // one simple query: no arguments
	}
	if err := c.sendPending(ctx); err != nil {
		return nil, err
	}
	return c.Conn.ExecContext(ctx, rebind(query), args)
}

func (c *pgConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	if err := c.sendPending(ctx); err != nil {
		return nil, err
	}
	return c.Conn.QueryContext(ctx, rebind(query), args)
}

// deferExec keeps a statement to send with the next one, or with COMMIT.
// Its arguments are converted as database/sql converts them, then stored
// as text PostgreSQL can hold (CheckNamedValue).
func (c *pgConn) deferExec(query string, args []any) error {
	q := pgQueued{sql: rebind(query), args: make([]any, len(args))}
	for i, a := range args {
		v, err := driver.DefaultParameterConverter.ConvertValue(a)
		if err != nil {
			return fmt.Errorf("argument %d of %q: %w", i+1, query, err)
		}
		switch t := v.(type) {
		case string:
			v = pgText(t)
		case []byte:
			v = pgText(string(t))
		}
		q.args[i] = v
	}
	c.atCommit = append(c.atCommit, q)
	return nil
}

// sendPending sends what is left with the connection, in order.
func (c *pgConn) sendPending(ctx context.Context) error {
	if c.prefix != "" {
		prefix := c.prefix
		c.prefix = ""
		if _, err := c.Conn.Conn().Exec(ctx, prefix); err != nil {
			return err
		}
	}
	if len(c.atCommit) == 0 {
		return nil
	}
	b := &pgx.Batch{}
	c.queue(b)
	return c.Conn.Conn().SendBatch(ctx, b).Close()
}

func (c *pgConn) queue(b *pgx.Batch) {
	for _, q := range c.atCommit {
		b.Queue(q.sql, q.args...)
	}
	c.atCommit = nil
}

// commit sends what is left, the change notice and COMMIT in one
// pipeline, and reports COMMIT's tag. A statement that fails before
// COMMIT leaves the transaction aborted, and COMMIT unsent (a pipeline
// skips to its end after an error): commit rolls it back itself, and
// returns that statement's error.
func (c *pgConn) commit(ctx context.Context, notify string) (pgconn.CommandTag, error) {
	if c.prefix != "" && len(c.atCommit) == 0 { // nothing was run: no transaction to end
		c.prefix = ""
		return pgconn.NewCommandTag("COMMIT"), nil
	}
	if c.prefix != "" { // a batch's statements take no multi-statement text
		prefix := c.prefix
		c.prefix = ""
		if _, err := c.Conn.Conn().Exec(ctx, prefix); err != nil {
			c.atCommit = nil
			return pgconn.CommandTag{}, err
		}
	}
	b := &pgx.Batch{}
	c.queue(b)
	before := b.Len()
	b.Queue(notify)
	b.Queue("COMMIT")
	br := c.Conn.Conn().SendBatch(ctx, b)
	var failed error
	for range before + 1 {
		if _, err := br.Exec(); err != nil {
			failed = err
			break
		}
	}
	var tag pgconn.CommandTag
	if failed == nil {
		tag, failed = br.Exec()
		if cerr := br.Close(); failed == nil {
			failed = cerr
		}
		return tag, failed
	}
	_ = br.Close()
	var pe *pgconn.PgError
	if !errors.As(failed, &pe) {
		return tag, failed // no answer: it may have got as far as COMMIT
	}
	if _, err := c.Conn.Conn().Exec(ctx, "ROLLBACK"); err != nil {
		_ = c.Conn.Conn().Close(ctx) // and the pool drops it (ResetSession)
	}
	return tag, failed
}

// discard forgets what is left, for a transaction rolled back; begun says
// whether BEGIN was sent, so that there is something to roll back.
func (c *pgConn) discard() (begun bool) {
	begun = c.prefix == ""
	c.prefix, c.atCommit = "", nil
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
