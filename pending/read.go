package pending

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
)

// timeFormat is fixed-width so that text order is time order in indexes.
const timeFormat = "2006-01-02T15:04:05.000000000Z"

func formatTime(t time.Time) string { return t.UTC().Format(timeFormat) }

func parseTime(s string) (time.Time, error) { return time.Parse(timeFormat, s) }

// parseExportTime reads a time as encoding/json writes a time.Time.
func parseExportTime(s string) (time.Time, error) { return time.Parse(time.RFC3339Nano, s) }

const callColumns = `id, state, reason, server, server_alias, server_identity, tool, kind, kind_source, key, args,
	fingerprint, created_at, updated_at, conflict, conflict_note, proposal, owner, late_settled_at, acked_at, redacted_seals,
	(SELECT count(*) FROM attempts a WHERE a.call_id = calls.id), coalesce(compensates, 0),
	coalesce((SELECT max(k.id) FROM calls k WHERE k.compensates = calls.id AND k.state IN ('succeeded', 'applied')), 0)`

type scanner interface{ Scan(dest ...any) error }

func scanCall(s scanner) (Call, error) {
	var c Call
	var args, identity, created, updated, lateAt, ackedAt, seals string
	if err := s.Scan(&c.ID, &c.State, &c.Reason, &c.Server, &c.ServerAlias, &identity, &c.Tool, &c.Kind, &c.KindSource,
		&c.Key, &args, &c.Fingerprint, &created, &updated, &c.Conflict, &c.ConflictNote, &c.Proposal, &c.Owner,
		&lateAt, &ackedAt, &seals, &c.AttemptCount, &c.Compensates, &c.UndoneBy); err != nil {
		return Call{}, err
	}
	c.RedactedSeals = strings.Fields(seals)
	c.Args = json.RawMessage(args)
	if identity != "" {
		c.ServerIdentity = json.RawMessage(identity)
	}
	var err1, err2, err3, err4 error
	c.CreatedAt, err1 = parseTime(created)
	c.UpdatedAt, err2 = parseTime(updated)
	c.LateSettledAt, err3 = parseOptionalTime(lateAt)
	c.AckedAt, err4 = parseOptionalTime(ackedAt)
	return c, errors.Join(err1, err2, err3, err4)
}

// parseOptionalTime reads a time column whose empty text means "not yet".
func parseOptionalTime(s string) (*time.Time, error) {
	if s == "" {
		return nil, nil
	}
	t, err := parseTime(s)
	if err != nil {
		return nil, err
	}
	return &t, nil
}

// HoldsLate reports whether the call settled late and still holds identical
// calls: no operator has acknowledged it yet.
func (c Call) HoldsLate() bool { return c.LateSettledAt != nil && c.AckedAt == nil }

// Get returns one call with its attempts and decisions, read in one
// snapshot.
func (j *Journal) Get(ctx context.Context, id int64) (Call, error) {
	tx, err := j.snapshot(ctx)
	if err != nil {
		return Call{}, err
	}
	q := j.cached(tx)
	defer q.fill(ctx) // after the rollback below gives the connection back
	defer tx.Rollback()
	c, err := scanCall(q.QueryRowContext(ctx, "SELECT "+callColumns+" FROM calls WHERE id = ?", id))
	if errors.Is(err, sql.ErrNoRows) {
		return Call{}, fmt.Errorf("call %d: %w", id, ErrNoSuchCall)
	}
	if err != nil {
		return Call{}, err
	}
	if c.Attempts, err = attemptsOf(ctx, q, id); err != nil {
		return Call{}, err
	}
	if c.Decisions, err = decisionsOf(ctx, q, id); err != nil {
		return Call{}, err
	}
	rows, err := q.QueryContext(ctx, "SELECT id FROM calls WHERE compensates = ? ORDER BY id", id)
	if err != nil {
		return Call{}, err
	}
	defer rows.Close()
	for rows.Next() {
		var by int64
		if err := rows.Scan(&by); err != nil {
			return Call{}, err
		}
		c.CompensatedBy = append(c.CompensatedBy, by)
	}
	return c, rows.Err()
}

// snapshot begins a read-only transaction that sees one state of the
// journal throughout: SQLite's read transactions always do; PostgreSQL's
// do at REPEATABLE READ (its default sees each statement's own).
func (j *Journal) snapshot(ctx context.Context) (*sql.Tx, error) {
	opts := &sql.TxOptions{ReadOnly: true}
	if j.pg != nil {
		opts.Isolation = sql.LevelRepeatableRead
	}
	return j.read.BeginTx(ctx, opts)
}

type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// readStmts caches statements prepared on the read pool: database/sql
// prepares each once per connection and reuses it inside transactions.
// Parsing the three statements of Get was half its cost.
type readStmts struct {
	mu sync.Mutex
	m  map[string]*sql.Stmt
}

func (r *readStmts) lookup(query string) *sql.Stmt {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.m[query]
}

// prepare caches query. It must be called holding no connection of db:
// preparing takes one from the pool, and readers that each hold one while
// waiting for another would wait for ever (more Gets at once than the pool
// has connections did).
func (r *readStmts) prepare(ctx context.Context, db *sql.DB, query string) {
	if r.lookup(query) != nil {
		return
	}
	st, err := db.PrepareContext(ctx, query)
	if err != nil {
		return // the next reader runs it unprepared and tries again
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = map[string]*sql.Stmt{}
	}
	if _, ok := r.m[query]; ok {
		st.Close() // another reader was first
		return
	}
	r.m[query] = st
}

func (r *readStmts) close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var errs []error
	for _, st := range r.m {
		errs = append(errs, st.Close())
	}
	r.m = nil
	return errors.Join(errs...)
}

// cachedTx runs fixed queries inside a read transaction through the cache.
// A query not cached yet runs on the transaction as it is, and is prepared
// by fill, once the transaction has given its connection back.
type cachedTx struct {
	j      *Journal
	tx     *sql.Tx
	missed *[]string
}

func (j *Journal) cached(tx *sql.Tx) cachedTx { return cachedTx{j: j, tx: tx, missed: new([]string)} }

// fill prepares the queries that missed the cache; call it after the
// transaction has ended.
func (c cachedTx) fill(ctx context.Context) {
	if c.j.pg != nil {
		return // pgx prepares and caches statements per connection itself
	}
	for _, q := range *c.missed {
		c.j.readStmts.prepare(context.WithoutCancel(ctx), c.j.read, q)
	}
}

func (c cachedTx) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if st := c.j.readStmts.lookup(query); st != nil {
		return c.tx.StmtContext(ctx, st).QueryContext(ctx, args...)
	}
	*c.missed = append(*c.missed, query)
	return c.tx.QueryContext(ctx, query, args...)
}

func (c cachedTx) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	if st := c.j.readStmts.lookup(query); st != nil {
		return c.tx.StmtContext(ctx, st).QueryRowContext(ctx, args...)
	}
	*c.missed = append(*c.missed, query)
	return c.tx.QueryRowContext(ctx, query, args...)
}

func attemptsOf(ctx context.Context, q querier, id int64) ([]Attempt, error) {
	rows, err := q.QueryContext(ctx, `SELECT n, session, rpc_id, sent_at, ended_at, outcome, reason, clock, result, error, late
		FROM attempts WHERE call_id = ? ORDER BY n`, id)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Attempt
	for rows.Next() {
		var a Attempt
		var sent string
		var ended, result, rpcErr sql.NullString
		if err := rows.Scan(&a.N, &a.Session, &a.RPCID, &sent, &ended, &a.Outcome, &a.Reason, &a.Clock, &result, &rpcErr, &a.Late); err != nil {
			return nil, err
		}
		if a.SentAt, err = parseTime(sent); err != nil {
			return nil, err
		}
		if ended.Valid {
			t, err := parseTime(ended.String)
			if err != nil {
				return nil, err
			}
			a.EndedAt = &t
		}
		if result.Valid {
			a.Result = json.RawMessage(result.String)
		}
		if rpcErr.Valid {
			a.Error = json.RawMessage(rpcErr.String)
		}
		out = append(out, a)
	}
	return out, rows.Err()
}

func decisionsOf(ctx context.Context, q querier, id int64) ([]Decision, error) {
	rows, err := q.QueryContext(ctx, `SELECT id, action, operator, host, at, note, evidence, attempt, prev_hash, hash
		FROM decisions WHERE call_id = ? ORDER BY id`, id)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Decision
	for rows.Next() {
		var d Decision
		var at string
		var evidence sql.NullString
		var attempt sql.NullInt64
		if err := rows.Scan(&d.ID, &d.Action, &d.Operator, &d.Host, &at, &d.Note, &evidence, &attempt, &d.PrevHash, &d.Hash); err != nil {
			return nil, err
		}
		if d.At, err = parseTime(at); err != nil {
			return nil, err
		}
		if evidence.Valid {
			d.Evidence = json.RawMessage(evidence.String)
		}
		d.Attempt = int(attempt.Int64)
		out = append(out, d)
	}
	return out, rows.Err()
}

// Filter selects calls for List.
type Filter struct {
	States []State // empty: all
	Tool   string  // empty: all
	// Server is a server's name as the call recorded it: its name in the
	// host config (ServerAlias) or the name it declared (Server); empty: all.
	Server      string
	OldestFirst bool // default newest first
	Limit       int  // 0: no limit
	// After continues a listing from the last call of the previous page
	// (keyset pagination: constant cost however deep the page).
	After *Call
}

// List returns calls without attempts and decisions (AttemptCount is set).
func (j *Journal) List(ctx context.Context, f Filter) ([]Call, error) {
	var where []string
	var args []any
	if len(f.States) > 0 {
		ph := make([]string, len(f.States))
		for i, s := range f.States {
			ph[i] = "?"
			args = append(args, s)
		}
		where = append(where, "state IN ("+strings.Join(ph, ", ")+")")
	}
	if f.Tool != "" {
		where = append(where, "tool = ?")
		args = append(args, f.Tool)
	}
	if f.Server != "" {
		where = append(where, "(server_alias = ? OR server = ?)")
		args = append(args, f.Server, f.Server)
	}
	order := "created_at DESC, id DESC"
	if f.OldestFirst {
		order = "created_at, id"
	}
	if f.After != nil {
		op := "<"
		if f.OldestFirst {
			op = ">"
		}
		where = append(where, "(created_at, id) "+op+" (?, ?)")
		args = append(args, formatTime(f.After.CreatedAt), f.After.ID)
	}
	q := "SELECT " + callColumns + " FROM calls"
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY " + order
	if f.Limit > 0 {
		q += fmt.Sprintf(" LIMIT %d", f.Limit)
	}
	rows, err := j.read.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	return scanCalls(rows)
}

// Counts returns the number of calls in each state, from the trigger-kept
// state_counts table: constant cost on any journal size.
func (j *Journal) Counts(ctx context.Context) (map[State]int, error) {
	rows, err := j.read.QueryContext(ctx, "SELECT state, CAST(sum(n) AS BIGINT) FROM state_counts GROUP BY state")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := make(map[State]int, len(States))
	for rows.Next() {
		var s State
		var n int
		if err := rows.Scan(&s, &n); err != nil {
			return nil, err
		}
		out[s] = n
	}
	return out, rows.Err()
}

// Export calls fn for every call created at or after since (zero: all), in
// creation order, each with its attempts and decisions.
func (j *Journal) Export(ctx context.Context, since time.Time, fn func(Call) error) error {
	tx, err := j.snapshot(ctx)
	if err != nil {
		return err
	}
	q := j.cached(tx)
	defer q.fill(ctx) // after the rollback below gives the connection back
	defer tx.Rollback()
	// Pages of 512, read by keyset, keep memory flat on big journals.
	page := func(q string, args ...any) ([]Call, error) {
		rows, err := tx.QueryContext(ctx, "SELECT "+callColumns+" FROM calls WHERE "+q+" ORDER BY created_at, id LIMIT 512", args...)
		if err != nil {
			return nil, err
		}
		return scanCalls(rows)
	}
	calls, err := page("created_at >= ?", formatTime(since))
	for len(calls) > 0 && err == nil {
		for _, c := range calls {
			if c.Attempts, err = attemptsOf(ctx, q, c.ID); err != nil {
				return err
			}
			if c.Decisions, err = decisionsOf(ctx, q, c.ID); err != nil {
				return err
			}
			if err := fn(c); err != nil {
				return err
			}
		}
		last := calls[len(calls)-1]
		calls, err = page("(created_at, id) > (?, ?)", formatTime(last.CreatedAt), last.ID)
	}
	return err
}

// scanCalls reads and closes rows of callColumns.
func scanCalls(rows *sql.Rows) ([]Call, error) {
	defer rows.Close()
	var out []Call
	for rows.Next() {
		c, err := scanCall(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// FindByKey returns the call with this (server, tool, key), with attempts.
func (j *Journal) FindByKey(ctx context.Context, server, tool, key string) (Call, error) {
	var id int64
	err := j.read.QueryRowContext(ctx, "SELECT id FROM calls WHERE server = ? AND tool = ? AND key = ?", server, tool, key).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return Call{}, ErrNoSuchCall
	}
	if err != nil {
		return Call{}, err
	}
	return j.Get(ctx, id)
}

// queryColumn reads a one-column result inside a write.
func queryColumn[T any](ctx context.Context, c *sql.Conn, q string, args ...any) ([]T, error) {
	rows, err := c.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		var v T
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// HoldingLate returns the calls that settled late after their caller was
// told they were unknown and that no operator has acknowledged yet, oldest
// first: the console's "needs attention" list. It reads only the partial
// index of such calls, so it costs the same on any journal size.
func (j *Journal) HoldingLate(ctx context.Context) ([]Call, error) {
	// SQLite's planner, left alone, scans calls; PostgreSQL's finds the
	// partial index itself (and has no INDEXED BY).
	from := " FROM calls INDEXED BY calls_late_by_fingerprint"
	if j.pg != nil {
		from = " FROM calls"
	}
	rows, err := j.read.QueryContext(ctx, "SELECT "+callColumns+from+
		" WHERE late_settled_at <> '' AND acked_at = '' ORDER BY created_at, id")
	if err != nil {
		return nil, err
	}
	return scanCalls(rows)
}

// ServerSeen is one server identity the journal's calls were made on: the
// names it went by (the config's alias and the server's declared name; the
// greatest non-empty one of each, when its calls differ) and how many
// calls were made on it.
type ServerSeen struct {
	ServerIdentity json.RawMessage
	Server         string
	ServerAlias    string
	Calls          int
}

// Servers lists every server identity the journal's calls record, in
// identity order, with one grouped read: what a console over "every server
// the journal knows" starts from. Calls from before identities were
// recorded group under an empty identity.
func (j *Journal) Servers(ctx context.Context) ([]ServerSeen, error) {
	rows, err := j.read.QueryContext(ctx, `SELECT server_identity, max(server), max(server_alias), count(*)
		FROM calls GROUP BY server_identity ORDER BY server_identity`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []ServerSeen
	for rows.Next() {
		var s ServerSeen
		var identity string
		if err := rows.Scan(&identity, &s.Server, &s.ServerAlias, &s.Calls); err != nil {
			return nil, err
		}
		if identity != "" {
			s.ServerIdentity = json.RawMessage(identity)
		}
		out = append(out, s)
	}
	return out, rows.Err()
}
