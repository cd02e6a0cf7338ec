package proxy_test

import (
	"context"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-confirm/mcp-confirm/internal/npmfixture"
)

// stdioClient starts command as a child process and completes the MCP
// handshake with mcp-go's client, as a Go host would.
func stdioClient(b *testing.B, command string, args ...string) *client.Client {
	b.Helper()
	c, err := client.NewStdioMCPClient(command, nil, args...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Close() })
	init := mcp.InitializeRequest{}
	init.Params.ClientInfo = mcp.Implementation{Name: "bench-host", Version: "0"}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.Initialize(ctx, init); err != nil {
		b.Fatal(err)
	}
	return c
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

// benchPair is one host talking to the server directly and another
// talking to the mcp-confirm proxy (a child process, as deployed) in front
// of a second instance of the same server.
func benchPair(b *testing.B, tg target) (direct, proxied *client.Client) {
	direct = stdioClient(b, tg.command, tg.args...)
	proxied = stdioClient(b, bin, append([]string{"proxy", "--db", filepath.Join(b.TempDir(), "journal.db"), "--", tg.command}, tg.args...)...)
	readOnce(b, direct, tg) // warm up both paths (tool lists, caches)
	readOnce(b, proxied, tg)
	return direct, proxied
}

func percentile(ds []time.Duration, p float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[int(float64(len(s)-1)*p)]
}

func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// BenchmarkReadThroughProxy: one read at a time, directly and through the
// proxy, interleaved in the same run so both see the same machine, against
// the demo server (Go) and server-everything (node). Reported: p50/p99 of
// each path, the latency the proxy adds, and its throughput as a share of
// direct.
//
//	go test -run '^$' -bench ReadThroughProxy -benchtime 2000x ./proxy/
func BenchmarkReadThroughProxy(b *testing.B) {
	b.Run("demo", func(b *testing.B) { sequential(b, demoTarget(b)) })
	b.Run("everything", func(b *testing.B) { sequential(b, everythingTarget(b)) })
}

func sequential(b *testing.B, tg target) {
	direct, proxied := benchPair(b, tg)
	dl := make([]time.Duration, 0, b.N)
	pl := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		dl = append(dl, readOnce(b, direct, tg))
		pl = append(pl, readOnce(b, proxied, tg))
	}
	b.StopTimer()
	var dSum, pSum time.Duration
	for i := range dl {
		dSum += dl[i]
		pSum += pl[i]
	}
	b.ReportMetric(micros(percentile(dl, 0.5)), "direct-p50-µs")
	b.ReportMetric(micros(percentile(dl, 0.99)), "direct-p99-µs")
	b.ReportMetric(micros(percentile(pl, 0.5)), "proxy-p50-µs")
	b.ReportMetric(micros(percentile(pl, 0.99)), "proxy-p99-µs")
	b.ReportMetric(micros(percentile(pl, 0.5)-percentile(dl, 0.5)), "added-p50-µs")
	b.ReportMetric(micros(percentile(pl, 0.99)-percentile(dl, 0.99)), "added-p99-µs")
	b.ReportMetric(float64(dSum)/float64(pSum), "proxy/direct-throughput")
}

// BenchmarkReadThroughProxyConcurrent: 8 concurrent reads on one
// connection (as a host multiplexes), each path for the same number of
// calls, one after the other in the same run.
func BenchmarkReadThroughProxyConcurrent(b *testing.B) {
	b.Run("demo", func(b *testing.B) { concurrent(b, demoTarget(b)) })
	b.Run("everything", func(b *testing.B) { concurrent(b, everythingTarget(b)) })
}

func concurrent(b *testing.B, tg target) {
	direct, proxied := benchPair(b, tg)
	const workers = 8
	run := func(c *client.Client) time.Duration {
		var wg sync.WaitGroup
		start := time.Now()
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := w; i < b.N; i += workers {
					readOnce(b, c, tg)
				}
			}()
		}
		wg.Wait()
		return time.Since(start)
	}
	b.ResetTimer()
	d := run(direct)
	p := run(proxied)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/d.Seconds(), "direct-calls/s")
	b.ReportMetric(float64(b.N)/p.Seconds(), "proxy-calls/s")
	b.ReportMetric(d.Seconds()/p.Seconds(), "proxy/direct-throughput")
}
