package mcpclient_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcp-confirm/mcp-confirm/mcpclient"
)

// ordersServer is a real mcp-go Streamable HTTP server on loopback with
// one write, create_order, that counts what it executed.
type ordersServer struct {
	url      string
	executed atomic.Int64
}

func newOrdersServer(t *testing.T) *ordersServer {
	t.Helper()
	o := &ordersServer{}
	s := server.NewMCPServer("orders-http", "1.0.0")
	s.AddTool(mcp.NewTool("create_order", mcp.WithString("item")),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			n := o.executed.Add(1)
			return mcp.NewToolResultText("order " + string(rune('0'+n))), nil
		})
	// slow_order works for a while, saying so (progress over SSE), then
	// places the order.
	s.AddTool(mcp.NewTool("slow_order"), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		token := req.Params.Meta.ProgressToken
		for i := 1; i <= 4; i++ {
			time.Sleep(150 * time.Millisecond)
			_ = server.ServerFromContext(ctx).SendNotificationToClient(ctx, "notifications/progress",
				map[string]any{"progressToken": token, "progress": i, "total": 4})
		}
		o.executed.Add(1)
		return mcp.NewToolResultText("slow order"), nil
	})
	s.AddTool(mcp.NewTool("fail_rpc"), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return nil, errors.New("boom")
	})
	ts := httptest.NewServer(server.NewStreamableHTTPServer(s))
	t.Cleanup(ts.Close)
	o.url = ts.URL + "/mcp"
	return o
}

// faultProxy stands between the client and the server, as a gateway or
// a flaky network does. fault decides, per tools/call, what happens.
type faultProxy struct {
	url      string
	upstream string
	legacy   bool // answer server/discover with "method not found": the client falls back to sessions
	mu       sync.Mutex
	fault    string // "", "cut" (forward, then close without answering), "502" (forward, then 502), "401", "404" (not forwarded)
	once     bool   // the fault applies to one tools/call only
	seen     []string
}

func newFaultProxy(t *testing.T, upstream string, legacy bool) *faultProxy {
	t.Helper()
	p := &faultProxy{upstream: upstream, legacy: legacy}
	ts := httptest.NewServer(p)
	t.Cleanup(ts.Close)
	p.url = ts.URL + "/mcp"
	return p
}

func (p *faultProxy) set(fault string, once bool) {
	p.mu.Lock()
	p.fault, p.once = fault, once
	p.mu.Unlock()
}

func (p *faultProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var head struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	_ = json.Unmarshal(body, &head)
	if p.legacy && head.Method == "server/discover" {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":` + string(head.ID) + `,"error":{"code":-32601,"message":"Method not found"}}`))
		return
	}
	fault := ""
	if head.Method == "tools/call" {
		p.mu.Lock()
		fault = p.fault
		if p.once {
			p.fault = ""
		}
		p.seen = append(p.seen, r.Header.Get("Mcp-Session-Id"))
		p.mu.Unlock()
	}
	switch fault {
	case "401":
		w.Header().Set("WWW-Authenticate", `Bearer realm="orders"`)
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	case "404":
		http.Error(w, "session not found", http.StatusNotFound)
		return
	}
	req, _ := http.NewRequestWithContext(r.Context(), r.Method, p.upstream, bytes.NewReader(body))
	req.Header = r.Header.Clone()
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	if fault == "" {
		// Pass it on as it comes, so progress is not held back.
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		rc := http.NewResponseController(w)
		buf := make([]byte, 4096)
		for {
			n, err := resp.Body.Read(buf)
			if n > 0 {
				_, _ = w.Write(buf[:n])
				_ = rc.Flush()
			}
			if err != nil {
				return
			}
		}
	}
	_, _ = io.ReadAll(resp.Body) // the server has run it once this returns
	switch fault {
	case "cut":
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close()
		}
		return
	case "502":
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadGateway)
		_, _ = w.Write([]byte(`{"message":"bad gateway"}`)) // parses as JSON; is no answer
	}
}

func remoteClient(t *testing.T, url string) *mcpclient.Remote {
	t.Helper()
	r, err := mcpclient.NewRemote(mcpclient.ServerSpec{URL: url}, testOptions())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func createOrder(t *testing.T, r *mcpclient.Remote) mcpclient.Delivery {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return r.Call(ctx, "create_order", map[string]any{"item": "book"},
		mcpclient.CallOptions{Key: "key-http-1", IdleTimeout: 10 * time.Second})
}

func TestRemoteWriteOutcomes(t *testing.T) {
	for _, era := range []struct {
		name   string
		legacy bool
	}{{"modern", false}, {"legacy", true}} {
		t.Run(era.name, func(t *testing.T) {
			cases := []struct {
				fault    string
				kind     mcpclient.DeliveryKind
				reason   mcpclient.UnknownReason
				executed int64
			}{
				{"", mcpclient.DeliveryResult, "", 1},
				{"cut", mcpclient.DeliveryUnknown, mcpclient.ReasonConnectionLost, 1},
				{"502", mcpclient.DeliveryUnknown, mcpclient.ReasonHTTPStatus, 1},
				{"401", mcpclient.DeliveryUnknown, mcpclient.RefusedReason(401, false), 0},
			}
			for _, tc := range cases {
				t.Run("fault="+tc.fault, func(t *testing.T) {
					srv := newOrdersServer(t)
					p := newFaultProxy(t, srv.url, era.legacy)
					r := remoteClient(t, p.url)
					if err := r.Start(context.Background()); err != nil {
						t.Fatal(err)
					}
					if modern := r.ServerInfo().Protocol == "2026-07-28"; modern == era.legacy {
						t.Fatalf("negotiated %s, want legacy=%v", r.ServerInfo().Protocol, era.legacy)
					}
					p.set(tc.fault, false)
					out := createOrder(t, r)
					if out.Kind != tc.kind || out.Reason != tc.reason {
						t.Fatalf("delivery = %s (%q), %v; want %s (%q)", out.Kind, out.Reason, out.Err, tc.kind, tc.reason)
					}
					if got := srv.executed.Load(); got != tc.executed {
						t.Errorf("server executed %d orders, want %d", got, tc.executed)
					}
					if tc.fault == "401" && !errors.Is(out.Err, mcpclient.ErrAuthorization) {
						t.Errorf("401 error = %v, want ErrAuthorization", out.Err)
					}
					if out.SessionExpired() {
						t.Errorf("session expired, want none")
					}
				})
			}
		})
	}
}

func TestRemoteRPCErrorIsFailed(t *testing.T) {
	srv := newOrdersServer(t)
	r := remoteClient(t, srv.url)
	out := r.Call(context.Background(), "fail_rpc", nil, mcpclient.CallOptions{Key: "k-rpc"})
	// mcp-go's server turns a handler error into a tool result with
	// isError: the server answered.
	if out.Kind != mcpclient.DeliveryResult && out.Kind != mcpclient.DeliveryRPCError {
		t.Fatalf("delivery = %s, %v; want the server's answer", out.Kind, out.Err)
	}
}

// A 404 to a request that carried a session id: the server says it no
// longer knows the session and did not run it. Call does not resend it (the
// guard decides, and journals the next attempt first): it reports unknown
// with the server's word, session expired; the next call goes out on a new
// session.
func TestRemoteExpiredSessionIsNotResent(t *testing.T) {
	srv := newOrdersServer(t)
	p := newFaultProxy(t, srv.url, true)
	r := remoteClient(t, p.url)
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	p.set("404", true)
	out := createOrder(t, r)
	if out.Kind != mcpclient.DeliveryUnknown || !out.SessionExpired() || out.Session != 1 || !out.Reason.Refused() {
		t.Fatalf("delivery = %s (%q), session %d, expired %v, %v; want unknown (refused) on session 1, expired", out.Kind, out.Reason, out.Session, out.SessionExpired(), out.Err)
	}
	if got := srv.executed.Load(); got != 0 {
		t.Errorf("server executed %d orders, want 0", got)
	}
	out = createOrder(t, r)
	if out.Kind != mcpclient.DeliveryResult || out.SessionExpired() || out.Session != 2 {
		t.Fatalf("next call: delivery = %s, session %d, %v; want a result on session 2", out.Kind, out.Session, out.Err)
	}
	if got := srv.executed.Load(); got != 1 {
		t.Errorf("server executed %d orders, want 1", got)
	}
	p.mu.Lock()
	seen := p.seen
	p.mu.Unlock()
	if len(seen) != 2 || seen[0] == "" || seen[1] == "" || seen[0] == seen[1] {
		t.Errorf("tools/call session ids = %q, want two different sessions", seen)
	}
}

// On a modern (sessionless) connection a 404 is a refusal too, but there
// is no session to renew: unknown with the server's word, not sent again.
func TestRemoteNotFoundWithoutSession(t *testing.T) {
	srv := newOrdersServer(t)
	p := newFaultProxy(t, srv.url, false)
	r := remoteClient(t, p.url)
	p.set("404", true)
	out := createOrder(t, r)
	if out.Kind != mcpclient.DeliveryUnknown || out.SessionExpired() || out.Reason != mcpclient.RefusedReason(404, false) {
		t.Fatalf("delivery = %s (%q), expired %v, %v; want unknown (refused), no session to expire", out.Kind, out.Reason, out.SessionExpired(), out.Err)
	}
	if got := srv.executed.Load(); got != 0 {
		t.Errorf("server executed %d orders, want 0", got)
	}
}

func TestRemoteRefusedConnectionIsNotSent(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	r := remoteClient(t, "http://"+addr+"/mcp")
	out := createOrder(t, r)
	if out.Kind != mcpclient.DeliveryNotSent {
		t.Fatalf("delivery = %s, %v; want not sent", out.Kind, out.Err)
	}
}

func TestRemoteIdleClockIsUnknown(t *testing.T) {
	release := make(chan struct{})
	var executed atomic.Int64
	s := server.NewMCPServer("slow", "1.0.0")
	s.AddTool(mcp.NewTool("create_order"), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		executed.Add(1)
		select {
		case <-release:
		case <-ctx.Done():
		}
		return mcp.NewToolResultText("late"), nil
	})
	ts := httptest.NewServer(server.NewStreamableHTTPServer(s))
	defer ts.Close()
	defer close(release)
	r := remoteClient(t, ts.URL+"/mcp")
	out := r.Call(context.Background(), "create_order", nil, mcpclient.CallOptions{Key: "k-idle", IdleTimeout: 300 * time.Millisecond})
	if out.Kind != mcpclient.DeliveryUnknown || out.Reason != mcpclient.ReasonIdleTimeout {
		t.Fatalf("delivery = %s (%q), %v; want unknown (idle timeout)", out.Kind, out.Reason, out.Err)
	}
	if executed.Load() != 1 {
		t.Errorf("executed %d, want 1", executed.Load())
	}
}

func TestRemoteRefusesIdempotencyHeader(t *testing.T) {
	_, err := mcpclient.NewRemote(mcpclient.ServerSpec{URL: "http://127.0.0.1:1/mcp",
		Headers: map[string]string{"idempotency-key": "x"}}, testOptions())
	if err == nil || !strings.Contains(err.Error(), "resend") {
		t.Fatalf("err = %v, want a refusal naming the resend", err)
	}
}

// Progress over the SSE stream resets the idle clock, and the answer is
// read from the stream by the tap.
func TestRemoteProgressOverSSE(t *testing.T) {
	for _, legacy := range []bool{false, true} {
		srv := newOrdersServer(t)
		p := newFaultProxy(t, srv.url, legacy)
		r := remoteClient(t, p.url)
		var progress atomic.Int64
		out := r.Call(context.Background(), "slow_order", nil, mcpclient.CallOptions{Key: "k-sse",
			IdleTimeout: 400 * time.Millisecond, OnProgress: func(mcpclient.Progress) { progress.Add(1) }})
		if out.Kind != mcpclient.DeliveryResult {
			t.Fatalf("legacy=%v: delivery = %s (%q), %v; want the result", legacy, out.Kind, out.Reason, out.Err)
		}
		if progress.Load() == 0 || srv.executed.Load() != 1 {
			t.Errorf("legacy=%v: %d progress reports, %d executed; want some, 1", legacy, progress.Load(), srv.executed.Load())
		}
		// The same through a cut after the server answered: unknown.
		p.set("cut", true)
		out = r.Call(context.Background(), "slow_order", nil, mcpclient.CallOptions{Key: "k-sse-2", IdleTimeout: 5 * time.Second})
		if out.Kind != mcpclient.DeliveryUnknown || srv.executed.Load() != 2 {
			t.Errorf("legacy=%v: cut: delivery = %s, %d executed; want unknown, 2", legacy, out.Kind, srv.executed.Load())
		}
	}
}

// A call without OnSent and OnProgress runs no event goroutine of its own:
// progress still resets its idle clock (a slow_order reports every 150ms,
// under the 400ms clock, for 600ms), and it leaves nothing running. With
// the callbacks, OnSent has seen the request's id once when Call returns,
// and progress is reported.
func TestRemoteCallbacksOptional(t *testing.T) {
	noLeak(t)
	for _, legacy := range []bool{false, true} {
		srv := newOrdersServer(t)
		p := newFaultProxy(t, srv.url, legacy)
		r := remoteClient(t, p.url)
		out := r.Call(context.Background(), "slow_order", nil, mcpclient.CallOptions{Key: "k-bare", IdleTimeout: 400 * time.Millisecond})
		if out.Kind != mcpclient.DeliveryResult || out.RPCID == "" {
			t.Fatalf("legacy=%v: no callbacks: delivery = %s (%q) id %q, %v; want the result", legacy, out.Kind, out.Reason, out.RPCID, out.Err)
		}
		var mu sync.Mutex
		var sent []string
		var progress int
		out = r.Call(context.Background(), "slow_order", nil, mcpclient.CallOptions{Key: "k-cb", IdleTimeout: 400 * time.Millisecond,
			OnSent: func(_ int, id string) {
				mu.Lock()
				sent = append(sent, id)
				mu.Unlock()
			},
			OnProgress: func(mcpclient.Progress) {
				mu.Lock()
				progress++
				mu.Unlock()
			}})
		mu.Lock()
		if out.Kind != mcpclient.DeliveryResult || len(sent) != 1 || sent[0] != out.RPCID || progress == 0 {
			t.Errorf("legacy=%v: callbacks: delivery = %s, sent %v (id %q), %d progress; want the result, the id once, some progress",
				legacy, out.Kind, sent, out.RPCID, progress)
		}
		mu.Unlock()
		if srv.executed.Load() != 2 {
			t.Errorf("legacy=%v: %d executed, want 2", legacy, srv.executed.Load())
		}
	}
}
