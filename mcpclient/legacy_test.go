package mcpclient_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-confirm/mcp-confirm/internal/npmfixture"
	"github.com/mcp-confirm/mcp-confirm/mcpclient"
)

// everythingSpec is the TypeScript SDK's reference server, from the npm
// fixture.
func everythingSpec(t *testing.T) mcpclient.ServerSpec {
	return mcpclient.ServerSpec{Name: "everything", Command: "node", Args: []string{npmfixture.Bin(t, "mcp-server-everything"), "stdio"}}
}

// The TypeScript SDK's reference server speaks the legacy (2025-11-25)
// protocol: mcp-go's server/discover probe is refused and the client falls
// back to initialize. This is what most servers in the field look like.
func TestLegacyEverythingServer(t *testing.T) {
	noLeak(t)
	spec := everythingSpec(t)
	c, _ := startedWithLate(t, spec)

	info := c.ServerInfo()
	if info.Protocol != mcp.LATEST_LEGACY_PROTOCOL_VERSION || info.Name == "" {
		t.Errorf("server info = %+v, want a name and protocol %s", info, mcp.LATEST_LEGACY_PROTOCOL_VERSION)
	}
	t.Logf("server info: %+v", info)

	tools, err := c.Tools(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]mcp.Tool{}
	for _, tl := range tools {
		byName[tl.Name] = tl
	}
	echo, ok := byName["echo"]
	if !ok || echo.Annotations.ReadOnlyHint == nil || !*echo.Annotations.ReadOnlyHint {
		t.Fatalf("echo missing or without readOnlyHint: %+v", echo)
	}
	if _, ok := echo.InputSchema.Properties["message"]; !ok {
		t.Errorf("echo schema = %+v", echo.InputSchema)
	}
	if _, ok := byName["trigger-long-running-operation"]; !ok {
		t.Fatalf("no long-running tool among %d tools", len(tools))
	}

	var sent []string
	out := call(t, c, "echo", map[string]any{"message": "hello"}, mcpclient.CallOptions{
		Key: "k-ts-echo-0000001", OnSent: func(_ int, id string) { sent = append(sent, id) },
	})
	if out.Kind != mcpclient.DeliveryResult || len(toolResult(t, out.ResultJSON).Content) == 0 {
		t.Fatalf("echo outcome = %+v", out)
	}
	// The legacy layout (arguments before _meta, result before id) is read
	// by the tap's slow path.
	if out.RPCID == "" || len(sent) != 1 || sent[0] != out.RPCID || !strings.Contains(string(out.ResultJSON), "Echo: hello") {
		t.Errorf("rpc id %q, sent %v, result JSON %s", out.RPCID, sent, out.ResultJSON)
	}
	if txt, ok := toolResult(t, out.ResultJSON).Content[0].(mcp.TextContent); !ok || txt.Text != "Echo: hello" {
		t.Errorf("echo content = %+v", toolResult(t, out.ResultJSON).Content)
	}

	// Progress every second; the absolute clock ends it long before the
	// ten seconds it wants. The TS server honours the cancel and sends no
	// answer, so no late result is expected; the session stays usable.
	var progressed bool
	out = call(t, c, "trigger-long-running-operation", map[string]any{"duration": 10, "steps": 10}, mcpclient.CallOptions{
		Key: "k-ts-long-000001", IdleTimeout: 5 * time.Second, MaxTotal: 1500 * time.Millisecond,
		OnProgress: func(p mcpclient.Progress) { progressed = p.Total == 10 },
	})
	if out.Kind != mcpclient.DeliveryUnknown || out.Reason != mcpclient.ReasonAbsoluteTimeout || !errors.Is(out.Err, mcpclient.ErrAbsoluteTimeout) {
		t.Fatalf("long-running outcome = %+v", out)
	}
	if !progressed {
		t.Errorf("no progress seen before the absolute timeout")
	}
	out = call(t, c, "trigger-long-running-operation", map[string]any{"duration": 10, "steps": 2}, mcpclient.CallOptions{
		Key: "k-ts-long-000002", IdleTimeout: 500 * time.Millisecond,
	})
	if out.Kind != mcpclient.DeliveryUnknown || out.Reason != mcpclient.ReasonIdleTimeout {
		t.Fatalf("idle outcome = %+v", out)
	}
	if out := call(t, c, "get-sum", map[string]any{"a": 2, "b": 3}, mcpclient.CallOptions{}); out.Kind != mcpclient.DeliveryResult ||
		!strings.Contains(string(out.ResultJSON), "is 5") {
		t.Errorf("get-sum after timeouts: %+v", out)
	}
}
