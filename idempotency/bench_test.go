package idempotency

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/prometheus/client_golang/prometheus"
)

// The benchmarks compare a bare handler with the same handler behind the
// middleware on a SQLite file: a first arrival (claim + finish, two write
// transactions) and a replay (one claim transaction that finds the record).

func benchHandler(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	return mcp.NewToolResultStructured(map[string]any{"order_id": 1, "item": req.GetString("item", "")}, "ordered"), nil
}

func BenchmarkBareHandler(b *testing.B) {
	ctx := context.Background()
	req := request("", map[string]any{"item": "widget", "quantity": 2, "buyer": "alice"})
	for b.Loop() {
		if _, err := benchHandler(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkWrappedFirstArrival(b *testing.B) {
	f := newFixture(b, Options{})
	h := f.mw.Wrap(benchHandler)
	ctx := context.Background()
	args := map[string]any{"item": "widget", "quantity": 2, "buyer": "alice"}
	i := 0
	for b.Loop() {
		i++
		res, _ := h(ctx, request(fmt.Sprintf("bench-key-%d", i), args))
		if res.IsError {
			b.Fatal(res.Content)
		}
	}
}

func BenchmarkWrappedReplay(b *testing.B) {
	f := newFixture(b, Options{})
	h := f.mw.Wrap(benchHandler)
	ctx := context.Background()
	req := request("bench-replay", map[string]any{"item": "widget", "quantity": 2, "buyer": "alice"})
	h(ctx, req)
	for b.Loop() {
		if res, _ := h(ctx, req); res.IsError {
			b.Fatal(res.Content)
		}
	}
}

// BenchmarkWrite is the per-write cost, in one run, of the bare handler and
// of the same handler behind the middleware without and with the dedupe
// window, on a SQLite file. Every case builds its request in the loop (the
// same work for each), so the differences are the middleware's. A first
// arrival is a claim and a finish (two write transactions); a repeat is one
// claim that finds the record. Compare with benchstat, or divide the means.
func BenchmarkWrite(b *testing.B) {
	order := func(i int) map[string]any { return map[string]any{"item": "widget", "quantity": i, "buyer": "alice"} }
	none := func() []Option { return nil }
	window := func() []Option { return []Option{WithDedupeWindow(time.Minute, ScopeNone)} }
	cases := []struct {
		name    string
		with    func() []Option // made per run: a registry takes one middleware's metrics
		wrap    bool
		request func(i int) mcp.CallToolRequest
	}{
		{"bare", none, false, func(i int) mcp.CallToolRequest { return request("", order(i)) }},
		{"nowindow/keyless", none, true, func(i int) mcp.CallToolRequest { return request("", order(i)) }},
		{"nowindow/keyed-first", none, true, func(i int) mcp.CallToolRequest { return request(fmt.Sprintf("bench-key-%d", i), order(i)) }},
		{"window/keyed-first", window, true,
			func(i int) mcp.CallToolRequest { return request(fmt.Sprintf("bench-key-%d", i), order(i)) }},
		{"window/keyless-first", window, true,
			func(i int) mcp.CallToolRequest { return request("", order(i)) }},
		{"window/keyless-repeat", window, true,
			func(int) mcp.CallToolRequest { return request("", order(1)) }},
		{"window+log+metrics/keyless-first", func() []Option {
			return append(window(), WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))), WithMetrics(prometheus.NewRegistry()))
		}, true,
			func(i int) mcp.CallToolRequest { return request("", order(i)) }},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			h := benchHandler
			if c.wrap {
				f := newFixture(b, Options{})
				mw, err := New(f.mw.opts, c.with()...)
				if err != nil {
					b.Fatal(err)
				}
				h = mw.Wrap(benchHandler)
			}
			ctx := context.Background()
			i := 0
			for b.Loop() {
				i++
				res, err := h(ctx, c.request(i))
				if err != nil || res.IsError {
					b.Fatal(err, res.Content)
				}
			}
		})
	}
}
