package pending

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Run: go test -run '^$' -bench . -benchtime 2s ./pending/ (compare runs with benchstat).
// Every figure that matters is a ratio against a baseline measured in the
// same run, because this machine is shared and noisy.

// bareFullInsertsPerSecond measures the baseline: one row inserted and
// committed per transaction with synchronous=FULL, in WAL mode, with no
// journal code in the way.
func bareFullInsertsPerSecond(b *testing.B, n int) float64 {
	b.Helper()
	db, err := sql.Open("sqlite", filepath.Join(b.TempDir(), "bare.db")+"?_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)")
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := db.Exec("CREATE TABLE t (id INTEGER PRIMARY KEY, key TEXT UNIQUE, args TEXT)"); err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	for i := range n {
		if _, err := db.Exec("INSERT INTO t (key, args) VALUES (?, ?)", fmt.Sprintf("k%d", i), `{"item":"widget"}`); err != nil {
			b.Fatal(err)
		}
	}
	return float64(n) / time.Since(start).Seconds()
}

func BenchmarkIntents(b *testing.B) {
	for _, writers := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "journal.db")
			j := openTest(b, path)
			bare := bareBaseline(b, testDB(b, path), 300, writers) // pgbench_test.go
			ctx := context.Background()
			var seq atomic.Int64
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			per := (b.N + writers - 1) / writers
			for range writers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range per {
						n := seq.Add(1)
						in := intent("create_order", fmt.Sprintf(`{"n":%d}`, n))
						if _, err := j.RecordIntent(ctx, in); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			rate := float64(per*writers) / time.Since(start).Seconds()
			b.ReportMetric(rate, "intents/s")
			b.ReportMetric(bare, "bare-full-inserts/s")
			b.ReportMetric(rate/bare, "x-bare")
		})
	}
}

// The million-call journal is built once per machine (it takes a while)
// and reused from the temp dir; only the in-flight rows are reset between
// iterations.
const (
	bigCalls    = 1_000_000
	bigUnknown  = 10_000
	bigInFlight = 100
	deadOwner   = "01DEADOWNER0000000000000000"
)

var bigOnce sync.Once
var bigPath string

func bigJournal(b *testing.B) string {
	bigOnce.Do(func() {
		bigPath = filepath.Join(os.TempDir(), fmt.Sprintf("mcp-confirm-bench-%d-v%d.db", bigCalls, len(migrations)))
		if _, err := os.Stat(bigPath + ".complete"); err == nil {
			return
		}
		os.Remove(bigPath)
		os.RemoveAll(ownersDir(bigPath))
		j, err := Open(context.Background(), bigPath, Options{})
		if err != nil {
			b.Fatal(err)
		}
		j.Close()
		db, err := sql.Open("sqlite", bigPath+"?_pragma=synchronous(OFF)")
		if err != nil {
			b.Fatal(err)
		}
		defer db.Close()
		tx, _ := db.Begin()
		callStmt, _ := tx.Prepare(`INSERT INTO calls (id, server, tool, kind, kind_source, key, args, fingerprint, state,
			reason, owner, created_at, updated_at) VALUES (?, 'demo', 'create_order', 'write', 'default', ?, ?, ?, ?, ?, ?, ?, ?)`)
		attStmt, _ := tx.Prepare(`INSERT INTO attempts (call_id, n, session, owner, sent_at, ended_at, outcome, reason)
			VALUES (?, 1, 1, ?, ?, ?, ?, ?)`)
		t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
		for i := 1; i <= bigCalls; i++ {
			state, reason, outcome, owner := StateSucceeded, "", OutcomeSucceeded, "01OLDOWNER"
			switch {
			case i%(bigCalls/bigUnknown) == 0:
				state, reason, outcome = StateUnknown, "idle timeout", OutcomeUnknown
			case i%(bigCalls/bigInFlight) == 1:
				state, outcome, owner = StateInFlight, OutcomePending, deadOwner
			}
			ts := formatTime(t0.Add(time.Duration(i) * time.Second))
			var ended any = ts
			if outcome == OutcomePending {
				ended = nil
			}
			if _, err := callStmt.Exec(i, fmt.Sprintf("key-%d", i), fmt.Sprintf(`{"item":"widget","n":%d}`, i),
				fmt.Sprintf("fp-%d", i), state, reason, owner, ts, ts); err != nil {
				b.Fatal(err)
			}
			if _, err := attStmt.Exec(i, owner, ts, ended, outcome, reason); err != nil {
				b.Fatal(err)
			}
		}
		if err := tx.Commit(); err != nil {
			b.Fatal(err)
		}
		os.WriteFile(bigPath+".complete", nil, 0o600)
	})
	return bigPath
}

// resetInFlight puts the dead owner's calls back in flight so every Open
// has the same recovery to do.
func resetInFlight(b *testing.B, path string) {
	db, err := sql.Open("sqlite", path)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`UPDATE calls SET state = 'in_flight', reason = '' WHERE owner = ?;
		UPDATE attempts SET outcome = 'pending', ended_at = NULL WHERE owner = ?;
		DELETE FROM events WHERE kind = 'recovery'`, deadOwner, deadOwner); err != nil {
		b.Fatal(err)
	}
}

func BenchmarkMillionCalls(b *testing.B) {
	if testBackend == "postgres" {
		b.Skip("a SQLite file; on PostgreSQL it is BenchmarkMillionCallsPG")
	}
	path := bigJournal(b)
	ctx := context.Background()
	b.Run("open+recover", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			resetInFlight(b, path)
			b.StartTimer()
			j, err := Open(ctx, path, Options{})
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
	j, err := Open(ctx, path, Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer j.Close()
	b.Run("unknown-oldest-first-100", func(b *testing.B) {
		for b.Loop() {
			calls, err := j.List(ctx, Filter{States: []State{StateUnknown}, OldestFirst: true, Limit: 100})
			if err != nil || len(calls) != 100 {
				b.Fatalf("%d calls, %v", len(calls), err)
			}
		}
	})
	b.Run("state-counts", func(b *testing.B) {
		for b.Loop() {
			counts, err := j.Counts(ctx)
			if err != nil || counts[StateSucceeded] < bigCalls/2 {
				b.Fatalf("%v %v", counts, err)
			}
		}
	})
	b.Run("get-with-attempts", func(b *testing.B) {
		for b.Loop() {
			if _, err := j.Get(ctx, bigCalls/2); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkServersOnBigJournal: the servers a console over the whole
// journal starts from, by Servers (one grouped read) against Report, which
// it replaced there (every call's row, and its attempts), in one run.
func BenchmarkServersOnBigJournal(b *testing.B) {
	if testBackend == "postgres" {
		b.Skip("a SQLite file")
	}
	ctx := context.Background()
	j, err := Open(ctx, bigJournal(b), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer j.Close()
	b.Run("Report", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := j.Report(ctx, time.Time{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Servers", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := j.Servers(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
}
