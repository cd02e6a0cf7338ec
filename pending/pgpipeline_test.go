package pending

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// The round trips a PostgreSQL write saves (pgConn): BEGIN goes with the
// first statement, and the statements no one reads go with COMMIT. These
// tests pin what must not change with them: order, errors, and a
// connection that is clean for the next write.

func postgresTest(t *testing.T) {
	t.Helper()
	if testBackend != "postgres" {
		t.Skip("the PostgreSQL pipeline: it runs on the PostgreSQL pass")
	}
}

// oneConnection makes every write of j use the same connection, so that
// what one write leaves on it is what the next one meets.
func oneConnection(j *Journal) { j.wdb.SetMaxOpenConns(1) }

// backendPID is the server process of j's (one) write connection.
func backendPID(t *testing.T, j *Journal) uint32 {
	t.Helper()
	conn, err := j.wdb.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var pid uint32
	conn.Raw(func(dc any) error {
		pid = dc.(*pgConn).Conn.Conn().PgConn().PID()
		return nil
	})
	return pid
}

func countCalls(t *testing.T, j *Journal) int {
	t.Helper()
	var n int
	if err := j.read.QueryRowContext(context.Background(), "SELECT count(*) FROM calls").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// A statement left for COMMIT that fails there: the write fails with the
// server's error (not "commit unconfirmed": nothing was committed), the
// rows written before it in the same transaction are gone, and the
// connection is rolled back and kept for the next write (pgx would
// otherwise drop a connection left in a transaction, and the next write
// would pay for a new one).
func TestPGStatementAtCommitFails(t *testing.T) {
	postgresTest(t)
	ctx := context.Background()
	j := openTest(t, "")
	oneConnection(j)
	c, err := j.RecordIntent(ctx, intent("create_order", `{"n":1}`))
	if err != nil {
		t.Fatal(err)
	}
	pid := backendPID(t, j)
	err = j.write(ctx, durable, func(ctx context.Context, conn *sql.Conn) error {
		if _, err := j.exec(ctx, conn, "UPDATE calls SET reason = 'changed' WHERE id = ?", c.ID); err != nil {
			return err
		}
		// attempt 1 of the call exists: the primary key refuses it.
		return j.execAtCommit(ctx, conn, "INSERT INTO attempts (call_id, n, session, owner, sent_at) VALUES (?, 1, 1, 'x', '')", c.ID)
	})
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "23505" || errors.Is(err, ErrCommitUnconfirmed) {
		t.Fatalf("a duplicate attempt at commit: %v; want the unique violation", err)
	}
	got, err := j.Get(ctx, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Reason == "changed" {
		t.Fatal("the update before the failed statement was committed")
	}
	// The next write on the same connection commits.
	if _, err := j.RecordIntent(ctx, intent("create_order", `{"n":2}`)); err != nil {
		t.Fatalf("the write after a failed commit: %v", err)
	}
	if n := countCalls(t, j); n != 2 {
		t.Fatalf("%d calls, want 2", n)
	}
	if after := backendPID(t, j); after != pid {
		t.Fatalf("the write connection was replaced (server process %d, then %d): the failed transaction was not rolled back", pid, after)
	}
}

// A statement left for COMMIT is sent before any statement that follows
// it in the write, so a later read sees it.
func TestPGStatementAtCommitKeepsItsOrder(t *testing.T) {
	postgresTest(t)
	ctx := context.Background()
	j := openTest(t, "")
	c, err := j.RecordIntent(ctx, intent("create_order", `{"n":1}`))
	if err != nil {
		t.Fatal(err)
	}
	var seen string
	err = j.write(ctx, durable, func(ctx context.Context, conn *sql.Conn) error {
		if err := j.execAtCommit(ctx, conn, "UPDATE calls SET reason = ? WHERE id = ?", "first", c.ID); err != nil {
			return err
		}
		return j.queryRow(ctx, conn, "SELECT reason FROM calls WHERE id = ?", c.ID).Scan(&seen)
	})
	if err != nil {
		t.Fatal(err)
	}
	if seen != "first" {
		t.Fatalf("the read after a statement left for COMMIT saw %q, want %q", seen, "first")
	}
}

// A write that fails before it runs any statement (its BEGIN still
// waiting on the connection) and one that fails after: neither leaves the
// connection in a transaction, and the connection is kept (pgx would drop
// one left in a transaction, so an idle connection alone would not show a
// missing ROLLBACK).
func TestPGWriteThatFailsLeavesTheConnectionClean(t *testing.T) {
	postgresTest(t)
	ctx := context.Background()
	j := openTest(t, "")
	oneConnection(j)
	refused := errors.New("refused by the write")
	pid := backendPID(t, j)
	for _, name := range []string{"before any statement", "after a statement"} {
		err := j.write(ctx, durable, func(ctx context.Context, conn *sql.Conn) error {
			if name == "after a statement" {
				if err := j.execAtCommit(ctx, conn, "UPDATE calls SET reason = 'x'"); err != nil {
					return err
				}
				if _, err := j.exec(ctx, conn, "SELECT 1"); err != nil {
					return err
				}
			}
			return refused
		})
		if !errors.Is(err, refused) {
			t.Fatalf("%s: %v", name, err)
		}
		var status byte
		if err := j.wdb.QueryRowContext(ctx, "SELECT 1").Scan(new(int)); err != nil {
			t.Fatalf("%s: the connection after: %v", name, err)
		}
		conn, err := j.wdb.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		conn.Raw(func(dc any) error {
			status = dc.(*pgConn).Conn.Conn().PgConn().TxStatus()
			return nil
		})
		conn.Close()
		if status != 'I' {
			t.Fatalf("%s: the connection is left in transaction status %q, want idle", name, status)
		}
		if after := backendPID(t, j); after != pid {
			t.Fatalf("%s: the write connection was replaced (server process %d, then %d): it was not rolled back", name, pid, after)
		}
	}
	if _, err := j.RecordIntent(ctx, intent("create_order", `{"n":1}`)); err != nil {
		t.Fatal(err)
	}
}

// The owner check runs beside a durable write's statements, and still
// stands between it and its COMMIT: with the owner's connection gone and
// its lock held elsewhere (a recovery has it), the intent is refused and
// nothing is recorded; once the lock is free again, it is taken again and
// the next intent commits.
func TestPGOwnerLostRefusesTheIntent(t *testing.T) {
	postgresTest(t)
	ctx := context.Background()
	db := testDB(t, "")
	j, err := Open(ctx, db, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	other, err := pgx.Connect(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(ctx)
	j.pg.ownerMu.Lock()
	pid := j.pg.owner.conn.PgConn().PID()
	j.pg.ownerMu.Unlock()
	if _, err := other.Exec(ctx, "SELECT pg_terminate_backend($1)", pid); err != nil {
		t.Fatal(err)
	}
	// Wait for the server to let the lock go, then hold it as a recovery would.
	for {
		var got bool
		if err := other.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", pgOwnerKey(j.Owner())).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got {
			break
		}
	}
	_, err = j.RecordIntent(ctx, intent("create_order", `{"n":1}`))
	if !errors.Is(err, ErrOwnerLockLost) {
		t.Fatalf("an intent with the owner lock held elsewhere: %v; want ErrOwnerLockLost", err)
	}
	if n := countCalls(t, j); n != 0 {
		t.Fatalf("%d calls recorded with the owner lock lost", n)
	}
	if _, err := other.Exec(ctx, "SELECT pg_advisory_unlock($1)", pgOwnerKey(j.Owner())); err != nil {
		t.Fatal(err)
	}
	if _, err := j.RecordIntent(ctx, intent("create_order", `{"n":1}`)); err != nil {
		t.Fatalf("the intent once the lock was free again: %v", err)
	}
}

// countingConn counts the times pgx sends: one per round trip, as pgx
// writes a statement, or a pipeline, in one go and then waits.
type countingConn struct {
	net.Conn
	writes *atomic.Int64
}

func (c countingConn) Write(b []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(b)
}

// TestPGGuardedWriteRoundTrips pins the round trips of a guarded write on
// PostgreSQL (an intent and its outcome): each costs 0.15-0.4 ms on this
// machine kind, more than the statements they carry. The owner check
// runs beside the intent on the owner lock's own connection (pgx.Connect
// of the connection string, not wrapped), and is not counted.
func TestPGGuardedWriteRoundTrips(t *testing.T) {
	postgresTest(t)
	ctx := context.Background()
	var writes atomic.Int64
	pgTestDial = func(dial pgconn.DialFunc) pgconn.DialFunc {
		return func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := dial(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return countingConn{c, &writes}, nil
		}
	}
	defer func() { pgTestDial = nil }()
	j := openTest(t, "")
	oneConnection(j)
	write := func(n int) {
		in := intent("create_order", fmt.Sprintf(`{"n":%d}`, n))
		in.Hold, in.LateHold = true, time.Hour
		c, err := j.RecordIntent(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		if err := j.RecordOutcome(ctx, c.ID, 1, Outcome{Event: EventSucceeded, Result: json.RawMessage(`{"content":[]}`)}); err != nil {
			t.Fatal(err)
		}
	}
	for n := range 10 { // past pgx's first runs, which prepare each statement
		write(n)
	}
	before := writes.Load()
	const runs = 20
	for n := range runs {
		write(100 + n)
	}
	got := float64(writes.Load()-before) / runs
	// intent: BEGIN, its settings, the lock, the call and its attempt
	// (with the key and hold checks and the owner lock's in the insert),
	// the notice and COMMIT in one (recordIntentAtOnce). outcome: BEGIN,
	// its settings, the updates, the notice and COMMIT in one.
	const want = 1 + 1
	if got != want {
		t.Fatalf("a guarded write made %.2f round trips, want %d", got, want)
	}
	// and those two trips wrote each call's links (callchain.go)
	rep, err := j.VerifyChain(ctx)
	if err != nil || !rep.Intact() || rep.Calls.Links != 2*(10+runs) || rep.Calls.Covered != 10+runs {
		t.Fatalf("the calls' chains after one-trip writes: %+v %+v (%v)", rep, rep.Calls, err)
	}
}

// The outcome's one-trip statement (recordOutcomeAtOnce) ends only the
// open attempt of an in-flight call. Each case below breaks one of those
// conditions by hand, in ways the journal's API never makes; the outcome
// must then be refused by the two-trip write's state machine, and change
// nothing.
func TestPGOutcomeAtOnceEndsOnlyTheOpenAttempt(t *testing.T) {
	postgresTest(t)
	ctx := context.Background()
	cases := []struct {
		name  string
		setup string // run with $1 the call's id
	}{
		{"call not in flight", "UPDATE calls SET state = 'unknown' WHERE id = $1"},
		{"attempt already ended", "UPDATE attempts SET outcome = 'failed' WHERE call_id = $1"},
		{"attempt not the newest", "INSERT INTO attempts (call_id, n, session, owner, sent_at) SELECT id, 2, 1, owner, created_at FROM calls WHERE id = $1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			j := openTest(t, "")
			c, err := j.RecordIntent(ctx, intent("create_order", `{"item":"widget"}`))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := j.wdb.ExecContext(ctx, tc.setup, c.ID); err != nil {
				t.Fatal(err)
			}
			before, err := j.Get(ctx, c.ID)
			if err != nil {
				t.Fatal(err)
			}
			err = j.RecordOutcome(ctx, c.ID, 1, Outcome{Event: EventSucceeded, Result: json.RawMessage(`{"content":[]}`)})
			if !errors.Is(err, ErrAttemptEnded) {
				t.Fatalf("outcome: %v, want ErrAttemptEnded", err)
			}
			after, err := j.Get(ctx, c.ID)
			if err != nil {
				t.Fatal(err)
			}
			if after.State != before.State || len(after.Attempts) != len(before.Attempts) ||
				after.Attempts[0].Outcome != before.Attempts[0].Outcome || after.UpdatedAt != before.UpdatedAt {
				t.Fatalf("a refused outcome changed the call: %+v, was %+v", after, before)
			}
		})
	}
}
