package proxy_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-confirm/mcp-confirm/internal/npmfixture"
	"github.com/mcp-confirm/mcp-confirm/mcpclient"
	"github.com/mcp-confirm/mcp-confirm/pending"
	"github.com/mcp-confirm/mcp-confirm/proxy"
)

var order = map[string]any{"item": "widget", "quantity": 2, "buyer": "alice"}

// The lost response, with an mcp-go host (2026-07-28 era upstream): the
// write that times out is answered unknown, in words; the identical resend
// is held and not sent; the server has exactly one order.
func TestLostResponseIsUnknownAndResendIsHeld(t *testing.T) {
	h := startProxy(t, demoSpec(t, "--hang-after-commit", "1"), func(o *proxy.Options) { o.Timeout = time.Second })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	r, err := h.call(ctx, "create_order", order)
	if err != nil {
		t.Fatalf("create_order: a host must get an answer it can read, not an error: %v", err)
	}
	st := status(t, r)
	if !r.IsError || st["mcp-confirm"] != "unknown" || st["key"] == "" || st["call_id"] == nil {
		t.Fatalf("want the unknown answer, got isError=%v structured=%v text=%q", r.IsError, st, text(r))
	}
	for _, want := range []string{"UNKNOWN", "Do NOT retry", "mcp-confirm", st["key"].(string)} {
		if !strings.Contains(text(r), want) {
			t.Errorf("unknown answer's text lacks %q: %q", want, text(r))
		}
	}
	id := int64(st["call_id"].(float64))

	r2, err := h.call(ctx, "create_order", order)
	if err != nil {
		t.Fatal(err)
	}
	st2 := status(t, r2)
	if !r2.IsError || st2["mcp-confirm"] != "held" || int64(st2["call_id"].(float64)) != id {
		t.Fatalf("want the held answer naming call %d, got %v %q", id, st2, text(r2))
	}

	c := getCall(t, h.journal, id)
	if c.State != pending.StateUnknown || len(c.Attempts) != 1 || c.Key != st["key"] || c.Reason != "idle timeout" {
		t.Fatalf("journal: state %s reason %q attempts %d key %q; want unknown, idle timeout, 1 attempt, key %v",
			c.State, c.Reason, len(c.Attempts), c.Key, st["key"])
	}
	if n := len(calls(t, h.journal)); n != 1 {
		t.Fatalf("journal has %d calls, want 1 (the held resend is not a call)", n)
	}

	r3, err := h.call(ctx, "find_orders", map[string]any{"buyer": "alice"})
	if err != nil || r3.IsError {
		t.Fatalf("find_orders: %v %q", err, text(r3))
	}
	orders, _ := status(t, r3)["orders"].([]any)
	if len(orders) != 1 {
		t.Fatalf("the server has %d orders, want exactly 1: %v", len(orders), status(t, r3))
	}
	if k := orders[0].(map[string]any)["idempotency_key"]; k != st["key"] {
		t.Errorf("the order carries key %v, want the journal's %v", k, st["key"])
	}
}

// pidSpec runs the demo server under a shell that writes its pid (exec
// keeps the pid) to a file each time it starts.
func pidSpec(t *testing.T, pidFile string, args ...string) mcpclient.ServerSpec {
	t.Helper()
	spec := demoSpec(t, args...)
	script := `echo $$ > "$0"; exec "$@"`
	return mcpclient.ServerSpec{Command: "/bin/sh", Args: append([]string{"-c", script, pidFile, spec.Command}, spec.Args...)}
}

func readPid(t *testing.T, f string) int {
	t.Helper()
	b, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("pid file %s: %v", f, err)
	}
	return pid
}

// waitProgress waits for the first progress notification the host gets for
// its token: the server's progress, forwarded under the host's own token.
func (h *host) waitProgress(t *testing.T, token string) mcp.JSONRPCNotification {
	t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		select {
		case n := <-h.notes:
			if n.Method == string(mcp.MethodNotificationProgress) && n.Params.AdditionalFields["progressToken"] == token {
				return n
			}
		case <-deadline:
			t.Fatalf("no progress for token %s", token)
		}
	}
}

// The downstream server dies mid-call: the host gets the unknown answer;
// the next call starts a new server process and works; stderr says so.
func TestDownstreamKilledMidCall(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "server.pid")
	h := startProxy(t, pidSpec(t, pidFile, "--delay", "60s"), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	first := readPid(t, pidFile)

	type answer struct {
		r   *mcp.CallToolResult
		err error
	}
	got := make(chan answer, 1)
	go func() {
		r, err := h.call(ctx, "create_order", order)
		got <- answer{r, err}
	}()
	n := h.waitProgress(t, "host-token-create_order")
	if _, ok := n.Params.AdditionalFields["progress"]; !ok {
		t.Errorf("forwarded progress lacks progress: %v", n.Params.AdditionalFields)
	}
	if err := syscall.Kill(first, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	a := <-got
	if a.err != nil {
		t.Fatalf("create_order: %v", a.err)
	}
	st := status(t, a.r)
	if !a.r.IsError || st["mcp-confirm"] != "unknown" {
		t.Fatalf("want the unknown answer, got %v %q", st, text(a.r))
	}
	if !strings.Contains(text(a.r), "connection to the server was lost") {
		t.Errorf("the answer should say the connection was lost: %q", text(a.r))
	}
	c := getCall(t, h.journal, int64(st["call_id"].(float64)))
	if c.State != pending.StateUnknown || c.Reason != "connection lost" {
		t.Fatalf("journal: %s %q, want unknown, connection lost", c.State, c.Reason)
	}

	r, err := h.call(ctx, "get_budget", map[string]any{"buyer": "alice"})
	if err != nil || r.IsError {
		t.Fatalf("the call after the death must work on a new session: %v %q", err, text(r))
	}
	if second := readPid(t, pidFile); second == first {
		t.Fatalf("the server was not restarted (pid %d both times)", first)
	}
	for _, want := range []string{"went away during a call", "restarted the MCP server"} {
		if !strings.Contains(h.logs.String(), want) {
			t.Errorf("the log does not say %q", want)
		}
	}

	// A death between calls is said too.
	if err := syscall.Kill(readPid(t, pidFile), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the log to say the server exited", func() bool {
		return strings.Contains(h.logs.String(), "the MCP server exited")
	})
}

// The host cancels a write (notifications/cancelled): the cancel is
// forwarded, and the call is journaled unknown unless a result arrives.
// The demo server answers a cancelled create_order with an isError result
// ("context canceled"); a tool error that answers our own cancel says how
// the handler stopped, not whether the work took effect, so it is kept as
// evidence (a late_result event) and the call stays unknown. The answer
// comes within the server's 60 s of work only because the cancel reached it.
func TestHostCancelIsForwarded(t *testing.T) {
	h := startProxy(t, demoSpec(t, "--delay", "60s"), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	callCtx, cancelCall := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() {
		_, err := h.call(callCtx, "create_order", order)
		errc <- err
	}()
	h.waitProgress(t, "host-token-create_order")
	cancelCall() // mcp-go sends notifications/cancelled upstream
	if err := <-errc; err == nil {
		t.Fatal("the cancelled call returned no error to the host")
	}
	waitFor(t, "the server's answer to the forwarded cancel, kept as evidence", func() bool {
		st, err := h.journal.Stats(ctx)
		return err == nil && st.CancelAnswers == 1 && st.LateResults == 0
	})
	cs := calls(t, h.journal)
	if len(cs) != 1 {
		t.Fatalf("want one journaled call, got %d", len(cs))
	}
	c := getCall(t, h.journal, cs[0].ID)
	if c.State != pending.StateUnknown || c.Reason != "cancelled" || len(c.Attempts) != 1 {
		t.Fatalf("want one unknown attempt (cancelled), got %s %q with %d attempts", c.State, c.Reason, len(c.Attempts))
	}
	// The log line follows the journal write, so it may trail it a little.
	waitFor(t, "the proxy log to record the call's end", func() bool {
		return strings.Contains(h.logs.String(), "state=unknown reason=cancelled")
	})
}

// hostRoots is a host's roots handler: one folder.
type hostRoots struct{}

func (hostRoots) ListRoots(context.Context, mcp.ListRootsRequest) (*mcp.ListRootsResult, error) {
	return &mcp.ListRootsResult{Roots: []mcp.Root{{URI: "file:///go-host/workspace", Name: "workspace"}}}, nil
}

// A host that prefers 2026-07-28 (mcp-go's client) in front of a legacy
// server (server-everything) gets the legacy protocol, as it would from the
// server itself, and so its roots capability reaches the server, which asks
// for the host's roots. Resources, prompts and completions are relayed.
func TestModernHostLegacyServerRelay(t *testing.T) {
	everything := npmfixture.Bin(t, "mcp-server-everything")
	h := startProxyFor(t, mcpclient.ServerSpec{Command: "node", Args: []string{everything}}, nil, client.WithRootsHandler(hostRoots{}))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if v := h.c.ProtocolVersion(); v != mcp.LATEST_LEGACY_PROTOCOL_VERSION {
		t.Fatalf("the host negotiated %s with the proxy, want the server's own %s", v, mcp.LATEST_LEGACY_PROTOCOL_VERSION)
	}
	roots, err := h.call(ctx, "get-roots-list", map[string]any{})
	if err != nil || roots.IsError || !strings.Contains(text(roots), "file:///go-host/workspace") {
		t.Fatalf("get-roots-list: %v %q", err, text(roots))
	}
	res, err := h.c.ListResources(ctx, mcp.ListResourcesRequest{})
	if err != nil || len(res.Resources) == 0 {
		t.Fatalf("resources/list: %v (%d resources)", err, len(res.Resources))
	}
	rreq := mcp.ReadResourceRequest{}
	rreq.Params.URI = res.Resources[0].URI
	read, err := h.c.ReadResource(ctx, rreq)
	if err != nil || len(read.Contents) == 0 {
		t.Fatalf("resources/read %s: %v", rreq.Params.URI, err)
	}
	prompts, err := h.c.ListPrompts(ctx, mcp.ListPromptsRequest{})
	if err != nil || len(prompts.Prompts) == 0 {
		t.Fatalf("prompts/list: %v", err)
	}
	preq := mcp.GetPromptRequest{}
	preq.Params.Name = "simple-prompt"
	if p, err := h.c.GetPrompt(ctx, preq); err != nil || len(p.Messages) == 0 {
		t.Fatalf("prompts/get: %v", err)
	}
	creq := mcp.CompleteRequest{}
	creq.Params.Ref = mcp.PromptReference{Type: "ref/prompt", Name: "completable-prompt"}
	creq.Params.Argument.Name, creq.Params.Argument.Value = "department", "E"
	if c, err := h.c.Complete(ctx, creq); err != nil || len(c.Completion.Values) == 0 {
		t.Fatalf("completion/complete: %v", err)
	}
	r, err := h.call(ctx, "echo", map[string]any{"message": "modern to legacy"})
	if err != nil || r.IsError || !strings.Contains(text(r), "modern to legacy") {
		t.Fatalf("echo: %v %q", err, text(r))
	}
}

// The late settle, through the proxy: the host is told UNKNOWN, the
// server's answer then arrives and settles the call; the model's identical
// resend (here with quantity 2.0 for 2) is not sent: it gets the stored
// result, marked replayed-from in _meta and said first in words.
func TestLateSettleReplaysToTheHost(t *testing.T) {
	h := startProxy(t, demoSpec(t, "--hang-after-commit", "1", "--answer-after", "1500ms"),
		func(o *proxy.Options) { o.Timeout = 500 * time.Millisecond })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	r, err := h.call(ctx, "create_order", order)
	if err != nil {
		t.Fatal(err)
	}
	st := status(t, r)
	if st["mcp-confirm"] != "unknown" {
		t.Fatalf("want the unknown answer first, got %v %q", st, text(r))
	}
	id := int64(st["call_id"].(float64))
	waitFor(t, "the late answer to settle the call", func() bool {
		c := getCall(t, h.journal, id)
		return c.State == pending.StateSucceeded && c.HoldsLate()
	})

	resend := map[string]any{"item": "widget", "quantity": 2.0, "buyer": "alice"}
	r2, err := h.call(ctx, "create_order", resend)
	if err != nil {
		t.Fatal(err)
	}
	if r2.IsError {
		t.Fatalf("the stored outcome was a success, got an error: %q", text(r2))
	}
	if from := r2.Meta.AdditionalFields[proxy.ReplayedFromField]; from != float64(id) {
		t.Errorf("_meta %s = %v, want %d", proxy.ReplayedFromField, from, id)
	}
	first := ""
	if tc, ok := r2.Content[0].(mcp.TextContent); ok {
		first = tc.Text
	}
	if !strings.Contains(first, "NOT SENT AGAIN") || !strings.Contains(first, "call "+strconv.FormatInt(id, 10)) {
		t.Errorf("the first text block should say in words that nothing was sent: %q", first)
	}
	if st2 := status(t, r2); st2["order_id"] == nil {
		t.Errorf("the stored result's structured content is kept: %v", st2)
	}
	if n := len(calls(t, h.journal)); n != 1 {
		t.Fatalf("the replayed resend became a call of its own: %d calls", n)
	}
	r3, err := h.call(ctx, "find_orders", map[string]any{"buyer": "alice"})
	if err != nil || r3.IsError {
		t.Fatalf("find_orders: %v", err)
	}
	if orders, _ := status(t, r3)["orders"].([]any); len(orders) != 1 {
		t.Fatalf("the server has %d orders, want exactly 1", len(orders))
	}
}
