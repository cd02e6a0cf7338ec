package guard

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcp-confirm/mcp-confirm/internal/testbin"
	"github.com/mcp-confirm/mcp-confirm/mcpclient"
	"github.com/mcp-confirm/mcp-confirm/pending"
)

// The benchmarks run the guard against the real demo server over stdio
// (the mcp-confirm binary's demo-server command, built once) and compare
// each guarded call with the bare mcpclient round trip of the same tool in
// the same run, interleaved so both see the same machine:
//
//	go test -run '^$' -bench . -benchtime 300x -count 3 ./guard/
//
// ns/op is the guarded call's; x-bare is guarded time ÷ bare time; the
// *-ms/op metrics say where a guarded write's time goes.

var bins testbin.Binaries

func TestMain(m *testing.M) { os.Exit(bins.Run(m)) }

// demoBinary builds the mcp-confirm binary once per test binary run.
func demoBinary(b *testing.B) string {
	b.Helper()
	return bins.Path(b, "mcp-confirm", testbin.MCPConfirm)
}

// phases are the timestamps of one guarded call, filled in by timedServer.
type phases struct {
	start, sendBegin, sendEnd time.Time
	sentRecord                time.Duration // the guard's OnSent, inside the send
	resumed                   bool          // the answer came on a resumed stream
}

type phasesKey struct{}

// timedServer is a real client (stdio or HTTP) with a stopwatch around
// Call, so the guard's time splits into before the send (intent), the
// send, and after it (outcome), without touching the guard's code.
type timedServer struct{ Server }

func (s timedServer) Call(ctx context.Context, tool string, args map[string]any, o mcpclient.CallOptions) mcpclient.Delivery {
	p, _ := ctx.Value(phasesKey{}).(*phases)
	if p == nil {
		return s.Server.Call(ctx, tool, args, o)
	}
	if sent := o.OnSent; sent != nil {
		o.OnSent = func(session int, rpcID string) {
			t0 := time.Now()
			sent(session, rpcID)
			p.sentRecord += time.Since(t0)
		}
	}
	p.sendBegin = time.Now()
	out := s.Server.Call(ctx, tool, args, o)
	p.sendEnd = time.Now()
	p.resumed = out.Resumed
	return out
}

var benchRun atomic.Int64 // keeps keys unique across benchmark invocations

type benchEnv struct {
	client *mcpclient.Client
	g      *Guard
	run    int64
	seq    atomic.Int64
}

// newBenchEnv starts a demo server on a fresh database with budgets no
// benchmark exhausts, and a guard on a fresh journal. The journal lives in
// the temp folder: on these machines that is ext4 on a disk, so the
// intent's fsync is a real one.
func newBenchEnv(b *testing.B) *benchEnv {
	b.Helper()
	bin := demoBinary(b)
	dir := b.TempDir()
	db := filepath.Join(dir, "demo.db")
	c := mcpclient.New(mcpclient.ServerSpec{Command: bin, Args: []string{"demo-server", "--db", db}},
		mcpclient.Options{ClientName: "guard-bench", StartTimeout: 30 * time.Second, StopGrace: time.Second})
	b.Cleanup(func() { c.Close() })
	ctx := context.Background()
	if err := c.Start(ctx); err != nil {
		b.Fatal(err)
	}
	// The server has migrated its database; give the buyer a budget no
	// run can spend, so every create_order really inserts and deducts.
	sdb, err := sql.Open("sqlite", db+"?_pragma=busy_timeout(10000)")
	if err != nil {
		b.Fatal(err)
	}
	if _, err := sdb.Exec("UPDATE budgets SET budget_left = 1000000000000000 WHERE buyer = 'alice'"); err != nil {
		b.Fatal(err)
	}
	sdb.Close()

	j, err := pending.Open(ctx, filepath.Join(dir, "journal.db"), pending.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { j.Close() })
	g := New(j, timedServer{c}, Options{Operator: "bench"})
	if _, err := g.ListTools(ctx); err != nil {
		b.Fatal(err)
	}
	return &benchEnv{client: c, g: g, run: benchRun.Add(1)}
}

// orderArgs are distinct per call (the quantity), as real orders mostly are.
func (e *benchEnv) orderArgs() map[string]any {
	return map[string]any{"item": "widget", "quantity": 1 + e.seq.Add(1)%1_000_000, "buyer": "alice"}
}

func (e *benchEnv) guardedWrite(b *testing.B, p *phases) {
	ctx := context.WithValue(context.Background(), phasesKey{}, p)
	p.start = time.Now()
	res, err := e.g.Call(ctx, Request{Tool: "create_order", Args: e.orderArgs()})
	if err != nil || res.State != pending.StateSucceeded {
		b.Errorf("guarded create_order: %s %v %s", res.State, err, res.Result)
	}
}

func (e *benchEnv) bareWrite(b *testing.B) {
	key := fmt.Sprintf("bench-bare-%d-%012d", e.run, e.seq.Add(1))
	out := e.client.Call(context.Background(), "create_order", e.orderArgs(), mcpclient.CallOptions{
		Key: key, KeyArg: "idempotency_key", IdleTimeout: DefaultWriteTimeout, MaxTotal: DefaultMaxTotal})
	if out.Kind != mcpclient.DeliveryResult || readSignals(out.ResultJSON).isError {
		b.Errorf("bare create_order: %+v %s", out, out.ResultJSON)
	}
}

// writeTotals add up the time of each side and each phase. The machine
// may be shared: besides means, each side keeps its samples (per call when
// sequential, per round when concurrent) so that x-bare-p50 compares
// medians, which one stalled call cannot move.
type writeTotals struct {
	mu                                sync.Mutex
	guarded, bare                     time.Duration
	intent, send, sentRecord, outcome time.Duration
	guardedN, bareN                   int
	guardedS, bareS                   []time.Duration
}

func (t *writeTotals) addGuarded(p *phases, end time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.guardedN++
	t.intent += p.sendBegin.Sub(p.start)
	t.send += p.sendEnd.Sub(p.sendBegin)
	t.sentRecord += p.sentRecord
	t.outcome += end.Sub(p.sendEnd)
}

func (t *writeTotals) report(b *testing.B) {
	ms := func(d time.Duration, n int) float64 { return float64(d.Microseconds()) / 1000 / float64(n) }
	b.ReportMetric(float64(t.guarded.Nanoseconds())/float64(t.guardedN), "ns/op")
	b.ReportMetric(ms(t.guarded, t.guardedN), "guarded-ms/op")
	b.ReportMetric(ms(t.bare, t.bareN), "bare-ms/op")
	b.ReportMetric(float64(t.guarded)/float64(t.guardedN)/(float64(t.bare)/float64(t.bareN)), "x-bare")
	if len(t.guardedS) > 0 && len(t.bareS) > 0 {
		b.ReportMetric(float64(median(t.guardedS))/float64(median(t.bareS)), "x-bare-p50")
	}
	b.ReportMetric(ms(t.intent, t.guardedN), "intent-ms/op")
	b.ReportMetric(ms(t.send, t.guardedN), "send-ms/op")
	b.ReportMetric(ms(t.sentRecord, t.guardedN), "onsent-ms/op")
	b.ReportMetric(ms(t.outcome, t.guardedN), "outcome-ms/op")
}

// BenchmarkWrite: a guarded create_order (intent with a full fsync, one
// send, outcome) against the bare round trip with a fresh key.
func BenchmarkWrite(b *testing.B) {
	b.Run("sequential", func(b *testing.B) {
		e := newBenchEnv(b)
		for range 20 { // warm the server, both paths and the statement caches
			e.guardedWrite(b, &phases{})
			e.bareWrite(b)
		}
		var t writeTotals
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			// Alternate which goes first, so neither always follows the other.
			for k := range 2 {
				if (i+k)%2 == 0 {
					var p phases
					e.guardedWrite(b, &p)
					end := time.Now()
					t.guarded += end.Sub(p.start)
					t.guardedS = append(t.guardedS, end.Sub(p.start))
					t.addGuarded(&p, end)
				} else {
					t0 := time.Now()
					e.bareWrite(b)
					d := time.Since(t0)
					t.bare += d
					t.bareS = append(t.bareS, d)
					t.bareN++
				}
			}
		}
		b.StopTimer()
		t.report(b)
	})

	b.Run("concurrent8", func(b *testing.B) {
		const callers = 8
		e := newBenchEnv(b)
		for range 20 {
			e.guardedWrite(b, &phases{})
			e.bareWrite(b)
		}
		var t writeTotals
		// Rounds of 8 callers × 5 calls, guarded and bare in turn; each
		// side's time is the wall time of its rounds.
		const perCaller = 5
		round := func(guarded bool, n int) {
			var next atomic.Int64
			var wg sync.WaitGroup
			for range callers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for next.Add(1) <= int64(n) {
						if guarded {
							var p phases
							e.guardedWrite(b, &p)
							t.addGuarded(&p, time.Now())
						} else {
							e.bareWrite(b)
						}
					}
				}()
			}
			wg.Wait()
		}
		b.ResetTimer()
		for done, r := 0, 0; done < b.N; r++ {
			n := min(callers*perCaller, b.N-done)
			for k := range 2 {
				guarded := (r+k)%2 == 0
				t0 := time.Now()
				round(guarded, n)
				d := time.Since(t0)
				if guarded {
					t.guarded += d
					t.guardedS = append(t.guardedS, d/time.Duration(n))
				} else {
					t.bare += d
					t.bareS = append(t.bareS, d/time.Duration(n))
					t.bareN += n
				}
			}
			done += n
		}
		b.StopTimer()
		// Phase times are per-call latencies; guarded and bare are wall
		// time per call at 8 callers (throughput).
		t.report(b)
	})
}

// BenchmarkRead: a guarded get_budget (classified read: no journal, no
// key) against the bare round trip.
func BenchmarkRead(b *testing.B) {
	e := newBenchEnv(b)
	args := map[string]any{"buyer": "alice"}
	guarded := func() {
		res, err := e.g.Call(context.Background(), Request{Tool: "get_budget", Args: args})
		if err != nil || res.State != pending.StateSucceeded {
			b.Errorf("guarded get_budget: %s %v", res.State, err)
		}
	}
	bare := func() {
		out := e.client.Call(context.Background(), "get_budget", args, mcpclient.CallOptions{IdleTimeout: DefaultReadTimeout, MaxTotal: DefaultReadTimeout})
		if out.Kind != mcpclient.DeliveryResult || readSignals(out.ResultJSON).isError {
			b.Errorf("bare get_budget: %+v", out)
		}
	}
	for range 50 {
		guarded()
		bare()
	}
	var tg, tb time.Duration
	var sg, sb []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for k := range 2 {
			t0 := time.Now()
			if (i+k)%2 == 0 {
				guarded()
				d := time.Since(t0)
				tg += d
				sg = append(sg, d)
			} else {
				bare()
				d := time.Since(t0)
				tb += d
				sb = append(sb, d)
			}
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(median(sg))/float64(median(sb)), "x-bare-p50")
	b.ReportMetric(float64(tg.Nanoseconds())/float64(b.N), "ns/op")
	b.ReportMetric(float64(tg.Microseconds())/1000/float64(b.N), "guarded-ms/op")
	b.ReportMetric(float64(tb.Microseconds())/1000/float64(b.N), "bare-ms/op")
	b.ReportMetric(float64(tg)/float64(tb), "x-bare")
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
