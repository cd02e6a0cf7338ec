package mcpclient_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-confirm/mcp-confirm/internal/testbin"
	"github.com/mcp-confirm/mcp-confirm/mcpclient"
)

var (
	demoOnce sync.Once
	demoBin  string
	demoErr  error
)

// buildDemo builds the mcp-confirm binary once; its demo-server command is
// the project's own orders server.
func buildDemo(t *testing.T) string {
	t.Helper()
	demoOnce.Do(func() {
		demoBin = filepath.Join(filepath.Dir(fixtureBin), "mcp-confirm")
		demoErr = testbin.Build(demoBin, testbin.MCPConfirm)
	})
	if demoErr != nil {
		t.Fatalf("build mcp-confirm: %v", demoErr)
	}
	return demoBin
}

// The lost response, end to end against the demo server: the first
// create_order commits and never answers; the call ends unknown, the
// server's answer to our cancel arrives as late evidence (not a failure),
// the order is visible through the read tool, and a resend with the same key
// is replayed, so the budget is charged once.
func TestDemoServerLostResponse(t *testing.T) {
	bin := buildDemo(t)
	noLeak(t)
	db := filepath.Join(t.TempDir(), "demo.db")
	c, late := startedWithLate(t, mcpclient.ServerSpec{Command: bin, Args: []string{"demo-server", "--db", db, "--hang-after-commit", "1"}})

	info := c.ServerInfo()
	if info.Name == "" || info.Protocol != mcp.LATEST_PROTOCOL_VERSION {
		t.Errorf("server info = %+v", info)
	}
	t.Logf("demo server: %+v", info)

	tools, err := c.Tools(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ro := map[string]bool{}
	var create mcp.Tool
	for _, tl := range tools {
		ro[tl.Name] = tl.Annotations.ReadOnlyHint != nil && *tl.Annotations.ReadOnlyHint
		if tl.Name == "create_order" {
			create = tl
		}
	}
	if ro["create_order"] || !ro["find_orders"] || !ro["get_budget"] {
		t.Errorf("read-only hints: %v", ro)
	}
	if _, ok := create.InputSchema.Properties["idempotency_key"]; !ok {
		t.Errorf("create_order schema lacks idempotency_key: %+v", create.InputSchema)
	}

	const key = "01JDEMO0LOSTRESPONSE00001"
	args := map[string]any{"item": "widget", "quantity": 2, "buyer": "alice"}
	o := mcpclient.CallOptions{Key: key, KeyArg: "idempotency_key", IdleTimeout: time.Second}
	out := call(t, c, "create_order", args, o)
	if out.Kind != mcpclient.DeliveryUnknown || out.Reason != mcpclient.ReasonIdleTimeout {
		t.Fatalf("first create_order = %+v", out)
	}
	lr := late.wait(t, key)
	if lr.RPCError == nil || !lr.AfterCancel {
		t.Errorf("late answer to the cancelled request = %+v", lr)
	}

	out = call(t, c, "find_orders", map[string]any{"idempotency_key": key}, mcpclient.CallOptions{})
	var found struct {
		Orders []struct {
			IdempotencyKey string `json:"idempotency_key"`
		} `json:"orders"`
	}
	decode(t, out, &found)
	if len(found.Orders) != 1 || found.Orders[0].IdempotencyKey != key {
		t.Fatalf("find_orders = %s", out.ResultJSON)
	}

	out = call(t, c, "create_order", args, o)
	if out.Kind != mcpclient.DeliveryResult || toolResult(t, out.ResultJSON).IsError {
		t.Fatalf("resend = %+v", out)
	}
	if toolResult(t, out.ResultJSON).Meta == nil || toolResult(t, out.ResultJSON).Meta.AdditionalFields["io.github.mcp-confirm/replayed"] != true {
		t.Errorf("resend not marked replayed: %s", out.ResultJSON)
	}
	out = call(t, c, "get_budget", map[string]any{"buyer": "alice"}, mcpclient.CallOptions{})
	var budget struct {
		BudgetLeft int `json:"budget_left"`
	}
	decode(t, out, &budget)
	if budget.BudgetLeft != 1000-2*25 {
		t.Errorf("alice's budget = %d, want charged once (950)", budget.BudgetLeft)
	}
	if _, err := os.Stat(db); err != nil {
		t.Errorf("demo db: %v", err)
	}
}

func decode(t *testing.T, out mcpclient.Delivery, v any) {
	t.Helper()
	if out.Kind != mcpclient.DeliveryResult {
		t.Fatalf("outcome = %+v", out)
	}
	b, err := json.Marshal(toolResult(t, out.ResultJSON).StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
}
