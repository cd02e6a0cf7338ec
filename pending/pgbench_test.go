package pending

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mcp-confirm/mcp-confirm/internal/pgtest"
)

// The PostgreSQL benchmarks of issue 22. They run on the PostgreSQL pass
// of TestMain (runOnBothBackends) and skip on the SQLite pass, saying so.
// As in bench_test.go, every figure that matters is a ratio against a
// baseline measured in the same run, interleaved with the measured code in
// rounds so that a neighbour's burst of load falls on both:
//
//	go test -run '^$' -bench 'Guarded|Million' -benchtime 2s -count 6 ./pending/ | tee /tmp/pgbench.txt
//	benchstat /tmp/pgbench.txt
//
// The cluster is pgtest's (fsync on, synchronous_commit on, a Unix
// socket): the same costs a team's server has, minus the network.

func postgresOnly(b *testing.B) {
	b.Helper()
	if testBackend != "postgres" {
		b.Skip("a PostgreSQL benchmark: it runs on the PostgreSQL pass, with its baselines measured there")
	}
}

// bareBaseline is BenchmarkIntents' baseline on the run's backend: n rows
// inserted one per transaction, with a full flush, by writers at once: on
// SQLite bareFullInsertsPerSecond (one writer whatever writers is, as
// SQLite has); on PostgreSQL bare pgx inserts with synchronous_commit on,
// each writer on a connection of its own, in the journal's database conn.
func bareBaseline(b *testing.B, conn string, n, writers int) float64 {
	b.Helper()
	if testBackend != "postgres" {
		return bareFullInsertsPerSecond(b, n)
	}
	bare := openBarePG(b, conn, writers)
	defer bare.close()
	return float64(n) / bare.run(b, n).Seconds()
}

// barePG is the PostgreSQL baseline: a table of the journal's database
// with a key and the arguments, and one connection per writer, each
// INSERT a transaction of its own committed with synchronous_commit on.
type barePG struct {
	conns []*pgx.Conn
	seq   *atomic.Int64
}

func openBarePG(b *testing.B, conn string, writers int) *barePG {
	b.Helper()
	ctx := context.Background()
	p := &barePG{seq: new(atomic.Int64)}
	for range writers {
		c, err := pgx.Connect(ctx, conn)
		if err != nil {
			p.close()
			b.Fatalf("bare insert: connect: %v", err)
		}
		p.conns = append(p.conns, c)
	}
	if _, err := p.conns[0].Exec(ctx, `CREATE TABLE IF NOT EXISTS bare_inserts (
		id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, key TEXT NOT NULL UNIQUE, args TEXT NOT NULL)`); err != nil {
		p.close()
		b.Fatalf("bare insert: %v", err)
	}
	for _, c := range p.conns {
		var mode string
		if _, err := c.Exec(ctx, "SET synchronous_commit = on"); err != nil {
			p.close()
			b.Fatal(err)
		}
		if err := c.QueryRow(ctx, "SHOW synchronous_commit").Scan(&mode); err != nil || mode != "on" {
			p.close()
			b.Fatalf("bare insert: synchronous_commit = %q (%v), want on", mode, err)
		}
	}
	return p
}

func (p *barePG) close() {
	for _, c := range p.conns {
		c.Close(context.Background())
	}
}

// run inserts n rows, as many at once as p has connections, and returns
// the time it took.
func (p *barePG) run(b *testing.B, n int) time.Duration {
	ctx := context.Background()
	base := p.seq.Add(int64(n)) - int64(n)
	return together(b, len(p.conns), n, func(w, i int) error {
		k := base + int64(i)
		_, err := p.conns[w].Exec(ctx, "INSERT INTO bare_inserts (key, args) VALUES ($1, $2)",
			fmt.Sprintf("bare-%d", k), fmt.Sprintf(`{"item":"widget","n":%d}`, k))
		return err
	})
}

// together runs op n times in all, from writers goroutines at once (op
// is told its goroutine w and the operation's number i, 0 to n-1), and
// returns the wall time: per write, the inverse of the throughput.
func together(b *testing.B, writers, n int, op func(w, i int) error) time.Duration {
	var next atomic.Int64
	var wg sync.WaitGroup
	var failed atomic.Bool
	start := time.Now()
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !failed.Load() {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := op(w, i); err != nil {
					failed.Store(true)
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	took := time.Since(start)
	if failed.Load() {
		b.FailNow()
	}
	return took
}

var guardedSeq atomic.Int64 // keys unique across every journal of the binary

// guardedWrite is what the guard records around one write call it sends:
// the intent, committed durably (with the resend hold and the late-settle
// hold checked, as guard.Call asks by default), then the outcome.
func guardedWrite(ctx context.Context, j *Journal, tool string) error {
	n := guardedSeq.Add(1)
	in := intent(tool, fmt.Sprintf(`{"item":"widget","n":%d}`, n))
	in.Hold, in.LateHold = true, 24*time.Hour
	c, err := j.RecordIntent(ctx, in)
	if err != nil {
		return fmt.Errorf("intent: %w", err)
	}
	res := json.RawMessage(`{"content":[{"type":"text","text":"order created"}],"isError":false}`)
	if err := j.RecordOutcome(ctx, c.ID, 1, Outcome{Event: EventSucceeded, Result: res, RPCID: fmt.Sprint(n)}); err != nil {
		return fmt.Errorf("outcome: %w", err)
	}
	return nil
}

// guardedEnv is one count's journals and baseline, shared by its
// sub-benchmarks (and by the runs that size b.N).
type guardedEnv struct {
	pg, sqlite *Journal
	bare       *barePG
}

// BenchmarkGuardedWrite: a guarded write (intent with synchronous commit,
// then its outcome) on a PostgreSQL journal, against a bare pgx insert of
// one row per transaction with synchronous_commit on in the same database
// at the same number of concurrent writers (goal: at most 1.5×), and
// against the same guarded write on a SQLite journal. ns/op is the
// PostgreSQL journal's wall time per write; x-bare and x-sqlite are its
// ratios to the two baselines. "tool=shared": every writer calls the same
// tool (intents of one server and tool take turns, for the key check and
// the resend hold); "tool=own": each writer its own tool.
func BenchmarkGuardedWrite(b *testing.B) {
	postgresOnly(b)
	ctx := context.Background()
	conn := testDB(b, "")
	env := &guardedEnv{bare: openBarePG(b, conn, 64)}
	b.Cleanup(env.bare.close)
	var err error
	if env.pg, err = Open(ctx, conn, Options{}); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { env.pg.Close() })
	if env.sqlite, err = Open(ctx, filepath.Join(b.TempDir(), "journal.db"), Options{}); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { env.sqlite.Close() })

	cases := []struct {
		name    string
		writers int
		ownTool bool
	}{
		{"writers=1", 1, false},
		{"writers=8/tool=shared", 8, false},
		{"writers=8/tool=own", 8, true},
		{"writers=64/tool=shared", 64, false},
		{"writers=64/tool=own", 64, true},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			tool := func(w int) string {
				if tc.ownTool {
					return fmt.Sprintf("create_order_%d", w)
				}
				return "create_order"
			}
			bare := &barePG{conns: env.bare.conns[:tc.writers], seq: env.bare.seq}
			guarded := func(j *Journal, n int) time.Duration {
				return together(b, tc.writers, n, func(w, _ int) error { return guardedWrite(ctx, j, tool(w)) })
			}
			// Warm each side's connections and statement caches.
			bare.run(b, tc.writers)
			guarded(env.pg, tc.writers)
			guarded(env.sqlite, tc.writers)

			const rounds = 4
			var tBare, tPG, tSQLite time.Duration
			b.ResetTimer()
			for r := range rounds {
				n := b.N / rounds
				if r == rounds-1 {
					n = b.N - n*(rounds-1)
				}
				if n == 0 {
					continue
				}
				b.StopTimer()
				tBare += bare.run(b, n)
				tSQLite += guarded(env.sqlite, n)
				b.StartTimer()
				tPG += guarded(env.pg, n)
			}
			b.StopTimer()
			perWrite := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / float64(b.N) }
			b.ReportMetric(perWrite(tBare), "bare-ns/write")
			b.ReportMetric(perWrite(tSQLite), "sqlite-ns/write")
			b.ReportMetric(float64(tPG)/float64(tBare), "x-bare")
			b.ReportMetric(float64(tPG)/float64(tSQLite), "x-sqlite")
		})
	}
}

// The million-call journal on PostgreSQL: the rows of bigJournal (SQLite's,
// in bench_test.go), made by INSERT … SELECT FROM generate_series in the
// server, once per test binary, in a database of the binary's cluster
// that lives as long as it does.
var (
	pgBigOnce sync.Once
	pgBigConn string
	pgBigErr  error
)

func pgBigJournal(b *testing.B) string {
	b.Helper()
	cluster := pgtest.Start(b)
	pgBigOnce.Do(func() {
		start := time.Now()
		pgBigConn, pgBigErr = buildPGBigJournal(cluster)
		b.Logf("built the PostgreSQL journal of %d calls in %v", bigCalls, time.Since(start).Round(time.Millisecond))
	})
	if pgBigErr != nil {
		b.Fatal(pgBigErr)
	}
	return pgBigConn
}

func buildPGBigJournal(cluster *pgtest.Cluster) (string, error) {
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, cluster.ConnString("postgres"))
	if err != nil {
		return "", err
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "CREATE DATABASE bench_million"); err != nil {
		return "", fmt.Errorf("create the million-call database: %w", err)
	}
	conn := cluster.ConnString("bench_million")
	if err := pgMigrateConn(ctx, conn); err != nil {
		return "", err
	}
	c, err := pgx.Connect(ctx, conn)
	if err != nil {
		return "", err
	}
	defer c.Close(ctx)
	// Triggers (the per-row state counts, the foreign keys) are off for the
	// load, as for a restore; the counts are set from the rows after it.
	ts := `to_char(timestamp '2025-01-01' + i * interval '1 second', 'YYYY-MM-DD"T"HH24:MI:SS".000000000Z"')`
	steps := []string{
		"SET session_replication_role = replica",
		"SET synchronous_commit = off",
		"SET maintenance_work_mem = '256MB'",
		fmt.Sprintf(`INSERT INTO calls (id, server, tool, kind, kind_source, key, args, fingerprint, state,
			reason, owner, created_at, updated_at)
		SELECT i, 'demo', 'create_order', 'write', 'default', 'key-' || i, '{"item":"widget","n":' || i || '}', 'fp-' || i,
			CASE WHEN i %% %[2]d = 0 THEN 'unknown' WHEN i %% %[3]d = 1 THEN 'in_flight' ELSE 'succeeded' END,
			CASE WHEN i %% %[2]d = 0 THEN 'idle timeout' ELSE '' END,
			CASE WHEN i %% %[2]d <> 0 AND i %% %[3]d = 1 THEN '%[4]s' ELSE '01OLDOWNER' END,
			%[5]s, %[5]s
		FROM generate_series(1, %[1]d) i`, bigCalls, bigCalls/bigUnknown, bigCalls/bigInFlight, deadOwner, ts),
		`INSERT INTO attempts (call_id, n, session, owner, sent_at, ended_at, outcome, reason)
		SELECT id, 1, 1, owner, created_at,
			CASE WHEN state = 'in_flight' THEN NULL ELSE created_at END,
			CASE state WHEN 'in_flight' THEN 'pending' WHEN 'unknown' THEN 'unknown' ELSE 'succeeded' END,
			reason
		FROM calls`,
		fmt.Sprintf("SELECT setval(pg_get_serial_sequence('calls', 'id'), %d)", bigCalls),
		"SET session_replication_role = DEFAULT",
		`UPDATE state_counts s SET n = CASE WHEN s.shard = 0 THEN coalesce(c.n, 0) ELSE 0 END
		FROM (SELECT st, (SELECT count(*) FROM calls WHERE state = st) AS n
			FROM unnest(ARRAY['in_flight', 'succeeded', 'failed', 'unknown', 'applied', 'abandoned']) st) c
		WHERE c.st = s.state`,
		"VACUUM (ANALYZE) calls",
		"VACUUM (ANALYZE) attempts",
		"VACUUM (ANALYZE) state_counts",
		"CHECKPOINT",
	}
	for _, q := range steps {
		if _, err := c.Exec(ctx, q); err != nil {
			return "", fmt.Errorf("build the million-call journal: %w\n%s", err, q)
		}
	}
	return conn, nil
}

// pgMigrateConn makes the journal's schema in the database conn.
func pgMigrateConn(ctx context.Context, conn string) error {
	c, err := pgx.Connect(ctx, conn)
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	return pgMigrate(ctx, c)
}

// pgResetInFlight is resetInFlight on the PostgreSQL journal: the dead
// owner's calls back in flight, so every Open has the same recovery to do.
func pgResetInFlight(b *testing.B, conn string) {
	ctx := context.Background()
	c, err := pgx.Connect(ctx, conn)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close(ctx)
	for _, q := range []string{
		"UPDATE calls SET state = 'in_flight', reason = '' WHERE owner = $1",
		"UPDATE attempts SET outcome = 'pending', ended_at = NULL WHERE owner = $1",
	} {
		if _, err := c.Exec(ctx, q, deadOwner); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := c.Exec(ctx, "DELETE FROM events WHERE kind = 'recovery'"); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkMillionCallsPG is BenchmarkMillionCalls on PostgreSQL: the
// console's reads on a journal of a million calls (goal: under 5 ms each).
// round-trip is the baseline, one SELECT 1 through the journal's pool:
// x-round-trip says how many of it a read costs.
func BenchmarkMillionCallsPG(b *testing.B) {
	postgresOnly(b)
	conn := pgBigJournal(b)
	ctx := context.Background()
	b.Run("open+recover", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			pgResetInFlight(b, conn)
			b.StartTimer()
			j, err := Open(ctx, conn, Options{})
			if err != nil {
				b.Fatal(err)
			}
			if got := len(j.Recovered()); got != bigInFlight {
				b.Fatalf("recovered %d, want %d", got, bigInFlight)
			}
			b.StopTimer()
			j.Close()
			b.StartTimer()
		}
	})
	j, err := Open(ctx, conn, Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer j.Close()

	roundTrip := func() error {
		var one int
		return j.read.QueryRowContext(ctx, "SELECT 1").Scan(&one)
	}
	reads := []struct {
		name string
		read func() error
	}{
		{"round-trip", roundTrip},
		{"unknown-oldest-first-100", func() error {
			calls, err := j.List(ctx, Filter{States: []State{StateUnknown}, OldestFirst: true, Limit: 100})
			if err == nil && len(calls) != 100 {
				err = fmt.Errorf("%d calls", len(calls))
			}
			return err
		}},
		{"all-newest-first-100", func() error {
			calls, err := j.List(ctx, Filter{Limit: 100})
			if err == nil && len(calls) != 100 {
				err = fmt.Errorf("%d calls", len(calls))
			}
			return err
		}},
		{"unknown-page-deep", func() error { // keyset paging half-way down the unknown list
			after := Call{ID: bigCalls / 2, CreatedAt: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC).Add(bigCalls / 2 * time.Second)}
			calls, err := j.List(ctx, Filter{States: []State{StateUnknown}, OldestFirst: true, Limit: 100, After: &after})
			if err == nil && len(calls) != 100 {
				err = fmt.Errorf("%d calls", len(calls))
			}
			return err
		}},
		{"failed-oldest-first-100", func() error { // a work-queue tab with nothing in it (no call failed)
			calls, err := j.List(ctx, Filter{States: []State{StateFailed}, OldestFirst: true, Limit: 100})
			if err == nil && len(calls) != 0 {
				err = fmt.Errorf("%d calls", len(calls))
			}
			return err
		}},
		{"state-counts", func() error {
			counts, err := j.Counts(ctx)
			if err == nil && (counts[StateSucceeded] < bigCalls/2 || counts[StateUnknown] != bigUnknown+bigInFlight) {
				err = fmt.Errorf("counts %v", counts)
			}
			return err
		}},
		{"console-window", func() error { // what the console reads for its first screen: a list window and the counts
			calls, err := j.List(ctx, Filter{States: []State{StateUnknown}, OldestFirst: true, Limit: 91})
			if err == nil && len(calls) != 91 {
				err = fmt.Errorf("%d calls", len(calls))
			}
			if err == nil {
				_, err = j.Counts(ctx)
			}
			return err
		}},
		{"get-with-attempts", func() error {
			_, err := j.Get(ctx, bigCalls/2)
			return err
		}},
	}
	for _, r := range reads {
		b.Run(r.name, func(b *testing.B) {
			// Interleaved with the round trip, to give a ratio on a noisy machine.
			var tRead, tTrip time.Duration
			for b.Loop() {
				start := time.Now()
				if err := r.read(); err != nil {
					b.Fatal(err)
				}
				tRead += time.Since(start)
				b.StopTimer()
				start = time.Now()
				if err := roundTrip(); err != nil {
					b.Fatal(err)
				}
				tTrip += time.Since(start)
				b.StartTimer()
			}
			b.ReportMetric(float64(tRead)/float64(tTrip), "x-round-trip")
		})
	}
	b.Run("stats", func(b *testing.B) { // `mcp-confirm stats`: scans the journal, not a console read
		for b.Loop() {
			st, err := j.Stats(ctx)
			if err != nil || st.Calls != bigCalls {
				b.Fatalf("%+v %v", st.Calls, err)
			}
		}
	})
}
