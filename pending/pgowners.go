package pending

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/oklog/ulid/v2"
)

// Liveness on PostgreSQL (issue 22), where processes on many machines
// share one journal and no file lock reaches across them. Each process
// holds a session-level advisory lock keyed by its owner id
// (pg_advisory_lock), on a connection of its own that does nothing else,
// for as long as it lives. The server drops the lock when that session
// ends, however it ends: the process died, its machine was cut off, the
// connection was terminated, the server restarted. So "its lock can be
// taken" is proof the owner can no longer commit as that owner, and only
// then are its in-flight calls recovered as unknown.
//
// An owner that loses its connection has lost its lock with it: another
// process may already have recovered its calls. It must stop sending
// writes until it has taken its lock again (ErrOwnerLockLost), and record
// what comes back for calls it had in flight as late answers.

// ErrOwnerLockLost: this process's liveness lock on a PostgreSQL journal
// is gone with its connection; nothing may be sent until it is taken again.
var ErrOwnerLockLost = errors.New("the connection holding this process's liveness lock on the journal was lost")

// pgOwnerKey is the advisory lock key of an owner id: the first 8 bytes of
// SHA-256("mcp-confirm owner " + id), so every process computes the same
// key in Go, whatever the server's version. It is the one-key (bigint)
// form, which never meets the two-key (pgLockClass, n) locks.
func pgOwnerKey(owner string) int64 {
	sum := sha256.Sum256([]byte("mcp-confirm owner " + owner))
	return int64(binary.BigEndian.Uint64(sum[:8]))
}

// pgOwnerLock is this process's liveness lock and the connection that
// holds it.
type pgOwnerLock struct {
	id   string
	conn *pgx.Conn
	// heldBy is the server process of the connection that took the lock
	// last, for a write's own statement to check (pgOwnerHeld) without
	// the connection.
	heldBy atomic.Uint32
}

// pgOwnerHeld is the condition, in SQL, that the owner lock of key (the
// second argument) is held by the server process (the first): while it is,
// its owner's in-flight calls cannot be recovered.
const pgOwnerHeld = `SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND pid = ?
	AND granted AND objsubid = 1 AND ((classid::bigint << 32) | objid::bigint) = ?`

// acquirePGOwner connects (connString, a libpq URL or key/value string)
// and takes the lock of a fresh owner id on that connection.
func acquirePGOwner(ctx context.Context, connString string) (*pgOwnerLock, error) {
	conn, err := pgx.Connect(ctx, connString)
	if err != nil {
		return nil, fmt.Errorf("owner lock: connect: %w", err)
	}
	o := &pgOwnerLock{id: ulid.Make().String(), conn: conn}
	if err := o.take(ctx); err != nil {
		conn.Close(context.Background())
		return nil, err
	}
	return o, nil
}

func (o *pgOwnerLock) take(ctx context.Context) error {
	var ok bool
	if err := o.conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", pgOwnerKey(o.id)).Scan(&ok); err != nil {
		return fmt.Errorf("owner lock: %w", err)
	}
	if !ok {
		return fmt.Errorf("owner lock: owner %s is held by another session", o.id)
	}
	o.heldBy.Store(o.conn.PgConn().PID())
	return nil
}

// ensure is checked before every durable commit, as the SQLite owner
// file is: the lock's connection must still be there, holding the lock.
// A lost connection is ErrOwnerLockLost; the caller sends nothing.
func (o *pgOwnerLock) ensure(ctx context.Context) error {
	var held bool
	err := o.conn.QueryRow(ctx, rebind("SELECT EXISTS ("+pgOwnerHeld+")"), o.conn.PgConn().PID(), pgOwnerKey(o.id)).Scan(&held)
	switch {
	case err != nil:
		return fmt.Errorf("%w: %v", ErrOwnerLockLost, err)
	case !held:
		return ErrOwnerLockLost
	}
	return nil
}

// reacquire takes this owner's lock again on a new connection, after
// ensure said it was lost. It fails while a recovery holds the lock (it
// has found this owner dead and is turning its in-flight calls unknown):
// the caller retries, and records what comes back for those calls as
// late answers.
func (o *pgOwnerLock) reacquire(ctx context.Context, connString string) error {
	conn, err := pgx.Connect(ctx, connString)
	if err != nil {
		return fmt.Errorf("%w: reconnect: %v", ErrOwnerLockLost, err)
	}
	old := o.conn
	o.conn = conn
	if err := o.take(ctx); err != nil {
		o.conn = old
		conn.Close(context.Background())
		return fmt.Errorf("%w: %v", ErrOwnerLockLost, err)
	}
	old.Close(context.Background())
	return nil
}

func (o *pgOwnerLock) release(ctx context.Context) error {
	return o.conn.Close(ctx) // ending the session releases the lock
}

// pgDeadOwners returns those of owners whose lock can be taken: their
// session is gone. It takes each such lock at transaction level, inside
// the transaction q is in, so it holds them until the recovery that asked
// commits. q must not be the owner lock's own connection (there its own
// lock would be taken again, and look free).
func pgDeadOwners(ctx context.Context, q rowQuerier, owners []string) ([]string, error) {
	var dead []string
	for _, o := range owners {
		var free bool
		if err := q.QueryRowContext(ctx, "SELECT pg_try_advisory_xact_lock(?)", pgOwnerKey(o)).Scan(&free); err != nil {
			return nil, err
		}
		if free {
			dead = append(dead, o)
		}
	}
	return dead, nil
}

// rowQuerier is a *sql.Conn or a *sql.Tx.
type rowQuerier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}
