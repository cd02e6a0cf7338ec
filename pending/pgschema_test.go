package pending

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mcp-confirm/mcp-confirm/internal/pgtest"
)

// These tests run against a real PostgreSQL (internal/pgtest); where its
// server binaries are missing they skip, saying how to run them.

func pgJournal(t *testing.T) *pgxpool.Pool {
	t.Helper()
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, pgtest.Database(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if err := pgMigrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	return pool
}

func pgExec(t *testing.T, db pgDB, stmts ...string) {
	t.Helper()
	for _, s := range stmts {
		if _, err := db.Exec(context.Background(), s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

func pgInsertCall(t *testing.T, db pgDB, key, state string) int64 {
	t.Helper()
	var id int64
	err := db.QueryRow(context.Background(), `INSERT INTO calls (server, tool, kind, kind_source, key, args, fingerprint, state, created_at, updated_at)
		VALUES ('demo', 'create_order', 'write', 'default', $1, '{}', 'fp', $2, '2026-12-05T09:00:00.000000000Z', '2026-12-05T09:00:00.000000000Z')
		RETURNING id`, key, state).Scan(&id)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// pgJournalOf is a Journal on pool's database (one per pool), for
// decisions and verification through the journal's own code.
func pgJournalOf(t *testing.T, pool *pgxpool.Pool) *Journal {
	t.Helper()
	if j, ok := pgJournals.Load(pool); ok {
		return j.(*Journal)
	}
	j, err := Open(context.Background(), pool.Config().ConnString(), Options{SkipRecovery: true, Host: "host-pg"})
	if err != nil {
		t.Fatal(err)
	}
	pgJournals.Store(pool, j)
	t.Cleanup(func() { pgJournals.Delete(pool); j.Close() })
	return j
}

var pgJournals sync.Map // *pgxpool.Pool -> *Journal

func pgDecide(t *testing.T, pool *pgxpool.Pool, d chainRow) {
	t.Helper()
	j := pgJournalOf(t, pool)
	err := j.write(context.Background(), deciding, func(ctx context.Context, c *sql.Conn) error {
		return j.appendDecision(ctx, c, d.CallID, Action(d.Action), d.Operator, d.At, d.Note, d.Evidence, int(d.Attempt))
	})
	if err != nil {
		t.Fatal(err)
	}
}

func pgVerifyChain(t *testing.T, pool *pgxpool.Pool) (ChainReport, error) {
	return pgJournalOf(t, pool).VerifyChain(context.Background())
}

func TestPGMigrate(t *testing.T) {
	firstRunOnly(t)
	ctx := context.Background()
	pool := pgJournal(t)
	var v int
	if err := pool.QueryRow(ctx, "SELECT version FROM mcp_confirm_schema").Scan(&v); err != nil || v != len(pgMigrations) {
		t.Fatalf("version %d, %v", v, err)
	}
	// Again, and from eight connections at once: nothing to do, no error.
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() { errs <- pgMigrate(ctx, pool) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	// Eight connections making a new journal together: one migrates.
	fresh, err := pgxpool.New(ctx, pgtest.Database(t))
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	errs = make(chan error, 8)
	for range 8 {
		wg.Go(func() { errs <- pgMigrate(ctx, fresh) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("concurrent first migration: %v", err)
		}
	}
}

func TestPGMigrateRefuses(t *testing.T) {
	firstRunOnly(t)
	ctx := context.Background()
	other, err := pgx.Connect(ctx, pgtest.Database(t))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(ctx)
	pgExec(t, other, "CREATE TABLE calls (phone TEXT)")
	if err := pgMigrate(ctx, other); !errors.Is(err, ErrNotJournal) {
		t.Fatalf("another application's database: %v", err)
	}
	pool := pgJournal(t)
	pgExec(t, pool, fmt.Sprintf("UPDATE mcp_confirm_schema SET version = %d", len(pgMigrations)+1))
	if err := pgMigrate(ctx, pool); !errors.Is(err, ErrNewerSchema) {
		t.Fatalf("a newer schema: %v", err)
	}
}

// TestPGSchemaRules: the rules SQLite's triggers keep hold on PostgreSQL,
// and TRUNCATE (which fires no row trigger) is refused too.
func TestPGSchemaRules(t *testing.T) {
	firstRunOnly(t)
	ctx := context.Background()
	pool := pgJournal(t)
	done := pgInsertCall(t, pool, "k-done", "in_flight")
	pgInsertCall(t, pool, "k-open", "in_flight")
	pgExec(t, pool, fmt.Sprintf("UPDATE calls SET state = 'succeeded' WHERE id = %d", done))
	pgDecide(t, pool, chainRow{CallID: done, Action: "note", Operator: "op", At: "2026-12-05T09:00:01.000000000Z", Note: "seen"})
	// What PostgreSQL's text cannot hold (NUL, invalid UTF-8) is stored as
	// U+FFFD, and hashed as stored.
	pgDecide(t, pool, chainRow{CallID: done, Action: "note", Operator: "op\x00", At: "2026-12-05T09:00:02.000000000Z", Note: "a\x00b\xff",
		Evidence: []byte(`{"x":"\xff"}`)})
	if rep, err := pgVerifyChain(t, pool); err != nil || rep.Broken != nil || rep.Decisions != 2 { // calls inserted by hand have no chain: the decision log's
		t.Fatalf("after a note with NUL: %+v %v", rep, err)
	}
	var note string
	if err := pool.QueryRow(ctx, "SELECT note FROM decisions WHERE id = 2").Scan(&note); err != nil || note != "a\uFFFDb\uFFFD" {
		t.Fatalf("note stored as %q, %v", note, err)
	}
	for _, tc := range []struct{ stmt, want string }{
		{fmt.Sprintf("UPDATE calls SET state = 'failed' WHERE id = %d", done), "terminal state cannot change"},
		{"DELETE FROM calls", "calls are never deleted"},
		{"TRUNCATE calls CASCADE", "calls are never deleted"},
		{"UPDATE decisions SET note = 'x'", "append-only"},
		{"DELETE FROM decisions", "append-only"},
		{"TRUNCATE decisions", "append-only"},
		{"INSERT INTO calls (server, tool, kind, kind_source, key, args, fingerprint, state, created_at, updated_at) VALUES ('demo', 'create_order', 'write', 'default', 'k-open', '{}', 'fp', 'in_flight', '', '')", "duplicate key"},
		{"UPDATE calls SET state = 'lost'", "check constraint"},
	} {
		if _, err := pool.Exec(ctx, tc.stmt); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.stmt, err, tc.want)
		}
	}
	counts := map[string]int{}
	rows, _ := pool.Query(ctx, "SELECT state, sum(n)::int FROM state_counts GROUP BY state")
	for rows.Next() {
		var s string
		var n int
		rows.Scan(&s, &n)
		counts[s] = n
	}
	if rows.Err() != nil || counts["in_flight"] != 1 || counts["succeeded"] != 1 || counts["unknown"] != 0 {
		t.Fatalf("state counts: %v %v", counts, rows.Err())
	}
}

// pgChainDecisions are the decisions of chainJournal's log, by call.
var pgChainDecisions = []chainRow{
	{CallID: 1, Action: "note", Operator: "alice", Note: "asked bob"},
	{CallID: 2, Action: "query", Operator: "alice", Evidence: []byte(`{"orders": [{"order_id": 7, "item": "<b>&"}]}`)},
	{CallID: 1, Action: "retry", Operator: "bob", Note: "resend", Attempt: 2},
	{CallID: 2, Action: "mark", Operator: "bob", Note: "order 7 \xff\xfe in the shop"},
	{CallID: 3, Action: "abandon", Operator: "carol", Note: "cancelled"},
	{CallID: 3, Action: "note", Operator: "carol", Note: "told finance"},
}

func pgChainJournal(t *testing.T) *pgxpool.Pool {
	pool := pgJournal(t)
	for i := range 3 {
		pgInsertCall(t, pool, fmt.Sprint("k-", i), "unknown")
	}
	for i, d := range pgChainDecisions {
		d.At = fmt.Sprintf("2026-12-05T09:00:%02d.000000000Z", i)
		pgDecide(t, pool, d)
	}
	return pool
}

// TestPGChain: the same decisions make the same chain as on SQLite (one
// encoding, one checker), and hand edits with the triggers dropped show.
func TestPGChain(t *testing.T) {
	firstRunOnly(t)
	pool := pgChainJournal(t)
	rep, err := pgVerifyChain(t, pool)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Broken != nil || rep.Decisions != 6 || rep.HeadID != 6 { // the decision log's (pgInsertCall's calls have no chain)
		t.Fatalf("clean log: %+v %+v", rep, rep.Broken)
	}
	// The same rows hashed by hand, as SQLite's writer would.
	prev := GenesisHash
	for i, d := range pgChainDecisions {
		d.ID, d.PrevHash, d.At, d.Host = int64(i+1), prev, fmt.Sprintf("2026-12-05T09:00:%02d.000000000Z", i), "host-pg"
		if prev, err = d.hash(); err != nil {
			t.Fatal(err)
		}
	}
	if rep.Head != prev {
		t.Fatalf("PostgreSQL's head %s, the encoding's %s", rep.Head, prev)
	}

	drop := "DROP TRIGGER decisions_append_only ON decisions; DROP TRIGGER decisions_never_deleted ON decisions"
	for _, tc := range []struct {
		name  string
		stmts []string
		at    int64
		want  string
	}{
		{"a decision deleted", []string{"DELETE FROM decisions WHERE id = 3"}, 4, "does not follow decision 2"},
		{"the newest deleted", []string{"DELETE FROM decisions WHERE id = 6"}, 6, "newest decisions were deleted"},
		{"a note edited", []string{"UPDATE decisions SET note = 'nothing to see' WHERE id = 4"}, 4, "was changed"},
		{"the head record removed", []string{"DELETE FROM meta WHERE name = 'decision_chain_head'"}, 0, "head"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pool := pgChainJournal(t)
			pgExec(t, pool, append([]string{drop}, tc.stmts...)...)
			rep, err := pgVerifyChain(t, pool)
			if err != nil {
				t.Fatal(err)
			}
			if rep.Intact() || rep.Broken.Decision != tc.at || !strings.Contains(rep.Broken.Reason, tc.want) {
				t.Fatalf("broken = %+v, want at %d with %q", rep.Broken, tc.at, tc.want)
			}
		})
	}
}

// TestPGChainConcurrent: decisions from eight connections at once (as from
// eight machines) make one unbroken chain; a decision whose transaction
// rolls back leaves no trace in it.
func TestPGChainConcurrent(t *testing.T) {
	firstRunOnly(t)
	ctx := context.Background()
	pool := pgJournal(t)
	call := pgInsertCall(t, pool, "k-1", "unknown")
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	errGiveUp := errors.New("given up")
	for g := range 8 {
		j, err := Open(ctx, pool.Config().ConnString(), Options{SkipRecovery: true}) // as on a machine of its own
		if err != nil {
			t.Fatal(err)
		}
		defer j.Close()
		wg.Go(func() {
			for i := range 20 {
				err := j.write(ctx, deciding, func(ctx context.Context, c *sql.Conn) error {
					err := j.appendDecision(ctx, c, call, ActionNote, fmt.Sprint("op", g), fmt.Sprintf("2026-12-05T09:%02d:%02d.000000000Z", g, i), "", nil, 0)
					if err == nil && i%5 == 4 {
						err = errGiveUp // rolled back: not in the chain
					}
					return err
				})
				if err != nil && !errors.Is(err, errGiveUp) {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	rep, err := pgVerifyChain(t, pool)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Broken != nil || rep.Decisions != 8*16 || rep.HeadID != 8*16 { // the decision log's
		t.Fatalf("after concurrent decisions: %+v %+v", rep, rep.Broken)
	}
}

// TestPGSchemaMatchesSQLite: the two migration sets end at one schema:
// the same tables with the same columns, and the same indexes and
// triggers, but for what only one dialect has. A migration added to one
// list and not the other fails here.
func TestPGSchemaMatchesSQLite(t *testing.T) {
	sqliteOnly(t) // it compares the SQLite journal with a PostgreSQL one of its own
	ctx := context.Background()
	j := openTest(t, "")
	lite := map[string]bool{}
	rows, err := j.read.QueryContext(ctx, `SELECT 'column ' || m.name || '.' || p.name FROM sqlite_master m, pragma_table_info(m.name) p WHERE m.type = 'table'
		UNION ALL SELECT type || ' ' || name FROM sqlite_master WHERE type IN ('index', 'trigger') AND sql IS NOT NULL`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var s string
		rows.Scan(&s)
		lite[s] = true
	}
	rows.Close()

	pool := pgJournal(t)
	pg := map[string]bool{}
	prow, err := pool.Query(ctx, `SELECT 'column ' || table_name || '.' || column_name FROM information_schema.columns WHERE table_schema = current_schema()
		UNION ALL SELECT 'index ' || indexname FROM pg_indexes WHERE schemaname = current_schema() AND indexname NOT LIKE '%\_pkey' AND indexname NOT LIKE '%\_key'
		UNION ALL SELECT DISTINCT 'trigger ' || trigger_name FROM information_schema.triggers WHERE trigger_schema = current_schema()`)
	if err != nil {
		t.Fatal(err)
	}
	for prow.Next() {
		var s string
		prow.Scan(&s)
		pg[s] = true
	}
	prow.Close()
	onlyPG := map[string]bool{ // what only PostgreSQL has, and why (pgschema.go)
		"column mcp_confirm_schema.version": true, // SQLite: PRAGMA user_version
		"column state_counts.shard":         true, // counts sharded by backend pid
		"trigger calls_never_truncated":     true, // TRUNCATE fires no row trigger
		"trigger decisions_never_truncated": true,
		"column mcp_confirm_secret.secret":  true, // SQLite: the file journal.db.secret
	}
	if len(lite) < 50 || !lite["trigger decisions_append_only"] || !lite["index calls_late_by_fingerprint"] || !pg["column decisions.hash"] || !pg["column calls.redacted_seals"] {
		t.Fatalf("the schemas were not read: %d SQLite and %d PostgreSQL names", len(lite), len(pg))
	}
	for s := range lite {
		if !pg[s] {
			t.Errorf("SQLite has %s; PostgreSQL does not", s)
		}
	}
	for s := range pg {
		if !lite[s] && !onlyPG[s] {
			t.Errorf("PostgreSQL has %s; SQLite does not", s)
		}
	}
}
