package proxy_test

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/mcp-confirm/mcp-confirm/internal/testbin"
	"github.com/mcp-confirm/mcp-confirm/pending"
)

// The TypeScript SDK host on stdio, the proxy in front of a remote server
// (proxy --url): the server commits the first create_order and its
// connection is cut before the answer. The host hears unknown, in words;
// its resend is held, not sent; a read passes through and finds exactly
// one order; the journal has one call, unknown, one attempt, its server
// the URL.
func TestTSHostThroughProxyToRemoteServer(t *testing.T) {
	dir := t.TempDir()
	journal := filepath.Join(dir, "journal.db")
	url := testbin.HTTPDemo(t, bin, filepath.Join(dir, "demo.db"), "--cut-after-commit", "1")
	orderArgs := map[string]any{"item": "widget", "quantity": 2, "buyer": "alice"}
	run := tsHost(t, bin, proxyArgs(journal, "--url", url),
		step{"op": "listTools"},
		step{"op": "call", "name": "create_order", "arguments": orderArgs},
		step{"op": "call", "name": "create_order", "arguments": orderArgs},
		step{"op": "call", "name": "find_orders", "arguments": map[string]any{"buyer": "alice"}},
	)
	tools := toolsByName(t, run, 0)
	if _, ok := tools["create_order"]; !ok {
		t.Fatalf("the remote server's tools were not listed to the host: %v", tools)
	}
	var unknown, held, found toolResult
	run.ok(t, 1, &unknown)
	run.ok(t, 2, &held)
	run.ok(t, 3, &found)
	sc := unknown.StructuredContent
	if !unknown.IsError || sc["mcp-confirm"] != "unknown" || sc["key"] == nil {
		t.Fatalf("want the unknown answer, got %+v\nstderr:\n%s", unknown, run.stderr)
	}
	if !held.IsError || held.StructuredContent["mcp-confirm"] != "held" {
		t.Fatalf("want the held answer, got %+v", held)
	}
	orders, _ := found.StructuredContent["orders"].([]any)
	if len(orders) != 1 || orders[0].(map[string]any)["idempotency_key"] != sc["key"] {
		t.Fatalf("want exactly one order, under key %v: %+v", sc["key"], found.StructuredContent)
	}
	j := openJournal(t, journal)
	cs := calls(t, j)
	if len(cs) != 1 {
		t.Fatalf("journal has %d calls, want 1", len(cs))
	}
	c := getCall(t, j, cs[0].ID)
	if c.State != pending.StateUnknown || len(c.Attempts) != 1 || c.Key != sc["key"] {
		t.Fatalf("journal: %s, %d attempts, key %s; want unknown, 1 attempt, key %v", c.State, len(c.Attempts), c.Key, sc["key"])
	}
	if !bytes.Contains(c.ServerIdentity, []byte(url)) {
		t.Errorf("the call's server identity %s does not name %s", c.ServerIdentity, url)
	}
}
