package guard

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-confirm/mcp-confirm/internal/testbin"
	"github.com/mcp-confirm/mcp-confirm/mcpclient"
	"github.com/mcp-confirm/mcp-confirm/pending"
)

// The HTTP benchmarks (issue 19) run the guard over mcpclient.Remote, as
// `mcp-confirm call --url` does, against one demo server process over
// Streamable HTTP on loopback, and compare each guarded call with a bare
// mcp-go streamable-HTTP client's call to the same process, interleaved
// call by call so that both see the same load:
//
//	go test -run '^$' -bench 'HTTPRead$' -benchtime 2000x -count 6 ./guard/
//	go test -run '^$' -bench 'HTTPWrite$' -benchtime 1000x -count 6 ./guard/
//	go test -run '^$' -bench 'HTTPCutResume$' -benchtime 20x -count 6 ./guard/
//
// The figures, and where the time goes: docs/proxy.md, "Over HTTP".
//
// x-bare is our time ÷ the bare client's (mean), x-bare-p50 the same of
// medians. Each runs once per protocol era the demo serves: 2026-07-28
// (stateless, the default both clients pick) and 2025-11-25 (a session).

// httpDemo is one demo server process over HTTP.
type httpDemo struct {
	url, db string
}

// startHTTPDemo runs `mcp-confirm demo-server --http 127.0.0.1:0` on a
// fresh database, with flags, and gives alice a budget no run spends.
func startHTTPDemo(b *testing.B, flags ...string) httpDemo {
	b.Helper()
	db := filepath.Join(b.TempDir(), "demo.db")
	url := testbin.HTTPDemo(b, demoBinary(b), db, flags...)
	sdb, err := sql.Open("sqlite", db+"?_pragma=busy_timeout(10000)")
	if err != nil {
		b.Fatal(err)
	}
	defer sdb.Close()
	if _, err := sdb.Exec("UPDATE budgets SET budget_left = 1000000000000000 WHERE buyer = 'alice'"); err != nil {
		b.Fatal(err)
	}
	return httpDemo{url: url, db: db}
}

// httpEnv is a guard over Remote on a fresh journal, and a bare mcp-go
// client, both on the same server.
type httpEnv struct {
	remote *mcpclient.Remote
	g      *Guard
	bare   *client.Client
	run    int64
	seq    atomic.Int64
}

func newHTTPEnv(b *testing.B, ourURL, bareURL string) *httpEnv {
	b.Helper()
	ctx := context.Background()
	r, err := mcpclient.NewRemote(mcpclient.ServerSpec{URL: ourURL},
		mcpclient.Options{ClientName: "guard-bench", StartTimeout: 30 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { r.Close() })
	j, err := pending.Open(ctx, filepath.Join(b.TempDir(), "journal.db"), pending.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { j.Close() })
	g := New(j, timedServer{r}, Options{Operator: "bench"})
	if _, err := g.ListTools(ctx); err != nil {
		b.Fatal(err)
	}

	bare, err := client.NewStreamableHttpClient(bareURL)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { bare.Close() })
	if err := bare.Start(ctx); err != nil {
		b.Fatal(err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ClientInfo = mcp.Implementation{Name: "bench-bare", Version: "0"}
	if _, err := bare.Initialize(ctx, init); err != nil {
		b.Fatal(err)
	}
	// A 2026-07-28 client costs more per call than a legacy one: the two
	// must have settled on the same revision, or the difference is the era's.
	if ours, theirs := r.ServerInfo().Protocol, bare.ProtocolVersion(); ours != theirs {
		b.Fatalf("mcpclient negotiated %s, mcp-go's client %s", ours, theirs)
	}
	return &httpEnv{remote: r, g: g, bare: bare, run: benchRun.Add(1)}
}

// eras are the demo's flags for each protocol era it serves.
var eras = []struct{ name, flags string }{
	{"2026-07-28", ""},
	{"2025-11-25", "2025-11-25"},
}

func eraFlags(protocols string) []string {
	if protocols == "" {
		return nil
	}
	return []string{"--protocols", protocols}
}

// samples are one path's per-call times.
type samples []time.Duration

func (s samples) sum() time.Duration {
	var t time.Duration
	for _, d := range s {
		t += d
	}
	return t
}

func (s samples) pct(p float64) time.Duration {
	c := slices.Clone(s)
	slices.Sort(c)
	return c[int(float64(len(c)-1)*p)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// BenchmarkHTTPRead: a read (get_budget) the way `mcp-confirm call --url`
// makes it — guard.Call, classified a read (no journal, no key), one
// attempt through Remote — against a bare mcp-go client's CallTool of the
// same tool on the same server process. A third path, Remote.Call alone
// (the options the guard passes), says how much is the guard's; a fourth,
// the bare client sending a progress token as Remote does, how much is
// the token's (x-bare-token: ours ÷ that). The goal: x-bare ≤ 1.1.
func BenchmarkHTTPRead(b *testing.B) {
	for _, era := range eras {
		b.Run(era.name, func(b *testing.B) {
			d := startHTTPDemo(b, eraFlags(era.flags)...)
			e := newHTTPEnv(b, d.url, d.url)
			ctx := context.Background()
			args := map[string]any{"buyer": "alice"}
			guarded := func() {
				res, err := e.g.Call(ctx, Request{Tool: "get_budget", Args: args})
				if err != nil || res.State != pending.StateSucceeded {
					b.Fatalf("guarded get_budget: %s %v", res.State, err)
				}
			}
			remote := func() {
				out := e.remote.Call(ctx, "get_budget", args, mcpclient.CallOptions{MaxTotal: DefaultReadTimeout})
				if out.Kind != mcpclient.DeliveryResult || readSignals(out.ResultJSON).isError {
					b.Fatalf("Remote get_budget: %+v", out)
				}
			}
			bare := func() {
				req := mcp.CallToolRequest{}
				req.Params.Name = "get_budget"
				req.Params.Arguments = args
				r, err := e.bare.CallTool(ctx, req)
				if err != nil || r.IsError {
					b.Fatalf("mcp-go get_budget: %v %v", err, r)
				}
			}
			// The bare client once more, with a progress token in _meta as
			// Remote sends on every call (its tap tells a call's requests by
			// it): what the token alone costs mcp-go, at both ends.
			tok := 0
			bareToken := func() {
				tok++
				req := mcp.CallToolRequest{}
				req.Params.Name = "get_budget"
				req.Params.Arguments = args
				req.Params.Meta = &mcp.Meta{ProgressToken: fmt.Sprintf("bench-token-%d", tok)}
				r, err := e.bare.CallTool(ctx, req)
				if err != nil || r.IsError {
					b.Fatalf("mcp-go get_budget with a token: %v %v", err, r)
				}
			}
			paths := []func(){guarded, remote, bare, bareToken}
			for range 100 { // warm the server, the clients and their connections
				for _, f := range paths {
					f()
				}
			}
			lat := make([]samples, len(paths))
			for k := range lat {
				lat[k] = make(samples, 0, b.N)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				// Rotate which goes first, so none always follows another.
				for k := range paths {
					p := (i + k) % len(paths)
					t0 := time.Now()
					paths[p]()
					lat[p] = append(lat[p], time.Since(t0))
				}
			}
			b.StopTimer()
			g, r, bb, bt := lat[0], lat[1], lat[2], lat[3]
			b.ReportMetric(float64(g.sum().Nanoseconds())/float64(b.N), "ns/op")
			b.ReportMetric(float64(g.sum())/float64(bb.sum()), "x-bare")
			b.ReportMetric(float64(g.pct(0.5))/float64(bb.pct(0.5)), "x-bare-p50")
			b.ReportMetric(float64(r.sum())/float64(bb.sum()), "remote-x-bare")
			b.ReportMetric(us(g.pct(0.5)), "guarded-p50-µs")
			b.ReportMetric(us(g.pct(0.99)), "guarded-p99-µs")
			b.ReportMetric(us(r.pct(0.5)), "remote-p50-µs")
			b.ReportMetric(us(bb.pct(0.5)), "bare-p50-µs")
			b.ReportMetric(us(bb.pct(0.99)), "bare-p99-µs")
			b.ReportMetric(float64(bt.sum())/float64(bb.sum()), "bare-token-x-bare")
			b.ReportMetric(float64(g.sum())/float64(bt.sum()), "x-bare-token")
		})
	}
}

// BenchmarkHTTPWrite: a guarded create_order over Remote (key, intent
// committed with a full fsync to a SQLite journal in the temp folder, one
// send, outcome committed) against a bare mcp-go client's create_order
// with an idempotency_key of its own (so the server does the same work),
// on the same server process. The *-ms/op metrics split the guarded call
// as the stdio BenchmarkWrite does (intent+outcome-share: those phases'
// share of it; send-x-bare: the send alone ÷ the bare call). Beside them,
// as proxy's BenchmarkWriteThroughProxy does, the journal's own cost for
// one write (journal-share of the guarded call; x-bare-minus-journal: the
// guarded call less it, ÷ the bare call). The goal: x-bare ≤ 1.3.
func BenchmarkHTTPWrite(b *testing.B) {
	for _, era := range eras {
		b.Run(era.name, func(b *testing.B) {
			d := startHTTPDemo(b, eraFlags(era.flags)...)
			e := newHTTPEnv(b, d.url, d.url)
			ctx := context.Background()
			orderArgs := func() map[string]any {
				return map[string]any{"item": "widget", "quantity": 1 + e.seq.Add(1)%1_000_000, "buyer": "alice"}
			}
			guarded := func(p *phases) {
				p.start = time.Now()
				res, err := e.g.Call(context.WithValue(ctx, phasesKey{}, p), Request{Tool: "create_order", Args: orderArgs()})
				if err != nil || res.State != pending.StateSucceeded {
					b.Fatalf("guarded create_order: %s %v %s", res.State, err, res.Result)
				}
			}
			bare := func() {
				req := mcp.CallToolRequest{}
				req.Params.Name = "create_order"
				args := orderArgs()
				args["idempotency_key"] = fmt.Sprintf("bench-bare-%d-%012d", e.run, e.seq.Add(1))
				req.Params.Arguments = args
				r, err := e.bare.CallTool(ctx, req)
				if err != nil || r.IsError {
					b.Fatalf("mcp-go create_order: %v %v", err, r)
				}
			}
			// The journal's own cost of one write, as the stdio proxy
			// benchmark measures it: RecordIntent + RecordOutcome on a
			// journal of its own in the same folder, in this process.
			own, err := pending.Open(ctx, filepath.Join(b.TempDir(), "own.db"), pending.Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer own.Close()
			journalOnce := func() time.Duration {
				n := e.seq.Add(1)
				args := fmt.Sprintf(`{"item":"widget","quantity":1,"buyer":"alice","n":%d}`, n)
				sum := sha256.Sum256([]byte(args))
				t0 := time.Now()
				c, err := own.RecordIntent(ctx, pending.Intent{Server: "bench", Tool: "create_order",
					Kind: pending.KindWrite, KindSource: pending.KindFromAnnotation, Key: fmt.Sprintf("own-%d-%d", e.run, n),
					Args: json.RawMessage(args), Fingerprint: hex.EncodeToString(sum[:]), Session: 1})
				if err != nil {
					b.Fatal(err)
				}
				if err := own.RecordOutcome(ctx, c.ID, 1, pending.Outcome{Event: pending.EventSucceeded,
					Result: json.RawMessage(`{"content":[]}`)}); err != nil {
					b.Fatal(err)
				}
				return time.Since(t0)
			}
			for range 20 {
				guarded(&phases{})
				bare()
				journalOnce()
			}
			var t writeTotals
			var journal samples
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				journal = append(journal, journalOnce())
				for k := range 2 {
					if (i+k)%2 == 0 {
						var p phases
						guarded(&p)
						end := time.Now()
						t.guarded += end.Sub(p.start)
						t.guardedS = append(t.guardedS, end.Sub(p.start))
						t.addGuarded(&p, end)
					} else {
						t0 := time.Now()
						bare()
						d := time.Since(t0)
						t.bare += d
						t.bareS = append(t.bareS, d)
						t.bareN++
					}
				}
			}
			b.StopTimer()
			t.report(b)
			b.ReportMetric(float64(t.intent+t.outcome)/float64(t.guarded), "intent+outcome-share")
			b.ReportMetric(ms(journal.pct(0.5)), "journal-p50-ms")
			b.ReportMetric(float64(journal.sum())/float64(t.guarded), "journal-share")
			// Ours without the journal's own cost, ÷ bare: what the rest of
			// the guarded path (guard, Remote) costs beside the server's answer.
			b.ReportMetric(float64(t.guarded-journal.sum())/float64(t.guardedN)/(float64(t.bare)/float64(t.bareN)), "x-bare-minus-journal")
			b.ReportMetric(float64(t.send)/float64(t.guardedN)/(float64(t.bare)/float64(t.bareN)), "send-x-bare")
			b.ReportMetric(ms(samples(t.guardedS).pct(0.99)), "guarded-p99-ms")
			b.ReportMetric(ms(samples(t.bareS).pct(0.5)), "bare-p50-ms")
		})
	}
}

// cutWatch is a TCP relay on loopback between Remote and the server that
// notes when the server closed a connection the client had not: the cut,
// as the client's side of the network sees it.
type cutWatch struct {
	ln       net.Listener
	upstream string
	mu       sync.Mutex // guards lastCut
	lastCut  time.Time
}

func newCutWatch(b *testing.B, upstream string) *cutWatch {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	w := &cutWatch{ln: ln, upstream: upstream}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go w.relay(c)
		}
	}()
	b.Cleanup(func() {
		ln.Close()
		<-done
	})
	return w
}

func (w *cutWatch) relay(c net.Conn) {
	defer c.Close()
	u, err := net.Dial("tcp", w.upstream)
	if err != nil {
		return
	}
	defer u.Close()
	var clientDone atomic.Bool
	go func() {
		_, _ = io.Copy(u, c)
		clientDone.Store(true)
		u.Close()
	}()
	_, _ = io.Copy(c, u)
	if !clientDone.Load() {
		w.mu.Lock()
		w.lastCut = time.Now()
		w.mu.Unlock()
	}
}

func (w *cutWatch) cutAt() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lastCut
}

// BenchmarkHTTPCutResume: a guarded create_order whose SSE stream is cut
// by the server after the order committed (demo --cut-after-commit, on
// every call), on a 2025-11-25 session whose stream carried a progress
// event first (--delay 400ms), so that Remote resumes it with
// Last-Event-ID and the answer is recovered, not resent. Timed: from the
// cut (the server closing the connection, seen by a relay on the client's
// side, cutWatch) to the answer (Remote.Call returning) and to the guarded
// call's end (the outcome journaled); and from the send to the answer,
// which includes the demo's 400ms of work. The goal: cut to
// answer under 1 s.
func BenchmarkHTTPCutResume(b *testing.B) {
	d := startHTTPDemo(b, "--protocols", "2025-11-25", "--delay", "400ms", "--cut-after-commit", "1000000000")
	host := d.url[len("http://"):]
	host = host[:len(host)-len("/mcp")]
	w := newCutWatch(b, host)
	e := newHTTPEnv(b, "http://"+w.ln.Addr().String()+"/mcp", d.url)
	var toAnswer, toEnd, sendToAnswer samples
	unrecovered := 0
	once := func(timed bool) {
		var p phases
		p.start = time.Now()
		res, err := e.g.Call(context.WithValue(context.Background(), phasesKey{}, &p),
			Request{Tool: "create_order", Args: map[string]any{"item": "widget", "quantity": 1 + e.seq.Add(1), "buyer": "alice"}})
		end := time.Now()
		if err != nil || res.State != pending.StateSucceeded || !p.resumed {
			unrecovered++
			b.Errorf("cut create_order: %s resumed=%v %v %s", res.State, p.resumed, err, res.Error)
			return
		}
		cut := w.cutAt()
		if !cut.After(p.sendBegin) || cut.After(p.sendEnd) {
			b.Fatalf("no cut seen during the send (cut %v, send %v–%v)", cut, p.sendBegin, p.sendEnd)
		}
		if timed {
			toAnswer = append(toAnswer, p.sendEnd.Sub(cut))
			toEnd = append(toEnd, end.Sub(cut))
			sendToAnswer = append(sendToAnswer, p.sendEnd.Sub(p.sendBegin))
		}
	}
	once(false)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		once(true)
	}
	b.StopTimer()
	if len(toAnswer) == 0 {
		return
	}
	b.ReportMetric(ms(toAnswer.pct(0.5)), "cut-to-answer-p50-ms")
	b.ReportMetric(ms(toAnswer.pct(1)), "cut-to-answer-max-ms")
	b.ReportMetric(ms(toEnd.pct(0.5)), "cut-to-journaled-p50-ms")
	b.ReportMetric(ms(toEnd.pct(1)), "cut-to-journaled-max-ms")
	b.ReportMetric(ms(sendToAnswer.pct(0.5)), "send-to-answer-p50-ms")
	b.ReportMetric(ms(sendToAnswer.pct(1)), "send-to-answer-max-ms")
	b.ReportMetric(float64(unrecovered), "unrecovered")
}
