package pending

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"strconv"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
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
	return &pgConn{conn.(*stdlib.Conn)}, nil
}

func (c pgConnector) Driver() driver.Driver { return c.base.Driver() }

// pgConn is pgx's connection with its statements renumbered; everything
// else (transactions, pings, session reset) is pgx's own, promoted.
type pgConn struct{ *stdlib.Conn }

func (c *pgConn) Prepare(query string) (driver.Stmt, error) {
	return c.Conn.Prepare(rebind(query))
}

func (c *pgConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	return c.Conn.PrepareContext(ctx, rebind(query))
}

func (c *pgConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	return c.Conn.ExecContext(ctx, rebind(query), args)
}

func (c *pgConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	return c.Conn.QueryContext(ctx, rebind(query), args)
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
