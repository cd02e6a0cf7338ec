package mcpclient_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-confirm/mcp-confirm/mcpclient"
)

func TestModernServer(t *testing.T) {
	noLeak(t)
	var sessions []int
	opts := testOptions()
	opts.OnSession = func(n int) { sessions = append(sessions, n) }
	c := mcpclient.New(fixture("-name", "orders-fixture"), opts)
	if got := c.State(); got != mcpclient.StateNew {
		t.Errorf("state before start = %s", got)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	info := c.ServerInfo()
	if info.Name != "orders-fixture" || info.Version != "1.2.3" || info.Protocol != mcp.LATEST_PROTOCOL_VERSION {
		t.Errorf("server info = %+v, want orders-fixture 1.2.3 on %s", info, mcp.LATEST_PROTOCOL_VERSION)
	}
	if c.State() != mcpclient.StateRunning || c.Session() != 1 || len(sessions) != 1 {
		t.Errorf("state %s session %d callbacks %v", c.State(), c.Session(), sessions)
	}

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
		t.Errorf("echo tool missing or not read-only: %+v", echo)
	}
	if _, ok := echo.InputSchema.Properties["idempotency_key"]; !ok {
		t.Errorf("echo input schema lacks idempotency_key: %+v", echo.InputSchema)
	}
	if h := byName["hang"].Annotations.ReadOnlyHint; h == nil || *h {
		t.Errorf("hang should declare readOnlyHint false")
	}

	args := map[string]any{"text": "hi"}
	var sent []string
	out := call(t, c, "echo", args, mcpclient.CallOptions{
		Key: "key-0001-abcdef", KeyArg: "idempotency_key",
		OnSent: func(session int, id string) { sent = append(sent, id) },
	})
	if out.Kind != mcpclient.DeliveryResult || out.Err != nil {
		t.Fatalf("outcome = %+v", out)
	}
	if len(args) != 1 {
		t.Errorf("caller's args were modified: %v", args)
	}
	var sc struct {
		Args     map[string]any `json:"args"`
		MetaKey  string         `json:"meta_key"`
		HasToken bool           `json:"has_token"`
	}
	b, _ := json.Marshal(toolResult(t, out.ResultJSON).StructuredContent)
	if err := json.Unmarshal(b, &sc); err != nil {
		t.Fatal(err)
	}
	if sc.MetaKey != "key-0001-abcdef" || sc.Args["idempotency_key"] != "key-0001-abcdef" || sc.Args["text"] != "hi" || !sc.HasToken {
		t.Errorf("server saw %+v", sc)
	}
	if out.Session != 1 || out.RPCID == "" || len(sent) != 1 || sent[0] != out.RPCID {
		t.Errorf("session %d rpc id %q, OnSent %v", out.Session, out.RPCID, sent)
	}
	if out.SentAt.IsZero() || out.EndedAt.Before(out.SentAt) {
		t.Errorf("times: sent %v ended %v", out.SentAt, out.EndedAt)
	}
	if !strings.Contains(string(out.ResultJSON), `"structuredContent"`) || !json.Valid(out.ResultJSON) {
		t.Errorf("result JSON = %s", out.ResultJSON)
	}

	// A tool-level failure is still an answer.
	out = call(t, c, "tool_error", nil, mcpclient.CallOptions{})
	if out.Kind != mcpclient.DeliveryResult || !toolResult(t, out.ResultJSON).IsError {
		t.Errorf("tool_error outcome = %+v", out)
	}
	// KeyArg without a key is refused before anything is sent.
	out = call(t, c, "echo", nil, mcpclient.CallOptions{KeyArg: "idempotency_key"})
	if out.Kind != mcpclient.DeliveryNotSent {
		t.Errorf("KeyArg without Key: %+v", out)
	}
}

func TestRPCErrorIsDefinite(t *testing.T) {
	noLeak(t)
	c := started(t, fixture(), testOptions())
	out := call(t, c, "fail", nil, mcpclient.CallOptions{Key: "k-fail-0000000001"})
	if out.Kind != mcpclient.DeliveryRPCError || out.RPCError == nil {
		t.Fatalf("outcome = %+v", out)
	}
	if out.RPCError.Code != mcp.INTERNAL_ERROR || !strings.Contains(out.RPCError.Message, "out of stock") {
		t.Errorf("rpc error = %+v", out.RPCError)
	}
	out = call(t, c, "no_such_tool", nil, mcpclient.CallOptions{})
	if out.Kind != mcpclient.DeliveryRPCError || out.RPCError == nil {
		t.Fatalf("unknown tool outcome = %+v", out)
	}
}

// The idle clock fires on a server that never answers: the outcome is
// unknown, notifications/cancelled reaches the server (its handler sees the
// cancel), and mcp-go's -32603 answer to the cancelled request comes back as
// late evidence, not as a failure.
func TestIdleTimeoutCancelsAndStaysUnknown(t *testing.T) {
	noLeak(t)
	c, late := startedWithLate(t, fixture())

	out := call(t, c, "hang", nil, mcpclient.CallOptions{Key: "k-hang-0000000001", IdleTimeout: 300 * time.Millisecond})
	if out.Kind != mcpclient.DeliveryUnknown || out.Reason != mcpclient.ReasonIdleTimeout {
		t.Fatalf("outcome = %+v", out)
	}
	if !errors.Is(out.Err, mcpclient.ErrIdleTimeout) || out.RPCID == "" {
		t.Errorf("err %v, rpc id %q", out.Err, out.RPCID)
	}
	waitFor(t, "the server to see the cancel", func() bool {
		return lastLineContaining(c.Stderr(), "hang k-hang-0000000001 cancelled")
	})
	lr := late.wait(t, "k-hang-0000000001")
	if lr.RPCError == nil || !lr.AfterCancel || lr.RPCID != out.RPCID || lr.Session != 1 || lr.Tool != "hang" {
		t.Errorf("late = %+v", lr)
	}
	// The session survives a timeout.
	if out := call(t, c, "echo", nil, mcpclient.CallOptions{}); out.Kind != mcpclient.DeliveryResult || out.Session != 1 {
		t.Errorf("echo after timeout: %+v", out)
	}
}

func lastLineContaining(lines []string, s string) bool {
	for _, l := range lines {
		if strings.Contains(l, s) {
			return true
		}
	}
	return false
}

// Progress resets the idle clock; nothing resets the absolute one.
func TestProgressAndTwoClocks(t *testing.T) {
	noLeak(t)
	c := started(t, fixture(), testOptions())

	var mu sync.Mutex
	var got []mcpclient.Progress
	var sent []string
	out := call(t, c, "progress", map[string]any{"steps": 6, "interval_ms": 150}, mcpclient.CallOptions{
		IdleTimeout: 600 * time.Millisecond, // shorter than the whole call (~900 ms), longer than one step
		OnProgress: func(p mcpclient.Progress) {
			mu.Lock()
			got = append(got, p)
			mu.Unlock()
		},
		// With OnProgress, OnSent goes through the same goroutine: once,
		// before Call returns.
		OnSent: func(_ int, id string) {
			mu.Lock()
			sent = append(sent, id)
			mu.Unlock()
		},
	})
	if out.Kind != mcpclient.DeliveryResult {
		t.Fatalf("outcome = %+v", out)
	}
	mu.Lock()
	if len(got) == 0 || got[len(got)-1].Total != 6 || got[0].Message == "" {
		t.Errorf("progress = %+v", got)
	}
	if len(sent) != 1 || sent[0] != out.RPCID {
		t.Errorf("OnSent saw %v, want the request's id %q once", sent, out.RPCID)
	}
	mu.Unlock()

	out = call(t, c, "progress", map[string]any{"steps": 40, "interval_ms": 50}, mcpclient.CallOptions{
		Key: "k-prog-0000000001", IdleTimeout: 5 * time.Second, MaxTotal: 400 * time.Millisecond,
	})
	if out.Kind != mcpclient.DeliveryUnknown || out.Reason != mcpclient.ReasonAbsoluteTimeout || !errors.Is(out.Err, mcpclient.ErrAbsoluteTimeout) {
		t.Fatalf("outcome = %+v", out)
	}
	waitFor(t, "the server to see the cancel", func() bool {
		return lastLineContaining(c.Stderr(), "progress k-prog-0000000001 cancelled")
	})
}

// A slow OnProgress must not stall other calls on the same session: the read
// loop hands progress off and coalesces it.
func TestSlowProgressHandlerDoesNotStallSession(t *testing.T) {
	noLeak(t)
	c := started(t, fixture(), testOptions())
	release := make(chan struct{})
	done := make(chan mcpclient.Delivery, 1)
	go func() {
		done <- c.Call(context.Background(), "progress", map[string]any{"steps": 20, "interval_ms": 10}, mcpclient.CallOptions{
			OnProgress: func(mcpclient.Progress) { <-release },
		})
	}()
	for i := 0; i < 5; i++ {
		if out := call(t, c, "echo", nil, mcpclient.CallOptions{}); out.Kind != mcpclient.DeliveryResult {
			t.Fatalf("echo while a progress handler is stuck: %+v", out)
		}
	}
	close(release)
	select {
	case out := <-done:
		if out.Kind != mcpclient.DeliveryResult {
			t.Errorf("progress call: %+v", out)
		}
	case <-time.After(hangGuard):
		t.Fatal("progress call hung")
	}
}

// The server commits and answers after the client gave up: the answer is
// delivered to OnLateResult with the call's key and wire id.
func TestLateResultDelivered(t *testing.T) {
	noLeak(t)
	c, late := startedWithLate(t, fixture())

	out := call(t, c, "late", map[string]any{"delay_ms": 700}, mcpclient.CallOptions{Key: "k-late-0000000001", IdleTimeout: 200 * time.Millisecond})
	if out.Kind != mcpclient.DeliveryUnknown || out.Reason != mcpclient.ReasonIdleTimeout {
		t.Fatalf("outcome = %+v", out)
	}
	lr := late.wait(t, "k-late-0000000001")
	if lr.ResultJSON == nil || lr.RPCError != nil || lr.RPCID != out.RPCID || lr.Session != out.Session {
		t.Fatalf("late = %+v", lr)
	}
	if !lr.AfterCancel {
		t.Errorf("late result should be marked as arriving after our cancel")
	}
	if !strings.Contains(string(lr.ResultJSON), `"committed":"k-late-0000000001"`) {
		t.Errorf("late result JSON = %s", lr.ResultJSON)
	}
}

func TestCallerCancel(t *testing.T) {
	noLeak(t)
	c := started(t, fixture(), testOptions())
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	out := c.Call(ctx, "hang", nil, mcpclient.CallOptions{Key: "k-cancel-00000001"})
	if out.Kind != mcpclient.DeliveryUnknown || out.Reason != mcpclient.ReasonCancelled {
		t.Fatalf("outcome = %+v", out)
	}
	waitFor(t, "the server to see the cancel", func() bool {
		return lastLineContaining(c.Stderr(), "hang k-cancel-00000001 cancelled")
	})

	// A context that ended before the call: provably nothing written.
	out = c.Call(ctx, "echo", nil, mcpclient.CallOptions{})
	if out.Kind != mcpclient.DeliveryNotSent || !out.SentAt.IsZero() || out.RPCID != "" {
		t.Fatalf("pre-cancelled outcome = %+v", out)
	}
}

// The server dies mid-call: every call waiting on that session ends at once
// as connection lost, the error says how it died, and the next call starts
// session 2.
func TestServerDiesMidCall(t *testing.T) {
	noLeak(t)
	var mu sync.Mutex
	var sessions []int
	opts := testOptions()
	opts.OnSession = func(n int) { mu.Lock(); sessions = append(sessions, n); mu.Unlock() }
	c := started(t, fixture(), opts)

	const waiting = 3
	outs := make(chan mcpclient.Delivery, waiting)
	for i := 0; i < waiting; i++ {
		go func() { outs <- c.Call(context.Background(), "hang", nil, mcpclient.CallOptions{}) }()
	}
	waitFor(t, "the hanging calls to be sent", func() bool { return true })
	time.Sleep(100 * time.Millisecond)
	out := call(t, c, "die", map[string]any{"delay_ms": 50}, mcpclient.CallOptions{Key: "k-die-00000000001"})
	if out.Kind != mcpclient.DeliveryUnknown || out.Reason != mcpclient.ReasonConnectionLost {
		t.Fatalf("outcome = %+v", out)
	}
	if !errors.Is(out.Err, mcpclient.ErrConnectionLost) || !strings.Contains(out.Err.Error(), "exit status 7") ||
		!strings.Contains(out.Err.Error(), "dying mid-call") {
		t.Errorf("err = %v", out.Err)
	}
	for i := 0; i < waiting; i++ {
		select {
		case o := <-outs:
			// A hang call not yet written when the pipe closed is NotSent
			// and resent on session 2, where it hangs: so only unknowns here.
			if o.Kind != mcpclient.DeliveryUnknown || o.Reason != mcpclient.ReasonConnectionLost {
				t.Errorf("waiting call: %+v", o)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("a call waiting on the dead session did not end")
		}
	}
	waitFor(t, "state exited", func() bool { return c.State() == mcpclient.StateExited })

	out = call(t, c, "echo", nil, mcpclient.CallOptions{})
	if out.Kind != mcpclient.DeliveryResult || out.Session != 2 || c.Session() != 2 || c.State() != mcpclient.StateRunning {
		t.Fatalf("after restart: %+v (session %d, state %s)", out, c.Session(), c.State())
	}
	mu.Lock()
	defer mu.Unlock()
	if len(sessions) != 2 || sessions[0] != 1 || sessions[1] != 2 {
		t.Errorf("OnSession calls = %v", sessions)
	}
}

func TestCloseEndsRunningCalls(t *testing.T) {
	noLeak(t)
	c := mcpclient.New(fixture(), testOptions())
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	done := make(chan mcpclient.Delivery, 1)
	sent := make(chan struct{})
	go func() {
		done <- c.Call(context.Background(), "hang", nil, mcpclient.CallOptions{OnSent: func(int, string) { close(sent) }})
	}()
	<-sent
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	out := <-done
	if out.Kind != mcpclient.DeliveryUnknown || out.Reason != mcpclient.ReasonConnectionLost {
		t.Errorf("running call after Close: %+v", out)
	}
	if c.State() != mcpclient.StateClosed {
		t.Errorf("state = %s", c.State())
	}
	out = c.Call(context.Background(), "echo", nil, mcpclient.CallOptions{})
	if out.Kind != mcpclient.DeliveryNotSent || !errors.Is(out.Err, mcpclient.ErrClosed) {
		t.Errorf("call after Close: %+v", out)
	}
	if err := c.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestEnvAndDir(t *testing.T) {
	noLeak(t)
	dir := t.TempDir()
	spec := fixture()
	spec.Env = []string{"MCPC_FIXTURE_VAR=from-spec"}
	spec.Dir = dir
	c := started(t, spec, testOptions())
	out := call(t, c, "env", map[string]any{"name": "MCPC_FIXTURE_VAR"}, mcpclient.CallOptions{})
	if out.Kind != mcpclient.DeliveryResult {
		t.Fatalf("outcome = %+v", out)
	}
	b, _ := json.Marshal(toolResult(t, out.ResultJSON).StructuredContent)
	var got struct{ Value, Cwd string }
	_ = json.Unmarshal(b, &got)
	if got.Value != "from-spec" || got.Cwd != dir {
		t.Errorf("server saw %+v, want from-spec in %s", got, dir)
	}
}

// The server closes stdout but keeps running: the session is lost just the
// same (the running call ends at once), the process is stopped and reaped,
// and the next call starts session 2.
func TestBrokenStdoutPipe(t *testing.T) {
	noLeak(t)
	opts := testOptions()
	opts.StopGrace = 300 * time.Millisecond
	c := started(t, fixture(), opts)
	out := call(t, c, "close_stdout", nil, mcpclient.CallOptions{Key: "k-pipe-0000000001"})
	if out.Kind != mcpclient.DeliveryUnknown || out.Reason != mcpclient.ReasonConnectionLost {
		t.Fatalf("outcome = %+v", out)
	}
	if !strings.Contains(out.Err.Error(), "closed its stdout") {
		t.Errorf("err = %v", out.Err)
	}
	out = call(t, c, "echo", nil, mcpclient.CallOptions{})
	if out.Kind != mcpclient.DeliveryResult || out.Session != 2 {
		t.Fatalf("after the broken pipe: %+v", out)
	}
}
