package pgtest

import (
	"context"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { os.Exit(Main(m)) }

// TestSelectOne: the cluster starts, a database of the test's own is
// made, and pgx reaches it through the socket.
func TestSelectOne(t *testing.T) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, Database(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var one int
	if err := conn.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Fatalf("SELECT 1 = %d, %v", one, err)
	}
	var version string
	if err := conn.QueryRow(ctx, "SHOW server_version").Scan(&version); err != nil {
		t.Fatal(err)
	}
	var fsync string
	if err := conn.QueryRow(ctx, "SHOW fsync").Scan(&fsync); err != nil || fsync != "on" {
		t.Fatalf("fsync = %q, %v", fsync, err)
	}
	t.Logf("PostgreSQL %s, socket in %s", version, Start(t).Data)
}

// TestDatabasesApart: two tests' databases do not see each other's tables.
func TestDatabasesApart(t *testing.T) {
	ctx := context.Background()
	a, err := pgx.Connect(ctx, Database(t))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close(ctx)
	b, err := pgx.Connect(ctx, Database(t))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close(ctx)
	if _, err := a.Exec(ctx, "CREATE TABLE only_in_a (x int)"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Exec(ctx, "SELECT * FROM only_in_a"); err == nil {
		t.Fatal("a table of one database seen from another")
	}
}
