package pending

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mcp-confirm/mcp-confirm/internal/pgtest"
)

func deadOwners(t *testing.T, pool *pgxpool.Pool, owners ...string) []string {
	t.Helper()
	ctx := context.Background()
	tx, err := sqlOf(t, pool).BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	dead, err := pgDeadOwners(ctx, tx, owners)
	if err != nil {
		t.Fatal(err)
	}
	return dead
}

// sqlOf is a database/sql pool on pool's database, through the journal's
// own driver wrapper (pgdriver.go).
func sqlOf(t *testing.T, pool *pgxpool.Pool) *sql.DB {
	db := openPGDB(pool.Config().ConnConfig, 2)
	t.Cleanup(func() { db.Close() })
	return db
}

// TestPGOwnerLiveness: a live owner's lock cannot be taken; once its
// session is terminated it can, and the owner itself learns it has lost
// it before its next durable commit.
func TestPGOwnerLiveness(t *testing.T) {
	firstRunOnly(t)
	ctx := context.Background()
	conn := pgtest.Database(t)
	pool, err := pgxpool.New(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	a, err := acquirePGOwner(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	defer a.release(ctx)
	b, err := acquirePGOwner(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	defer b.release(ctx)
	if err := a.ensure(ctx); err != nil {
		t.Fatalf("a live owner: %v", err)
	}
	if dead := deadOwners(t, pool, a.id, b.id, "01NEVERLIVED"); !slices.Equal(dead, []string{"01NEVERLIVED"}) {
		t.Fatalf("dead owners with a and b alive: %v", dead)
	}
	// Twice in a row: a recovery's transaction-level locks are gone with it.
	if dead := deadOwners(t, pool, "01NEVERLIVED"); len(dead) != 1 {
		t.Fatalf("a dead owner's lock still held after the recovery that took it: %v", dead)
	}
	if _, err := pool.Exec(ctx, "SELECT pg_terminate_backend($1)", a.conn.PgConn().PID()); err != nil {
		t.Fatal(err)
	}
	waitDead(t, pool, a.id)
	if dead := deadOwners(t, pool, b.id); len(dead) != 0 {
		t.Fatalf("b looks dead: %v", dead)
	}
	if err := a.ensure(ctx); !errors.Is(err, ErrOwnerLockLost) {
		t.Fatalf("an owner whose connection was terminated: %v", err)
	}
	if err := b.ensure(ctx); err != nil {
		t.Fatalf("b: %v", err)
	}
}

func waitDead(t *testing.T, pool *pgxpool.Pool, owner string) time.Duration {
	t.Helper()
	start := time.Now()
	for !slices.Contains(deadOwners(t, pool, owner), owner) {
		if time.Since(start) > 10*time.Second {
			t.Fatalf("owner %s still looks alive after %s", owner, time.Since(start))
		}
		time.Sleep(5 * time.Millisecond)
	}
	return time.Since(start)
}

// childPGOwner takes an owner lock, says its id, and waits to be killed.
func childPGOwner(conn string) {
	o, err := acquirePGOwner(context.Background(), conn)
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	fmt.Println("owner", o.id)
	select {}
}

// TestPGOwnerKilledProcess: a process holding its lock is killed with
// SIGKILL; its lock is free as soon as the server sees its connection end,
// and not before.
func TestPGOwnerKilledProcess(t *testing.T) {
	firstRunOnly(t)
	ctx := context.Background()
	conn := pgtest.Database(t)
	pool, err := pgxpool.New(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	cmd, out, _ := startChild(t, "pgowner", "PENDING_DB="+conn)
	line, err := out.ReadString('\n')
	id, ok := strings.CutPrefix(strings.TrimSpace(line), "owner ")
	if err != nil || !ok {
		t.Fatalf("child: %q %v", line, err)
	}
	time.Sleep(50 * time.Millisecond)
	if dead := deadOwners(t, pool, id); len(dead) != 0 {
		t.Fatalf("a live process's owner looks dead")
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	t.Logf("owner lock free %s after SIGKILL", waitDead(t, pool, id))
}

// TestPGOwnerAfterServerRestart: pg_ctl restart ends every session, so
// every owner's lock is free (their in-flight calls may be recovered) and
// each owner learns it before its next durable commit; it takes its lock
// again once the server is back.
func TestPGOwnerAfterServerRestart(t *testing.T) {
	firstRunOnly(t)
	ctx := context.Background()
	conn := pgtest.Database(t)
	a, err := acquirePGOwner(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	defer a.release(ctx)
	pgtest.Start(t).Restart(t)
	if err := a.ensure(ctx); !errors.Is(err, ErrOwnerLockLost) {
		t.Fatalf("after a server restart: %v", err)
	}
	pool, err := pgxpool.New(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if dead := deadOwners(t, pool, a.id); len(dead) != 1 {
		t.Fatalf("an owner whose session the restart ended looks alive")
	}
	if err := a.reacquire(ctx, conn); err != nil {
		t.Fatal(err)
	}
	if err := a.ensure(ctx); err != nil {
		t.Fatalf("after reacquire: %v", err)
	}
	if dead := deadOwners(t, pool, a.id); len(dead) != 0 {
		t.Fatalf("a reacquired owner looks dead")
	}
	// While a recovery holds a dead owner's lock, the owner cannot take it.
	other, err := acquirePGOwner(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	pool.Exec(ctx, "SELECT pg_terminate_backend($1)", other.conn.PgConn().PID())
	waitDead(t, pool, other.id)
	tx, err := sqlOf(t, pool).BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if dead, err := pgDeadOwners(ctx, tx, []string{other.id}); err != nil || len(dead) != 1 {
		t.Fatalf("%v %v", dead, err)
	}
	if err := other.reacquire(ctx, conn); !errors.Is(err, ErrOwnerLockLost) {
		t.Fatalf("reacquire during a recovery: %v", err)
	}
	tx.Rollback()
	if err := other.reacquire(ctx, conn); err != nil {
		t.Fatalf("reacquire after the recovery: %v", err)
	}
	other.release(ctx)
}
