package proxy_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"github.com/mcp-confirm/mcp-confirm/pending"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-confirm/mcp-confirm/internal/npmfixture"
)

// stdioClient starts command as a child process and completes the MCP
// handshake with mcp-go's client, as a Go host would. The child is returned
// too, to read its CPU time.
func stdioClient(b *testing.B, version string, env []string, command string, args ...string) (*client.Client, *exec.Cmd) {
	b.Helper()
	var child *exec.Cmd
	spawn := func(ctx context.Context, command string, env []string, args []string) (*exec.Cmd, error) {
		child = exec.CommandContext(ctx, command, args...)
		child.Env = append(os.Environ(), env...)
		return child, nil
	}
	c, err := client.NewStdioMCPClientWithOptions(command, env, args, transport.WithCommandFunc(spawn))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Close() })
	init := mcp.InitializeRequest{}
	init.Params.ClientInfo = mcp.Implementation{Name: "bench-host", Version: "0"}
	init.Params.ProtocolVersion = version // "": the newest both ends speak
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.Initialize(ctx, init); err != nil {
		b.Fatal(err)
	}
	return c, child
}

// target is a downstream server and one read tool of it.
type target struct {
	command string
	args    []string
	tool    string
	toolArg map[string]any
}

// demoTarget is the built-in demo server (mcp-go, 2026-07-28): get_budget.
func demoTarget(b *testing.B) target {
	return target{bin, []string{"demo-server", "--db", filepath.Join(b.TempDir(), "demo.db")}, "get_budget", map[string]any{"buyer": "alice"}}
}

// everythingTarget is server-everything (TypeScript SDK, legacy era): echo.
func everythingTarget(b *testing.B) target {
	return target{"node", []string{npmfixture.Bin(b, "mcp-server-everything")}, "echo", map[string]any{"message": "hello"}}
}

func readOnce(b *testing.B, c *client.Client, tg target) time.Duration {
	req := mcp.CallToolRequest{}
	req.Params.Name = tg.tool
	req.Params.Arguments = tg.toolArg
	start := time.Now()
	r, err := c.CallTool(context.Background(), req)
	d := time.Since(start)
	if err != nil || r.IsError {
		b.Fatalf("%s: %v %v", tg.tool, err, r)
	}
	return d
}

// path is one way for a host to reach a server: the process it spawns and
// the host's connection to it.
type path struct {
	c     *client.Client
	child *exec.Cmd
}

// paths are three hosts reaching three instances of the same server:
// directly, through a byte relay (this test binary, see relayMain), and
// through the mcp-confirm proxy (a child process, as deployed).
//
// With BENCH_PEER_PROXY set (a command that takes the server's command
// after its own words, e.g. "mcptools guard --allow tools:*"), a fourth
// host reaches a fourth instance through that peer proxy: built by whoever
// runs the benchmark, so that no peer code is committed.
type paths struct {
	direct, relay, proxy path
	peer                 *path
}

// benchPeerProxy is BENCH_PEER_PROXY's words; nil when unset.
var benchPeerProxy = strings.Fields(os.Getenv("BENCH_PEER_PROXY"))

func startPaths(b *testing.B, tg target) paths {
	var ps paths
	ps.direct.c, ps.direct.child = stdioClient(b, "", nil, tg.command, tg.args...)
	ps.relay.c, ps.relay.child = stdioClient(b, "", []string{relayEnv + "=1"}, os.Args[0], append([]string{tg.command}, tg.args...)...)
	ps.proxy.c, ps.proxy.child = stdioClient(b, "", benchProxyEnv, bin, append([]string{"proxy", "--db", filepath.Join(b.TempDir(), "journal.db"), "--", tg.command}, tg.args...)...)
	all := []path{ps.direct, ps.relay, ps.proxy}
	if len(benchPeerProxy) > 0 {
		peer := path{}
		peerArgs := append(append(slices.Clone(benchPeerProxy[1:]), tg.command), tg.args...)
		peer.c, peer.child = stdioClient(b, "", nil, benchPeerProxy[0], peerArgs...)
		ps.peer = &peer
		all = append(all, peer)
	}
	// mcp-go's client spends more per call on 2026-07-28 than on the legacy
	// protocol: the three hosts must have settled on the same one, or the
	// difference would be the host's, not the path's. (The proxy gives a
	// host the protocol the server speaks, so they do.)
	for _, p := range all[1:] {
		if v, want := p.c.ProtocolVersion(), ps.direct.c.ProtocolVersion(); v != want {
			b.Fatalf("a host negotiated %s, the direct one %s", v, want)
		}
	}
	for _, p := range all {
		readOnce(b, p.c, tg) // warm up each path (tool lists, caches)
	}
	return ps
}

// cpuMeter reads the CPU a process used between start and stop.
type cpuMeter struct {
	pid   int
	start int64
	ok    bool
}

func startCPU(c *exec.Cmd) cpuMeter { return startCPUOf(c.Process.Pid) }

func startCPUOf(pid int) cpuMeter {
	t, ok := cpuTime(pid)
	return cpuMeter{pid, t, ok}
}

// startServerCPU meters the server that the relay or proxy c started.
func startServerCPU(c *exec.Cmd) cpuMeter {
	pid, ok := childOf(c.Process.Pid)
	if !ok {
		return cpuMeter{}
	}
	return startCPUOf(pid)
}

// perCall reports the CPU used since start, per call, as a metric, and
// returns it (0 where it cannot be read).
func (m cpuMeter) perCall(b *testing.B, calls int, name string) float64 {
	end, ok := cpuTime(m.pid)
	if !m.ok || !ok || calls == 0 {
		return 0 // no /proc here: the other figures still stand
	}
	v := float64(end-m.start) * 10000 / float64(calls) // a tick is 10 ms
	b.ReportMetric(v, name)
	return v
}

func percentile(ds []time.Duration, p float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[int(float64(len(s)-1)*p)]
}

func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// BenchmarkReadThroughProxy: one read at a time on each of three paths
// (direct, byte relay, proxy), interleaved in the same run so all see the
// same machine, against the demo server (Go) and server-everything (node).
// Reported: p50/p99 of each path, the latency the proxy adds to direct, its
// throughput as a share of direct and of the relay (the floor for any
// process in the middle), and the CPU per call of the proxy and the relay
// processes and of the server the direct host talks to.
//
//	go test -run '^$' -bench ReadThroughProxy -benchtime 2000x ./proxy/
func BenchmarkReadThroughProxy(b *testing.B) {
	b.Run("demo", func(b *testing.B) { sequential(b, demoTarget(b)) })
	b.Run("everything", func(b *testing.B) { sequential(b, everythingTarget(b)) })
}

func sequential(b *testing.B, tg target) {
	ps := startPaths(b, tg)
	dl := make([]time.Duration, 0, b.N)
	rl := make([]time.Duration, 0, b.N)
	pl := make([]time.Duration, 0, b.N)
	var peerl []time.Duration
	var peerCPU cpuMeter
	server, relay, proxy := startCPU(ps.direct.child), startCPU(ps.relay.child), startCPU(ps.proxy.child)
	serverViaRelay, serverViaProxy := startServerCPU(ps.relay.child), startServerCPU(ps.proxy.child)
	if ps.peer != nil {
		peerl = make([]time.Duration, 0, b.N)
		peerCPU = startCPU(ps.peer.child)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		dl = append(dl, readOnce(b, ps.direct.c, tg))
		rl = append(rl, readOnce(b, ps.relay.c, tg))
		pl = append(pl, readOnce(b, ps.proxy.c, tg))
		if ps.peer != nil {
			peerl = append(peerl, readOnce(b, ps.peer.c, tg))
		}
	}
	b.StopTimer()
	server.perCall(b, b.N, "server-cpu-µs/call")
	relayCPU := relay.perCall(b, b.N, "relay-cpu-µs/call")
	proxyCPU := proxy.perCall(b, b.N, "proxy-cpu-µs/call")
	if relayCPU > 0 {
		b.ReportMetric(proxyCPU/relayCPU, "proxy/relay-cpu")
	}
	if ps.peer != nil {
		peerCPU.perCall(b, b.N, "peer-cpu-µs/call")
		b.ReportMetric(micros(percentile(peerl, 0.5)), "peer-p50-µs")
		b.ReportMetric(micros(percentile(peerl, 0.99)), "peer-p99-µs")
		b.ReportMetric(float64(sum(dl))/float64(sum(peerl)), "peer/direct-throughput")
		b.ReportMetric(float64(sum(peerl))/float64(sum(pl)), "proxy/peer-throughput")
	}
	// The same server's CPU behind the relay and behind the proxy: the
	// proxy's requests must not cost the server more than the host's own.
	serverViaRelay.perCall(b, b.N, "server-via-relay-cpu-µs/call")
	serverViaProxy.perCall(b, b.N, "server-via-proxy-cpu-µs/call")
	b.ReportMetric(micros(percentile(dl, 0.5)), "direct-p50-µs")
	b.ReportMetric(micros(percentile(dl, 0.99)), "direct-p99-µs")
	b.ReportMetric(micros(percentile(pl, 0.5)), "proxy-p50-µs")
	b.ReportMetric(micros(percentile(pl, 0.99)), "proxy-p99-µs")
	b.ReportMetric(micros(percentile(pl, 0.5)-percentile(dl, 0.5)), "added-p50-µs")
	b.ReportMetric(micros(percentile(pl, 0.99)-percentile(dl, 0.99)), "added-p99-µs")
	d, r, p := sum(dl), sum(rl), sum(pl)
	b.ReportMetric(float64(d)/float64(p), "proxy/direct-throughput")
	b.ReportMetric(float64(d)/float64(r), "relay/direct-throughput")
	b.ReportMetric(float64(r)/float64(p), "proxy/relay-throughput")
}

func sum(ds []time.Duration) time.Duration {
	var t time.Duration
	for _, d := range ds {
		t += d
	}
	return t
}

// BenchmarkReadThroughProxyConcurrent: 8 concurrent reads on one
// connection (as a host multiplexes). The paths take turns in rounds of
// about a hundred calls each, so that all three see the same machine, and
// each path's time is the sum of its rounds.
func BenchmarkReadThroughProxyConcurrent(b *testing.B) {
	b.Run("demo", func(b *testing.B) { concurrent(b, demoTarget(b)) })
	b.Run("everything", func(b *testing.B) { concurrent(b, everythingTarget(b)) })
}

func concurrent(b *testing.B, tg target) {
	ps := startPaths(b, tg)
	const workers, round = 8, 96
	burst := func(c *client.Client, n int) time.Duration {
		var wg sync.WaitGroup
		start := time.Now()
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := w; i < n; i += workers {
					readOnce(b, c, tg)
				}
			}()
		}
		wg.Wait()
		return time.Since(start)
	}
	var d, r, p, peer time.Duration
	b.ResetTimer()
	for done := 0; done < b.N; done += round {
		n := min(round, b.N-done)
		d += burst(ps.direct.c, n)
		r += burst(ps.relay.c, n)
		p += burst(ps.proxy.c, n)
		if ps.peer != nil {
			peer += burst(ps.peer.c, n)
		}
	}
	b.StopTimer()
	if ps.peer != nil {
		b.ReportMetric(d.Seconds()/peer.Seconds(), "peer/direct-throughput")
		b.ReportMetric(peer.Seconds()/p.Seconds(), "proxy/peer-throughput")
	}
	b.ReportMetric(float64(b.N)/d.Seconds(), "direct-calls/s")
	b.ReportMetric(float64(b.N)/p.Seconds(), "proxy-calls/s")
	b.ReportMetric(d.Seconds()/p.Seconds(), "proxy/direct-throughput")
	b.ReportMetric(d.Seconds()/r.Seconds(), "relay/direct-throughput")
}

// benchProxyEnv is extra environment for the proxy process, for
// experiments without a rebuild: BENCH_PROXY_ENV="GOMAXPROCS=1 GOGC=400".
var benchProxyEnv = strings.Fields(os.Getenv("BENCH_PROXY_ENV"))

// BenchmarkWriteThroughProxy: a create_order made directly against one made
// through the proxy (a child process, journaling it: intent with a full
// fsync before the send, outcome after), interleaved, each on its own demo
// server; beside them, in this process, the journal's own cost for one
// write (RecordIntent + RecordOutcome on a file in the same folder). The
// issue's goal: the proxy's added latency at most the journal's cost plus
// 100 µs, i.e. added-minus-journal-p50-µs ≤ 100.
//
//	go test -run '^$' -bench WriteThroughProxy -benchtime 300x -count 5 ./proxy/
func BenchmarkWriteThroughProxy(b *testing.B) {
	dir := b.TempDir()
	tg := target{bin, []string{"demo-server", "--db", filepath.Join(dir, "demo-direct.db")}, "create_order", nil}
	direct, _ := stdioClient(b, "", nil, tg.command, tg.args...)
	viaProxy, _ := stdioClient(b, "", benchProxyEnv, bin, "proxy", "--db", filepath.Join(dir, "journal.db"),
		"--", bin, "demo-server", "--db", filepath.Join(dir, "demo-proxy.db"))
	j, err := pending.Open(context.Background(), filepath.Join(dir, "own.db"), pending.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer j.Close()

	seq := 0
	write := func(c *client.Client) time.Duration {
		seq++
		// A key of its own each time: each write is a new order (or, once
		// the budget is spent, the same refusal on both paths).
		req := mcp.CallToolRequest{}
		req.Params.Name = "create_order"
		req.Params.Arguments = map[string]any{"item": "widget", "quantity": 1, "buyer": "alice",
			"idempotency_key": fmt.Sprintf("bench-%d-%d", os.Getpid(), seq)}
		start := time.Now()
		r, err := c.CallTool(context.Background(), req)
		d := time.Since(start)
		if err != nil {
			b.Fatalf("create_order: %v", err)
		}
		if sc, ok := r.StructuredContent.(map[string]any); ok && sc["mcp-confirm"] != nil {
			b.Fatalf("the proxy answered %v, not the server", sc)
		}
		return d
	}
	journalOnce := func() time.Duration {
		seq++
		args := fmt.Sprintf(`{"item":"widget","quantity":1,"buyer":"alice","n":%d}`, seq)
		sum := sha256.Sum256([]byte(args))
		start := time.Now()
		c, err := j.RecordIntent(context.Background(), pending.Intent{Server: "bench", Tool: "create_order",
			Kind: pending.KindWrite, KindSource: pending.KindFromAnnotation, Key: fmt.Sprintf("own-%d", seq),
			Args: json.RawMessage(args), Fingerprint: hex.EncodeToString(sum[:]), Session: 1})
		if err != nil {
			b.Fatal(err)
		}
		if err := j.RecordOutcome(context.Background(), c.ID, 1, pending.Outcome{Event: pending.EventSucceeded,
			Result: json.RawMessage(`{"content":[]}`)}); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	for range 10 { // warm both paths and the journal
		write(direct)
		write(viaProxy)
		journalOnce()
	}
	dl := make([]time.Duration, 0, b.N)
	pl := make([]time.Duration, 0, b.N)
	jl := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		dl = append(dl, write(direct))
		pl = append(pl, write(viaProxy))
		jl = append(jl, journalOnce())
	}
	b.StopTimer()
	added := percentile(pl, 0.5) - percentile(dl, 0.5)
	b.ReportMetric(micros(percentile(dl, 0.5)), "direct-p50-µs")
	b.ReportMetric(micros(percentile(pl, 0.5)), "proxy-p50-µs")
	b.ReportMetric(micros(percentile(pl, 0.99)), "proxy-p99-µs")
	b.ReportMetric(micros(added), "added-p50-µs")
	b.ReportMetric(micros(percentile(jl, 0.5)), "journal-p50-µs")
	b.ReportMetric(micros(added-percentile(jl, 0.5)), "added-minus-journal-p50-µs")
}
