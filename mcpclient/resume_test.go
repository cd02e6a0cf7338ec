package mcpclient_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcp-confirm/mcp-confirm/internal/hostilehttp"
	"github.com/mcp-confirm/mcp-confirm/mcpclient"
)

// A 2025-11-25 server that polls (SEP-1699): it runs the write, ends the
// POST's stream after an event with an id and no answer, and sends the
// answer on the GET that resumes the stream with Last-Event-ID (mcp-go's
// own reconnect). The answer is the call's, recovered by resuming, not
// resent: one execution, one POST, and never "cancelled". Also when the
// server answers server/discover with an empty result (as the conformance
// suite's sse-retry server does): it offers no 2026-07-28 version, so the
// client shakes hands the 2025 way, where streams are resumed.
func TestRemotePollingAnswerIsTheCalls(t *testing.T) {
	for _, mode := range []string{hostilehttp.Poll, hostilehttp.PollEmptyDiscover} {
		t.Run(mode, func(t *testing.T) { testPollingAnswer(t, mode) })
	}
}

func testPollingAnswer(t *testing.T, mode string) {
	srv := hostilehttp.Start(t, mode)
	r := remoteClient(t, srv.URL)
	out := createOrder(t, r)
	if p := r.ServerInfo().Protocol; p != "2025-11-25" {
		t.Errorf("protocol %q, want 2025-11-25 (the server offers no other)", p)
	}
	if out.Kind != mcpclient.DeliveryResult {
		t.Fatalf("outcome %s (reason %q, err %v), want the server's answer", out.Kind, out.Reason, out.Err)
	}
	if !strings.Contains(string(out.ResultJSON), `"order_id":1`) {
		t.Errorf("result %s, want order 1", out.ResultJSON)
	}
	if !out.Resumed {
		t.Errorf("the outcome does not say the answer came on a resumed stream")
	}
	if n := srv.Executions.Load(); n != 1 {
		t.Errorf("%d executions at the server, want 1", n)
	}
	if n := srv.Posts.Load(); n != 1 {
		t.Errorf("%d tools/call POSTs, want 1 (nothing resent)", n)
	}
	if n := srv.Resumes.Load(); n < 1 {
		t.Errorf("no GET with Last-Event-ID reached the server")
	}
}

// A server that answers one request twice, success then isError with the
// same id: the first answer is the call's, and the second reaches
// OnLateResult as a second answer (as on stdio), whether it came in the
// same write or after the client had its answer.
func TestRemoteSecondAnswerReported(t *testing.T) {
	for _, mode := range []string{hostilehttp.Twice, hostilehttp.TwiceLater} {
		t.Run(mode, func(t *testing.T) {
			srv := hostilehttp.Start(t, mode)
			var mu sync.Mutex
			var late []mcpclient.LateResult
			opts := testOptions()
			opts.OnLateResult = func(lr mcpclient.LateResult) {
				mu.Lock()
				late = append(late, lr)
				mu.Unlock()
			}
			r, err := mcpclient.NewRemote(mcpclient.ServerSpec{URL: srv.URL}, opts)
			if err != nil {
				t.Fatal(err)
			}
			var sent []string
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			out := r.Call(ctx, "create_order", map[string]any{"item": "book"}, mcpclient.CallOptions{Key: "key-twice",
				IdleTimeout: 10 * time.Second, OnSent: func(_ int, id string) { sent = append(sent, id) }})
			if out.Kind != mcpclient.DeliveryResult || strings.Contains(string(out.ResultJSON), `"isError":true`) {
				t.Fatalf("outcome %s %s (%v), want the first answer, a success", out.Kind, out.ResultJSON, out.Err)
			}
			r.Close() // delivers what it holds
			mu.Lock()
			defer mu.Unlock()
			if len(late) != 1 {
				t.Fatalf("%d late results, want 1 second answer: %+v", len(late), late)
			}
			lr := late[0]
			if !lr.Second || lr.Class != mcpclient.AnswerResult || !strings.Contains(string(lr.ResultJSON), `"isError":true`) ||
				lr.Key != "key-twice" || lr.Tool != "create_order" || lr.RPCID != out.RPCID || lr.Session != out.Session {
				t.Fatalf("second answer %+v (%s), want the isError answer to request %s of session %d", lr, lr.ResultJSON, out.RPCID, out.Session)
			}
			if len(sent) != 1 || sent[0] != out.RPCID {
				t.Errorf("OnSent got %v, want [%s]", sent, out.RPCID)
			}
			if n := srv.Executions.Load(); n != 1 {
				t.Errorf("%d executions, want 1", n)
			}
		})
	}
}
