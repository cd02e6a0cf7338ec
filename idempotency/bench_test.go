package idempotency

import (
	"context"
	"fmt"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
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
