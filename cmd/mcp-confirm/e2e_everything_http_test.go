package main

// Resuming a broken stream against a server mcp-confirm did not write: the
// TypeScript SDK's server-everything over Streamable HTTP, with the event
// store it enables. Between the client and the server sits a relay that
// cuts the connection of the one tools/call after it has forwarded the
// first progress event: the lost response of a load balancer's cut, on a
// real third-party server. The client must get the answer by resuming the
// stream with Last-Event-ID, not by sending the call again.

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcp-confirm/mcp-confirm/internal/npmfixture"
)

// cuttingRelay forwards HTTP to a server, streaming responses as they
// come; the response to the first POST whose body names cutTool is cut
// (its client connection closed) right after the first event that carries
// a progress notification has been forwarded.
type cuttingRelay struct {
	target  string
	cutTool string
	calls   atomic.Int32 // POSTs of cutTool's tools/call seen
	resumes atomic.Int32 // GETs carrying Last-Event-ID seen
	cut     atomic.Bool
}

type relayConnKey struct{}

func (c *cuttingRelay) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	isCall := r.Method == http.MethodPost && bytes.Contains(body, []byte(`"tools/call"`)) && bytes.Contains(body, []byte(c.cutTool))
	if isCall {
		c.calls.Add(1)
	}
	if r.Method == http.MethodGet && r.Header.Get("Last-Event-ID") != "" {
		c.resumes.Add(1)
	}
	req, err := http.NewRequestWithContext(r.Context(), r.Method, c.target+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	req.Header = r.Header.Clone()
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for k, vs := range resp.Header {
		w.Header()[k] = vs
	}
	w.WriteHeader(resp.StatusCode)
	flush := func() {
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
	}
	cutThis := isCall && c.cut.CompareAndSwap(false, true)
	rd := bufio.NewReader(resp.Body)
	var event strings.Builder
	for {
		line, err := rd.ReadString('\n')
		if line != "" {
			_, _ = io.WriteString(w, line)
			event.WriteString(line)
		}
		if strings.TrimSpace(line) == "" && line != "" {
			flush()
			if cutThis && strings.Contains(event.String(), "notifications/progress") {
				if conn, ok := r.Context().Value(relayConnKey{}).(net.Conn); ok {
					_ = conn.Close()
				}
				return
			}
			event.Reset()
		}
		if err != nil {
			flush()
			return
		}
	}
}

func TestHTTPEverythingCutStreamResumed(t *testing.T) {
	const tool = "trigger-long-running-operation"
	upstream := strings.TrimSuffix(npmfixture.EverythingHTTP(t), "/mcp") // the relay keeps the path
	relay := &cuttingRelay{target: upstream, cutTool: tool}
	srv := httptest.NewUnstartedServer(relay)
	srv.Config.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		return context.WithValue(ctx, relayConnKey{}, c)
	}
	srv.Start()
	t.Cleanup(srv.Close)

	w := newWorld(t, t.TempDir())
	// The tool says it is read-only; the policy makes it a write, so that it
	// is journaled and guarded as create_order would be.
	policy := filepath.Join(w.dir, "policy.toml")
	if err := os.WriteFile(policy, []byte("[tools.\""+tool+"\"]\nkind = \"write\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	r := w.run("call", tool, "--args", `{"duration":1.2,"steps":4}`, "--url", srv.URL+"/mcp", "--policy", policy)
	t.Logf("the call took %s, with %d resuming GETs", time.Since(began).Round(time.Millisecond), relay.resumes.Load())
	wantExit(t, r, exitOK, "a write whose stream the relay cut after its first progress event")
	out := parseCallOut(t, r)
	if out.State != "succeeded" {
		t.Fatalf("state %q, want succeeded\n%s", out.State, r)
	}
	if !relay.cut.Load() {
		t.Fatal("the relay never cut the call's stream: the test proved nothing")
	}
	if n := relay.calls.Load(); n != 1 {
		t.Fatalf("the server was sent the call %d times, want once", n)
	}
	if n := relay.resumes.Load(); n < 1 {
		t.Fatalf("no GET with Last-Event-ID reached the server")
	}
	c := w.show(out.ID)
	if len(c.Attempts) != 1 {
		t.Fatalf("%d attempts, want 1: the answer was recovered, not resent", len(c.Attempts))
	}
	show := w.run("show", strconv.FormatInt(out.ID, 10))
	if !strings.Contains(show.stdout, "recovered by resuming the stream; not resent") || !strings.Contains(show.stdout, "Long running operation completed") {
		t.Fatalf("show does not give the resumed answer and say how it came:\n%s", show.stdout)
	}
}
