package main

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/mcp-confirm/mcp-confirm/mcpclient"
)

// BenchmarkReconcile1000 (issue 21): `reconcile` of 1,000 unknown calls on
// the demo server, concurrency 8, by the built binary (process start,
// journal, server start, 1,000 queries each kept as evidence with a
// durable decision), against 1,000 bare find_orders reads at the same
// concurrency on one session of the same server (server start included),
// in the same run. It reports both times and their ratio:
//
//	go test -run '^$' -bench Reconcile1000 -benchtime 3x ./cmd/mcp-confirm/
func BenchmarkReconcile1000(b *testing.B) {
	const n, conc = 1000, 8
	dir := b.TempDir()
	w := newWorld(b, dir)
	w.bin = e2eFastBin
	calls := seedUnknown(b, seedSpec{journal: w.journal, bin: w.bin, demoDB: w.demoDB, n: n,
		found: func(i int) bool { return i%2 == 0 }, prefix: "bench"})
	policy := filepath.Join(dir, "policy.toml")
	if err := os.WriteFile(policy, []byte(reconcilePolicy), 0o600); err != nil {
		b.Fatal(err)
	}
	var recTotal, bareTotal time.Duration
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		r := w.run("reconcile", "--policy", policy, "--concurrency", "8", "--json")
		recTotal += time.Since(start)
		if r.code != 3 {
			b.Fatalf("reconcile: %s", r)
		}
		if out := parseReconcile(b, r); out.Summary.Proposals["found"] != n/2 || out.Summary.Proposals["not found"] != n/2 {
			b.Fatalf("reconcile found %v, want %d and %d", out.Summary.Proposals, n/2, n/2)
		}
		start = time.Now()
		bareReads(b, w.bin, w.demoDB, calls, conc)
		bareTotal += time.Since(start)
	}
	b.StopTimer()
	rec, bare := recTotal.Seconds()/float64(b.N), bareTotal.Seconds()/float64(b.N)
	b.ReportMetric(rec, "reconcile-s/op")
	b.ReportMetric(bare, "bare-reads-s/op")
	b.ReportMetric(rec/bare, "ratio")
	b.ReportMetric(0, "ns/op")
}

// bareReads runs one find_orders per call, conc at once, on one session of
// the demo server over demoDB: the reads reconcile makes, without the
// journal, the guard or the CLI.
func bareReads(b *testing.B, bin, demoDB string, calls []seededCall, conc int) {
	b.Helper()
	ctx := context.Background()
	c := mcpclient.New(mcpclient.ServerSpec{Command: bin, Args: []string{"demo-server", "--db", demoDB}}, mcpclient.Options{})
	defer c.Close()
	next := make(chan string)
	var wg sync.WaitGroup
	var mu sync.Mutex
	failed := 0
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for key := range next {
				d := c.Call(ctx, "find_orders", map[string]any{"idempotency_key": key}, mcpclient.CallOptions{MaxTotal: 30 * time.Second})
				if d.Kind != mcpclient.DeliveryResult {
					mu.Lock()
					failed++
					mu.Unlock()
				}
			}
		}()
	}
	for _, sc := range calls {
		next <- sc.key
	}
	close(next)
	wg.Wait()
	if failed > 0 {
		b.Fatalf("%d bare reads failed", failed)
	}
}
