package idempotency

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// migrations create the store's schema; this list is the one place it is
// written down. Entry i takes the schema from version i to i+1. The version
// lives in a table of its own, not in PRAGMA user_version, because the store
// usually shares its file with the application's tables (and their version).
var migrations = []string{
	`CREATE TABLE idempotency_records (
		key          TEXT PRIMARY KEY,      -- the idempotency key, as sent; "window <fingerprint>" for a dedupe-window record
		tool         TEXT NOT NULL,         -- tool name of the first arrival
		fingerprint  TEXT NOT NULL,         -- SHA-256 hex of args (window: of tool, args and scope)
		args         TEXT NOT NULL,         -- canonical JSON arguments, key argument removed
		state        TEXT NOT NULL CHECK (state IN ('processing', 'completed', 'failed')),
		owner        TEXT NOT NULL,         -- token of the execution holding the claim
		lease_until  TEXT NOT NULL,         -- processing claim trusted until then
		result       TEXT,                  -- CallToolResult JSON once finished
		retryable    INTEGER NOT NULL DEFAULT 0,
		attempts     INTEGER NOT NULL DEFAULT 1,
		created_at   TEXT NOT NULL,
		updated_at   TEXT NOT NULL,
		expires_at   TEXT NOT NULL          -- after this the record counts as absent
	);
	CREATE INDEX idempotency_records_expires ON idempotency_records (expires_at);`,
}

// timeFormat is fixed-width UTC, so stored times sort as text.
const timeFormat = "2006-01-02T15:04:05.000000000Z"

// SQLiteStore is the default Store: one table in a SQLite database, usually
// the same database as the handler's own tables so Commit can share the
// transaction.
type SQLiteStore struct {
	db    *sql.DB
	owned bool // opened by OpenSQLite, closed by Close
}

// DSN is a modernc.org/sqlite data source for path with the settings the
// store relies on: a busy timeout so concurrent writers wait instead of
// failing, WAL so reads do not block on writers, and BEGIN IMMEDIATE so a
// transaction that reads then writes cannot deadlock on the upgrade.
func DSN(path string) string {
	return path + "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_txlock=immediate"
}

// OpenSQLite opens (creating if needed) the SQLite file at path and returns
// a store that owns it.
func OpenSQLite(ctx context.Context, path string) (*SQLiteStore, error) {
	db, err := sql.Open("sqlite", DSN(path))
	if err != nil {
		return nil, fmt.Errorf("open idempotency store %s: %w", path, err)
	}
	s, err := NewSQLiteStore(ctx, db)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("open idempotency store %s: %w", path, err)
	}
	s.owned = true
	return s, nil
}

// NewSQLiteStore uses db, which the caller keeps and closes, and brings the
// store's table up to date. Open db with DSN (or equivalent settings).
func NewSQLiteStore(ctx context.Context, db *sql.DB) (*SQLiteStore, error) {
	s := &SQLiteStore{db: db}
	if err := s.migrate(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// DB is the database the store writes to.
func (s *SQLiteStore) DB() *sql.DB { return s.db }

// Close closes the database if OpenSQLite opened it.
func (s *SQLiteStore) Close() error {
	if s.owned {
		return s.db.Close()
	}
	return nil
}

func (s *SQLiteStore) migrate(ctx context.Context) error {
	return s.InTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS idempotency_schema (version INTEGER NOT NULL)`); err != nil {
			return fmt.Errorf("create schema version table: %w", err)
		}
		var version int
		err := tx.QueryRowContext(ctx, `SELECT version FROM idempotency_schema`).Scan(&version)
		if errors.Is(err, sql.ErrNoRows) {
			_, err = tx.ExecContext(ctx, `INSERT INTO idempotency_schema (version) VALUES (0)`)
		}
		if err != nil {
			return fmt.Errorf("read schema version: %w", err)
		}
		for i := version; i < len(migrations); i++ {
			if _, err := tx.ExecContext(ctx, migrations[i]); err != nil {
				return fmt.Errorf("migrate idempotency schema to version %d: %w", i+1, err)
			}
		}
		_, err = tx.ExecContext(ctx, `UPDATE idempotency_schema SET version = ?`, len(migrations))
		return err
	})
}

// InTx implements Store.
func (s *SQLiteStore) InTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin transaction: %w", err)
	}
	if err := fn(tx); err != nil {
		tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

const recordColumns = `key, tool, fingerprint, args, state, owner, lease_until, result, retryable, attempts, created_at, updated_at, expires_at`

// Claim implements Store. It inserts first and looks second, so two first
// arrivals cannot both win: the primary key decides.
func (s *SQLiteStore) Claim(ctx context.Context, rec Record, takeOver func(prev Record) bool) (*Record, bool, error) {
	var prev *Record
	claimed := false
	err := s.InTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `INSERT INTO idempotency_records (`+recordColumns+`)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (key) DO NOTHING`, recordValues(rec)...)
		if err != nil {
			return fmt.Errorf("claim key: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 1 {
			claimed = true
			return nil
		}
		p, err := scanRecord(tx.QueryRowContext(ctx, `SELECT `+recordColumns+` FROM idempotency_records WHERE key = ?`, rec.Key))
		if err != nil {
			return fmt.Errorf("read record: %w", err)
		}
		prev = &p
		if takeOver == nil || !takeOver(p) {
			return nil
		}
		rec.Attempts = p.Attempts + 1
		// Compare-and-set on the owner and state read above, so the takeover
		// stays atomic on databases that do not serialise transactions.
		res, err = tx.ExecContext(ctx, `UPDATE idempotency_records SET
			key = ?, tool = ?, fingerprint = ?, args = ?, state = ?, owner = ?, lease_until = ?, result = ?,
			retryable = ?, attempts = ?, created_at = ?, updated_at = ?, expires_at = ?
			WHERE key = ? AND owner = ? AND state = ?`,
			append(recordValues(rec), p.Key, p.Owner, string(p.State))...)
		if err != nil {
			return fmt.Errorf("take over key: %w", err)
		}
		n, _ := res.RowsAffected()
		claimed = n == 1
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	return prev, claimed, nil
}

// Finish implements Store.
func (s *SQLiteStore) Finish(ctx context.Context, key, owner string, effect Effect) error {
	return s.InTx(ctx, func(tx *sql.Tx) error {
		out, err := effect(tx)
		if err != nil {
			return err
		}
		var result any
		if out.Result != nil {
			result = string(out.Result)
		}
		at := out.At.UTC().Format(timeFormat)
		res, err := tx.ExecContext(ctx, `UPDATE idempotency_records
			SET state = ?, result = ?, retryable = ?, lease_until = ?, updated_at = ?
			WHERE key = ? AND owner = ? AND state = 'processing'`,
			string(out.State), result, out.Retryable, at, at, key, owner)
		if err != nil {
			return fmt.Errorf("finish record: %w", err)
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return ErrLeaseLost // the rollback takes the effect with it
		}
		return nil
	})
}

// Release implements Store.
func (s *SQLiteStore) Release(ctx context.Context, key, owner string) error {
	_, err := s.db.ExecContext(ctx, `DELETE FROM idempotency_records WHERE key = ? AND owner = ? AND state = 'processing'`, key, owner)
	if err != nil {
		return fmt.Errorf("release key: %w", err)
	}
	return nil
}

// Purge deletes records that expired before now and reports how many. Claim
// already treats them as absent; this only reclaims the space.
func (s *SQLiteStore) Purge(ctx context.Context, now time.Time) (int64, error) {
	res, err := s.db.ExecContext(ctx, `DELETE FROM idempotency_records WHERE expires_at <= ?`, now.UTC().Format(timeFormat))
	if err != nil {
		return 0, fmt.Errorf("purge expired records: %w", err)
	}
	return res.RowsAffected()
}

// PurgeWindow deletes at most limit dedupe-window records that expired
// before now, and reports how many. A window record still processing under
// a live lease is kept: it stands for a call still running. Keyed records
// are left to Purge.
func (s *SQLiteStore) PurgeWindow(ctx context.Context, now time.Time, limit int) (int64, error) {
	at := now.UTC().Format(timeFormat)
	res, err := s.db.ExecContext(ctx, `DELETE FROM idempotency_records WHERE key IN (
		SELECT key FROM idempotency_records
		WHERE key >= ? AND key < ? AND expires_at <= ? AND (state <> 'processing' OR lease_until <= ?)
		LIMIT ?)`, windowKeyPrefix, windowKeyEnd, at, at, limit)
	if err != nil {
		return 0, fmt.Errorf("purge expired window records: %w", err)
	}
	return res.RowsAffected()
}

// CountRecords counts the records that have not expired by now, by state:
// those of keys, and those of the dedupe window.
func (s *SQLiteStore) CountRecords(ctx context.Context, now time.Time) (keys, window map[State]int64, err error) {
	rows, err := s.db.QueryContext(ctx, `SELECT key >= ? AND key < ?, state, COUNT(*) FROM idempotency_records
		WHERE expires_at > ? GROUP BY 1, 2`, windowKeyPrefix, windowKeyEnd, now.UTC().Format(timeFormat))
	if err != nil {
		return nil, nil, fmt.Errorf("count records: %w", err)
	}
	defer rows.Close()
	keys, window = map[State]int64{}, map[State]int64{}
	for rows.Next() {
		var isWindow bool
		var state string
		var n int64
		if err := rows.Scan(&isWindow, &state, &n); err != nil {
			return nil, nil, fmt.Errorf("count records: %w", err)
		}
		if isWindow {
			window[State(state)] = n
		} else {
			keys[State(state)] = n
		}
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("count records: %w", err)
	}
	return keys, window, nil
}

// Lookup returns the record for key, if there is one; for tools and tests
// that inspect the store.
func (s *SQLiteStore) Lookup(ctx context.Context, key string) (Record, bool, error) {
	r, err := scanRecord(s.db.QueryRowContext(ctx, `SELECT `+recordColumns+` FROM idempotency_records WHERE key = ?`, key))
	if errors.Is(err, sql.ErrNoRows) {
		return Record{}, false, nil
	}
	if err != nil {
		return Record{}, false, fmt.Errorf("look up key: %w", err)
	}
	return r, true, nil
}

func recordValues(r Record) []any {
	var result any
	if r.Result != nil {
		result = string(r.Result)
	}
	return []any{r.Key, r.Tool, r.Fingerprint, string(r.Args), string(r.State), r.Owner,
		r.LeaseUntil.UTC().Format(timeFormat), result, r.Retryable, r.Attempts,
		r.CreatedAt.UTC().Format(timeFormat), r.UpdatedAt.UTC().Format(timeFormat), r.ExpiresAt.UTC().Format(timeFormat)}
}

func scanRecord(row *sql.Row) (Record, error) {
	var r Record
	var args, state, lease, created, updated, expires string
	var result sql.NullString
	err := row.Scan(&r.Key, &r.Tool, &r.Fingerprint, &args, &state, &r.Owner, &lease, &result,
		&r.Retryable, &r.Attempts, &created, &updated, &expires)
	if err != nil {
		return Record{}, err
	}
	r.Args = []byte(args)
	r.State = State(state)
	if result.Valid {
		r.Result = []byte(result.String)
	}
	for _, t := range []struct {
		dst *time.Time
		src string
	}{{&r.LeaseUntil, lease}, {&r.CreatedAt, created}, {&r.UpdatedAt, updated}, {&r.ExpiresAt, expires}} {
		if *t.dst, err = time.Parse(timeFormat, t.src); err != nil {
			return Record{}, fmt.Errorf("parse stored time %q: %w", t.src, err)
		}
	}
	return r, nil
}
