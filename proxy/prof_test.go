package proxy_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

// BenchmarkInProcessProxyRead runs the proxy in the test process, so that
// its own code shows in a CPU profile:
//
//	go test -run '^$' -bench InProcessProxyRead -cpuprofile cpu.out ./proxy/
//	go tool pprof -top -cum -tagfocus side=proxy proxy.test cpu.out
func BenchmarkInProcessProxyRead(b *testing.B) {
	h := startProxy(b, demoSpec(b), nil)
	req := mcp.CallToolRequest{}
	req.Params.Name = "get_budget"
	req.Params.Arguments = map[string]any{"buyer": "alice"}
	for i := 0; i < b.N; i++ {
		if _, err := h.c.CallTool(context.Background(), req); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkInProcessProxyWrite is BenchmarkInProcessProxyRead for a
// create_order, a guarded write: intent, send, outcome, answer.
//
//	go test -run '^$' -bench InProcessProxyWrite -cpuprofile cpu.out ./proxy/
//	go tool pprof -top -cum -tagfocus side=proxy proxy.test cpu.out
func BenchmarkInProcessProxyWrite(b *testing.B) {
	h := startProxy(b, demoSpec(b), nil)
	req := mcp.CallToolRequest{}
	req.Params.Name = "create_order"
	for i := 0; i < b.N; i++ {
		req.Params.Arguments = map[string]any{"item": "widget", "quantity": 1, "buyer": "alice",
			"idempotency_key": fmt.Sprintf("inproc-%d-%d", os.Getpid(), i)}
		if _, err := h.c.CallTool(context.Background(), req); err != nil {
			b.Fatal(err)
		}
	}
}
