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
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcp-confirm/mcp-confirm/internal/testbin"
	"github.com/mcp-confirm/mcp-confirm/mcpclient"
)

// A write is never sent twice below the journal (issue 44, item 1): Go's
// HTTP/2 client resends a request by itself after a GOAWAY or a stream
// reset (REFUSED_STREAM, PROTOCOL_ERROR), through Request.GetBody, even
// when the server had run it. Each test puts the h2Relay between a Remote
// and a real HTTP/2 server, faults the first tools/call once the server
// has executed it, and counts the executions at the server.

func h2Remote(t *testing.T, cert *testCert, url string) *mcpclient.Remote {
	t.Helper()
	r, err := mcpclient.NewRemote(mcpclient.ServerSpec{URL: url}, testOptions())
	if err != nil {
		t.Fatal(err)
	}
	r.TrustRoots(cert.pool)
	t.Cleanup(func() { r.Close() })
	return r
}

func testH2FaultNotResent(t *testing.T, fault h2Fault) {
	srv := newH2WriteServer(t)
	cert := newTestCert(t)
	rl := newH2Relay(t, cert, srv, fault)
	r := h2Remote(t, cert, rl.url)
	out := createOrder(t, r)

	if n := srv.executed.Load(); n != 1 {
		t.Errorf("the server executed the write %d times, want 1 (a resend below the journal)", n)
	}
	calls, injected, h2Conns := rl.counts()
	if !injected || h2Conns == 0 {
		t.Fatalf("fault injected %v on %d h2 connections: the test did not test", injected, h2Conns)
	}
	if calls != 1 {
		t.Errorf("the relay saw %d tools/call requests, want 1", calls)
	}
	if out.Kind != mcpclient.DeliveryUnknown || out.Reason != mcpclient.ReasonConnectionLost {
		t.Fatalf("delivery = %s (%q), %v; want unknown (connection lost)", out.Kind, out.Reason, out.Err)
	}
	if !errors.Is(out.Err, mcpclient.ErrConnectionLost) || !strings.Contains(out.Err.Error(), "may have taken effect") {
		t.Errorf("error = %v; want a connection loss after the request was sent", out.Err)
	}
	if out.SentAt.IsZero() {
		t.Errorf("SentAt is zero: the request was sent")
	}
}

func TestRemoteH2GoAwayNotResent(t *testing.T)        { testH2FaultNotResent(t, faultGoAway) }
func TestRemoteH2RefusedStreamNotResent(t *testing.T) { testH2FaultNotResent(t, faultRefused) }
func TestRemoteH2ProtocolErrorNotResent(t *testing.T) { testH2FaultNotResent(t, faultProtocol) }

// connInfo is a connection and the number of requests it has carried,
// kept in its context (http.Server.ConnContext).
type connKey struct{}

type connInfo struct {
	conn     net.Conn
	requests atomic.Int64
}

// TestRemoteHTTP1ReusedConnClosedNotResent: over HTTP/1.1 keep-alive, the
// server runs the write on a connection that carried requests before, then
// closes that connection without answering. net/http resends a request on
// a reused connection that closed when it counts the request replayable;
// the write must not be.
func TestRemoteHTTP1ReusedConnClosedNotResent(t *testing.T) {
	var executed, reusedRuns atomic.Int64
	s := server.NewMCPServer("h1-writes", "1.0.0")
	s.AddTool(mcp.NewTool("create_order", mcp.WithString("item")),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			n := executed.Add(1)
			if ci, ok := ctx.Value(connKey{}).(*connInfo); ok && n == 1 {
				if ci.requests.Load() > 1 {
					reusedRuns.Add(1)
				}
				ci.conn.Close() // ran, and the answer is lost with the connection
			}
			return mcp.NewToolResultText("order placed"), nil
		})
	h := server.NewStreamableHTTPServer(s)
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if ci, ok := r.Context().Value(connKey{}).(*connInfo); ok {
			ci.requests.Add(1)
		}
		h.ServeHTTP(w, r)
	}))
	ts.Config.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		return context.WithValue(ctx, connKey{}, &connInfo{conn: c})
	}
	ts.Start()
	t.Cleanup(ts.Close)

	r := remoteClient(t, ts.URL+"/mcp")
	out := createOrder(t, r)
	if n := executed.Load(); n != 1 {
		t.Errorf("the server executed the write %d times, want 1 (a resend below the journal)", n)
	}
	if reusedRuns.Load() != 1 {
		t.Fatalf("the write did not go out on a reused connection: the test did not test")
	}
	if out.Kind != mcpclient.DeliveryUnknown || out.Reason != mcpclient.ReasonConnectionLost {
		t.Fatalf("delivery = %s (%q), %v; want unknown (connection lost)", out.Kind, out.Reason, out.Err)
	}
}

// TestBinaryH2GoAwayNotResent runs the built mcp-confirm, `call --url
// https://…`, through the relay (trusted through SSL_CERT_FILE, as a user's
// own CA would be) and reads its journal: one attempt, unknown, a connection
// loss, and the server ran the write once.
func TestBinaryH2GoAwayNotResent(t *testing.T) {
	bin := bins.Path(t, "mcp-confirm", testbin.MCPConfirm)
	srv := newH2WriteServer(t)
	cert := newTestCert(t)
	rl := newH2Relay(t, cert, srv, faultGoAway)
	db := filepath.Join(t.TempDir(), "journal.db")
	run := func(args ...string) (string, int) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, append([]string{"--db", db, "--json"}, args...)...)
		cmd.Env = append(os.Environ(), "SSL_CERT_FILE="+cert.file, "SSL_CERT_DIR="+t.TempDir())
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		code := 0
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			code = exit.ExitCode()
		} else if err != nil {
			t.Fatalf("%v: %v\n%s", args, err, stderr.String())
		}
		return string(out) + stderr.String(), code
	}
	out, code := run("call", "create_order", "--url", rl.url, "--args", `{"item":"book"}`, "--timeout", "20s")
	if n := srv.executed.Load(); n != 1 {
		t.Errorf("the server executed the write %d times, want 1 (a resend below the journal)\n%s", n, out)
	}
	if _, injected, h2Conns := rl.counts(); !injected || h2Conns == 0 {
		t.Fatalf("fault injected %v on %d h2 connections: the test did not test\n%s", injected, h2Conns, out)
	}
	if code != 3 {
		t.Errorf("exit %d, want 3 (unknown)\n%s", code, out)
	}
	t.Logf("call:\n%s", out)
	show, code := run("show", "1")
	if code != 3 && code != 0 {
		t.Fatalf("show: exit %d\n%s", code, show)
	}
	var call struct {
		State    string            `json:"state"`
		Reason   string            `json:"reason"`
		Attempts []json.RawMessage `json:"attempts"`
	}
	if err := json.Unmarshal([]byte(show[:strings.LastIndex(show, "}")+1]), &call); err != nil {
		t.Fatalf("show --json: %v\n%s", err, show)
	}
	if call.State != "unknown" || call.Reason != string(mcpclient.ReasonConnectionLost) || len(call.Attempts) != 1 {
		t.Errorf("journal: state %q, reason %q, %d attempts; want unknown, connection lost, 1\n%s",
			call.State, call.Reason, len(call.Attempts), show)
	}
}

// TestRemoteRedirectNotFollowed: a server that runs the write and answers
// 307 or 308 (which keep the method and body) does not get it sent to the
// new place: the call is unknown, one execution.
func TestRemoteRedirectNotFollowed(t *testing.T) {
	for _, status := range []int{http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			var executed, redirected atomic.Int64
			s := server.NewMCPServer("redirects", "1.0.0")
			s.AddTool(mcp.NewTool("create_order", mcp.WithString("item")),
				func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
					executed.Add(1)
					return mcp.NewToolResultText("order placed"), nil
				})
			h := server.NewStreamableHTTPServer(s)
			mux := http.NewServeMux()
			mux.Handle("/mcp", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				r.Body = io.NopCloser(bytes.NewReader(body))
				if !bytes.Contains(body, []byte(`"tools/call"`)) {
					h.ServeHTTP(w, r)
					return
				}
				h.ServeHTTP(httptest.NewRecorder(), r) // run it, drop the answer
				w.Header().Set("Location", "/elsewhere")
				w.WriteHeader(status)
			}))
			mux.Handle("/elsewhere", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				redirected.Add(1)
				h.ServeHTTP(w, r)
			}))
			ts := httptest.NewServer(mux)
			t.Cleanup(ts.Close)
			r := remoteClient(t, ts.URL+"/mcp")
			out := createOrder(t, r)
			if n, m := executed.Load(), redirected.Load(); n != 1 || m != 0 {
				t.Errorf("executed %d times, %d requests followed the redirect; want 1, 0", n, m)
			}
			if out.Kind != mcpclient.DeliveryUnknown || out.Reason != mcpclient.ReasonHTTPStatus {
				t.Errorf("delivery = %s (%q), %v; want unknown (http error status)", out.Kind, out.Reason, out.Err)
			}
		})
	}
}
