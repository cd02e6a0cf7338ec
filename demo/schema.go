package demo

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"

	"github.com/mcp-confirm/mcp-confirm/idempotency"
)

// migrations are the demo database's schema, the one place it is written
// down; entry i takes PRAGMA user_version from i to i+1. The idempotency
// store adds its own table (idempotency_records) to the same file, so that a
// key's record, its order and the budget change commit in one transaction.
var migrations = []string{
	`CREATE TABLE budgets (
		buyer        TEXT PRIMARY KEY,
		budget_left  INTEGER NOT NULL CHECK (budget_left >= 0)
	);
	CREATE TABLE prices (
		item        TEXT PRIMARY KEY,
		unit_price  INTEGER NOT NULL CHECK (unit_price > 0)
	);
	-- idempotency_key is deliberately not UNIQUE: the middleware is what keeps
	-- a key to one order, and tests count rows to prove it does.
	CREATE TABLE orders (
		order_id         INTEGER PRIMARY KEY AUTOINCREMENT,
		item             TEXT NOT NULL REFERENCES prices (item),
		quantity         INTEGER NOT NULL CHECK (quantity > 0),
		buyer            TEXT NOT NULL REFERENCES budgets (buyer),
		idempotency_key  TEXT,            -- NULL for a call sent without a key
		created_at       TEXT NOT NULL    -- RFC 3339 UTC
	);
	CREATE INDEX orders_by_key ON orders (idempotency_key);
	CREATE INDEX orders_by_buyer ON orders (buyer);
	INSERT INTO budgets (buyer, budget_left) VALUES ('alice', 1000), ('bob', 500), ('carol', 100);
	INSERT INTO prices (item, unit_price) VALUES ('widget', 25), ('gadget', 40), ('gizmo', 100);`,
	// cancel_order (the policy's cancel_tool in the compensation example).
	`ALTER TABLE orders ADD COLUMN cancelled_at TEXT;  -- RFC 3339 UTC, NULL while the order stands`,
}

// openDB opens the demo database at path, creating and migrating it; several
// processes may do so one after another (or at once: the migration runs in an
// immediate transaction and rechecks the version inside it).
func openDB(ctx context.Context, path string) (*sql.DB, error) {
	if err := prepareFile(path); err != nil {
		return nil, err
	}
	db, err := sql.Open("sqlite", idempotency.DSN(path))
	if err != nil {
		return nil, fmt.Errorf("open demo database %s: %w", path, err)
	}
	if err := migrate(ctx, db); err != nil {
		db.Close()
		return nil, fmt.Errorf("open demo database %s: %w", path, err)
	}
	return db, nil
}

// FolderError is a database folder that was missing and could not be made.
type FolderError struct {
	Dir string
	Err error
}

func (e *FolderError) Error() string {
	return fmt.Sprintf("create the folder %s for the demo database: %v", e.Dir, e.Err)
}

func (e *FolderError) Unwrap() error { return e.Err }

// prepareFile creates the database's missing folders (0700, as the journal's)
// and the file itself (0600) before SQLite does, so that the demo's orders
// are no more readable than the journal beside them; SQLite gives its -wal
// and -shm files the database file's mode. An existing file keeps its mode.
func prepareFile(path string) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return &FolderError{Dir: dir, Err: err}
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("open demo database %s: %w", path, err)
	}
	return f.Close()
}

func migrate(ctx context.Context, db *sql.DB) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin migration: %w", err)
	}
	defer tx.Rollback()
	var version int
	if err := tx.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&version); err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	for i := version; i < len(migrations); i++ {
		if _, err := tx.ExecContext(ctx, migrations[i]); err != nil {
			return fmt.Errorf("migrate to version %d: %w", i+1, err)
		}
	}
	// PRAGMA takes no bound parameters; the value is our own integer.
	if _, err := tx.ExecContext(ctx, fmt.Sprintf(`PRAGMA user_version = %d`, len(migrations))); err != nil {
		return fmt.Errorf("set schema version: %w", err)
	}
	return tx.Commit()
}
