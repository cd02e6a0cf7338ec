package main

import (
	"bytes"
	"context"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/mcp-confirm/mcp-confirm/internal/testbin"
)

// startHTTPDemo runs the demo server over Streamable HTTP on a loopback
// port of its own choosing, as a real process with the world's
// environment and folder, and returns its URL. The server is stopped at
// the end of the test.
func startHTTPDemo(t testing.TB, w *world, flags ...string) string {
	t.Helper()
	return testbin.HTTPDemoCmd(t, func(ctx context.Context, args ...string) *exec.Cmd {
		return e2eCmd(ctx, w.bin, w.dir, args...)
	}, w.demoDB, flags...)
}

// A remote create_order whose connection is cut after the order committed:
// the call is unknown, not resent, and one order exists; a retry with the
// same key, on the URL the journal recorded, is answered from the server's
// dedupe as a replay, and there is still one order. The journal names the
// URL as the call's server.
func TestHTTPCutAfterCommitThenRetry(t *testing.T) {
	w := newWorld(t, t.TempDir())
	url := startHTTPDemo(t, w, "--cut-after-commit", "1")
	args := `{"item":"widget","quantity":1,"buyer":"bob"}`

	r := w.run("call", "create_order", "--args", args, "--url", url)
	wantExit(t, r, exitUnknown, "call whose connection is cut after commit")
	first := parseCallOut(t, r)
	if first.State != "unknown" {
		t.Fatalf("state %q, want unknown\n%s", first.State, r)
	}
	if !strings.Contains(r.stderr, "NOT resent") {
		t.Errorf("the unknown call's message does not say it was not resent:\n%s", r.stderr)
	}
	db := w.db()
	if n := totalOrders(t, db); n != 1 {
		t.Fatalf("%d orders after the cut call, want 1 (it committed)", n)
	}
	c := w.show(first.ID)
	if len(c.Attempts) != 1 {
		t.Fatalf("%d attempts after the cut call, want 1 (never resent on its own)", len(c.Attempts))
	}
	if r := w.run("show", strconv.FormatInt(first.ID, 10)); !strings.Contains(r.stdout, url) {
		t.Errorf("show does not name the URL the call went to:\n%s", r.stdout)
	}

	// The retry finds the URL in the journal: no server flag is needed.
	r = w.run("retry", strconv.FormatInt(first.ID, 10))
	wantExit(t, r, exitOK, "retry with the same key")
	again := parseCallOut(t, r)
	if again.State != "succeeded" || !again.Replayed || again.Key != first.Key {
		t.Fatalf("retry: state %q replayed %v key %q, want succeeded, a replay, key %q\n%s",
			again.State, again.Replayed, again.Key, first.Key, r)
	}
	if n := totalOrders(t, db); n != 1 {
		t.Fatalf("%d orders after the retry, want still 1", n)
	}

	// The cut was for the first write only: the next one is answered.
	r = w.run("call", "create_order", "--args", args, "--url", url)
	wantExit(t, r, exitOK, "a second call, after the fault")
	if n := totalOrders(t, db); n != 2 {
		t.Fatalf("%d orders after a second call, want 2", n)
	}
}

// Bad ways to name a remote server, and one that cannot be reached: a
// clear message, the documented exit code, nothing sent and nothing
// journaled.
func TestHTTPServerSelectionErrors(t *testing.T) {
	w := newWorld(t, t.TempDir())
	// A port that was free a moment ago: nothing listens on it.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String() + "/mcp"
	ln.Close()
	args := `{"item":"widget","quantity":1,"buyer":"bob"}`
	call := func(extra ...string) []string {
		return append([]string{"call", "create_order", "--args", args}, extra...)
	}
	for _, tc := range []struct {
		name string
		args []string
		exit int
		want string
	}{
		{"nothing listens", call("--url", closed), exitUnavailable, "reachable at " + closed},
		{"not an http URL", call("--url", "ftp://example.com/mcp"), exitBadInput, "not an http:// or https:// URL"},
		{"a URL with no host", call("--url", "http:///mcp"), exitBadInput, "not an http:// or https:// URL"},
		{"a URL and a command", call(append([]string{"--url", closed}, w.server()...)...), exitBadInput, "not both"},
		{"a header for a stdio server", call(append([]string{"--header", "Authorization: Bearer x"}, w.server()...)...), exitBadInput, "--header is for a remote server"},
		{"a header with no colon", call("--url", closed, "--header", "Authorization Bearer x"), exitBadInput, "is not 'Name: value'"},
		{"a header from an unset variable", call("--url", closed, "--header", "Authorization: Bearer ${MCP_CONFIRM_TEST_UNSET}"), exitBadInput, "MCP_CONFIRM_TEST_UNSET} is not set"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := w.run(tc.args...)
			wantExit(t, r, tc.exit, tc.name)
			if !strings.Contains(r.stderr, tc.want) || !strings.Contains(r.stderr, "nothing was sent") {
				t.Errorf("stderr does not say %q and that nothing was sent:\n%s", tc.want, r.stderr)
			}
			if n := len(strings.Split(strings.TrimSpace(r.stderr), "\n")); n > 2 {
				t.Errorf("%d lines on stderr, want one or two:\n%s", n, r.stderr)
			}
		})
	}
	if calls := w.list(); len(calls) != 0 {
		t.Fatalf("%d calls journaled by commands that sent nothing", len(calls))
	}
}

// gateway is a reverse proxy in front of an HTTP server, as a load
// balancer or API gateway is in front of a real one. For every tools/call
// of create_order it lets the server run the call to its end, throws the
// answer away, and answers 502 instead: the response lost on the way back,
// where it really happens. With refuse set, it answers that status instead
// and forwards nothing: the request never reached the server.
func gateway(t *testing.T, upstream string, refuse ...int) string {
	t.Helper()
	target, err := url.Parse(upstream)
	if err != nil {
		t.Fatal(err)
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(&url.URL{Scheme: target.Scheme, Host: target.Host})
			r.Out.URL.Path = r.In.URL.Path
		},
		ModifyResponse: func(resp *http.Response) error {
			if resp.Request.Header.Get("X-Test-Lose-Answer") == "" {
				return nil
			}
			// Wait for the whole answer: the server has then run the call.
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			resp.StatusCode, resp.Status = http.StatusBadGateway, "502 Bad Gateway"
			resp.Header = http.Header{"Content-Type": {"text/plain"}}
			resp.Body = io.NopCloser(strings.NewReader("upstream answer lost\n"))
			resp.ContentLength = -1
			return nil
		},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		if bytes.Contains(body, []byte(`"tools/call"`)) && bytes.Contains(body, []byte(`"create_order"`)) {
			if len(refuse) > 0 {
				http.Error(w, http.StatusText(refuse[0]), refuse[0])
				return
			}
			r.Header.Set("X-Test-Lose-Answer", "1")
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + target.Path
}

// A 502 from a gateway after the server ran the write is unknown, not a
// failure: the order exists, and the call is not resent. A retry through
// the gateway would be cut the same way, so the operator's query goes to
// the server itself (--any-server: a different URL), which finds it.
func TestHTTPGateway502IsUnknown(t *testing.T) {
	w := newWorld(t, t.TempDir())
	direct := startHTTPDemo(t, w)
	via := gateway(t, direct)
	r := w.run("call", "create_order", "--args", `{"item":"widget","quantity":1,"buyer":"bob"}`, "--url", via)
	wantExit(t, r, exitUnknown, "a write answered 502 by a gateway")
	out := parseCallOut(t, r)
	db := w.db()
	if n := totalOrders(t, db); n != 1 {
		t.Fatalf("%d orders, want 1: the server ran the write behind the gateway", n)
	}
	if c := w.show(out.ID); len(c.Attempts) != 1 || c.State != "unknown" {
		t.Fatalf("call %d: %s with %d attempts, want unknown with 1 (never resent)", out.ID, c.State, len(c.Attempts))
	}
	r = w.run("query", strconv.FormatInt(out.ID, 10), "--tool", "find_orders",
		"--args", `{"idempotency_key":"{key}"}`, "--url", direct, "--any-server")
	wantExit(t, r, exitOK, "query on the server itself")
	if c := w.show(out.ID); !strings.HasPrefix(c.Proposal, "applied") {
		t.Errorf("after the query the proposal is %q, want applied (the order was found)", c.Proposal)
	}
}

// A server that wants authorization (401 to everything): exit 5, a hint
// naming --header, nothing journaled as unknown.
func TestHTTPUnauthorized(t *testing.T) {
	w := newWorld(t, t.TempDir())
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="orders"`)
		http.Error(w, "unauthorized", http.StatusUnauthorized)
	}))
	defer srv.Close()
	r := w.run("call", "create_order", "--args", `{"item":"widget","quantity":1,"buyer":"bob"}`, "--url", srv.URL+"/mcp")
	wantExit(t, r, exitUnavailable, "a server answering 401")
	if !strings.Contains(r.stderr, "authorization") || !strings.Contains(r.stderr, "--header 'Authorization: Bearer") {
		t.Errorf("stderr does not say authorization is needed and how to give it:\n%s", r.stderr)
	}
	for _, c := range w.list() {
		if c.State == "unknown" {
			t.Errorf("call %d journaled as unknown after a 401", c.ID)
		}
	}
}

// A status by which the server says it did not run the request (403, and a
// 404 with no session to expire) is only its word: the call is unknown,
// saying what the server said, exit 3, nothing resent (here the gateway did
// forward nothing: no order). A 503 from in between is unknown too.
func TestHTTPRefusedBeforeRunning(t *testing.T) {
	args := `{"item":"widget","quantity":1,"buyer":"bob"}`
	for _, c := range []struct {
		status int
		exit   int
		state  string
	}{
		{http.StatusForbidden, exitUnknown, "unknown"},
		{http.StatusNotFound, exitUnknown, "unknown"},
		{http.StatusServiceUnavailable, exitUnknown, "unknown"},
	} {
		t.Run(strconv.Itoa(c.status), func(t *testing.T) {
			w := newWorld(t, t.TempDir())
			via := gateway(t, startHTTPDemo(t, w), c.status)
			r := w.run("call", "create_order", "--args", args, "--url", via)
			wantExit(t, r, c.exit, "a create_order the gateway answers "+strconv.Itoa(c.status))
			if n := totalOrders(t, w.db()); n != 0 {
				t.Fatalf("%d orders, want 0: the gateway forwarded nothing", n)
			}
			calls := w.list()
			if len(calls) != 1 || calls[0].State != c.state {
				t.Fatalf("journal: %+v, want one call, %s", calls, c.state)
			}
			said := "the server answered " + strconv.Itoa(c.status) + ": it says it did not run this"
			if c.status != http.StatusServiceUnavailable && calls[0].Reason != said {
				t.Errorf("reason %q, want %q", calls[0].Reason, said)
			}
			if got := w.show(calls[0].ID); len(got.Attempts) != 1 {
				t.Errorf("%d attempts, want 1: never resent", len(got.Attempts))
			}
		})
	}
}

// bearerGateway is a loopback reverse proxy in front of upstream that
// answers 401 unless the request carries "Authorization: Bearer token",
// as a remote server's gateway does; it returns the endpoint's URL.
func bearerGateway(t *testing.T, upstream, token string) string {
	t.Helper()
	target, err := url.Parse(upstream)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: target.Scheme, Host: target.Host})
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(rw, "unauthorized", http.StatusUnauthorized)
			return
		}
		rp.ServeHTTP(rw, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + target.Path
}

// A token in a header, given as --header (with ${VAR}) or --header-env
// (what init writes): it reaches a server that wants it, and its value is
// never printed; without it the server's 401 is exit 5.
func TestHTTPHeaderFromTheEnvironment(t *testing.T) {
	w := newWorld(t, t.TempDir())
	endpoint := bearerGateway(t, startHTTPDemo(t, w), "t0ken-1234")
	t.Setenv("MCP_CONFIRM_TEST_TOKEN", "t0ken-1234")
	t.Setenv("MCP_CONFIRM_HEADER_AUTHORIZATION", "Authorization: Bearer ${MCP_CONFIRM_TEST_TOKEN}")

	wantExit(t, w.run("tools", "--url", endpoint), exitUnavailable, "tools without the token")
	for _, how := range [][]string{
		{"--header", "Authorization: Bearer ${MCP_CONFIRM_TEST_TOKEN}"},
		{"--header-env", "MCP_CONFIRM_HEADER_AUTHORIZATION"},
	} {
		r := w.run(append([]string{"tools", "--url", endpoint}, how...)...)
		wantExit(t, r, exitOK, "tools with "+how[0])
		if !strings.Contains(r.stdout, "create_order") {
			t.Errorf("tools with %s did not list the server's tools:\n%s", how[0], r)
		}
		if strings.Contains(r.stdout+r.stderr, "t0ken-1234") {
			t.Errorf("the token was printed:\n%s", r)
		}
	}
	r := w.run("tools", "--url", endpoint, "--header-env", "MCP_CONFIRM_TEST_TOKEN")
	wantExit(t, r, exitBadInput, "--header-env naming a variable that is not a header line")
	if strings.Contains(r.stderr, "t0ken-1234") {
		t.Errorf("the malformed header's value was printed:\n%s", r.stderr)
	}
}

// A server that expires each session after a write (--expire-sessions),
// behind a long-lived proxy: the second create_order goes out on the old
// session and is answered 404 (the server says it did not run it). The tool
// takes the idempotency key, so it is sent once more, with the same key, on
// a new session, as its next attempt, journaled before it went: attempt 1
// unknown with what the server said and why the resend was safe, attempt 2
// succeeded, and one order per call on the server.
func TestHTTPExpiredSessionSentOnceMoreAsNextAttempt(t *testing.T) {
	w := newWorld(t, t.TempDir())
	endpoint := startHTTPDemo(t, w, "--expire-sessions")
	host := startHost(t, childEnv(w.dir), w.bin, "proxy", "--db", w.journal, "--url", endpoint)
	for _, buyer := range []string{"alice", "bob"} {
		res := hostCall(t, host, "create_order", map[string]any{"item": "widget", "quantity": 1, "buyer": buyer})
		if res.IsError {
			t.Fatalf("create_order for %s: %+v", buyer, res)
		}
	}
	host.Close()

	calls := w.list()
	if len(calls) != 2 {
		t.Fatalf("%d calls journaled, want 2", len(calls))
	}
	for _, c := range calls {
		if c.State != "succeeded" {
			t.Errorf("call %d is %s, want succeeded", c.ID, c.State)
		}
		if n := ordersFor(t, w.db(), c.Key); n != 1 {
			t.Errorf("call %d: %d orders with its key, want 1", c.ID, n)
		}
	}
	lo, hi := calls[0].ID, calls[1].ID
	if lo > hi {
		lo, hi = hi, lo
	}
	first, second := w.show(lo), w.show(hi)
	if len(first.Attempts) != 1 {
		t.Errorf("the first call has %d attempts, want 1 (its session was fresh)", len(first.Attempts))
	}
	if len(second.Attempts) != 2 {
		t.Fatalf("the second call has %d attempts, want 2: %+v", len(second.Attempts), second.Attempts)
	}
	a1, a2 := second.Attempts[0], second.Attempts[1]
	if a1.Outcome != "unknown" || !strings.Contains(a1.Reason, "the server answered 404 for the session: it says it did not run this") {
		t.Errorf("attempt 1: %s %q, want unknown, the server's 404", a1.Outcome, a1.Reason)
	}
	if a2.Outcome != "succeeded" || a2.Session <= a1.Session {
		t.Errorf("attempt 2: %s on session %d (attempt 1 on %d), want succeeded on a newer session", a2.Outcome, a2.Session, a1.Session)
	}
	if n := totalOrders(t, w.db()); n != 2 {
		t.Errorf("%d orders on the server, want 2", n)
	}
	r := w.run("show", strconv.FormatInt(second.ID, 10))
	if !strings.Contains(r.stdout, "sent once more as attempt 2, on a new session, with the same key: "+
		"the tool takes the idempotency key, so the server deduplicates a second run") {
		t.Errorf("show does not say why the write was sent once more:\n%s", r.stdout)
	}
}

// A remote create_order whose stream carried events (progress, while the
// demo works) and was then cut after the order committed: the client
// resumes the stream with Last-Event-ID and gets the answer the server
// kept, so the call succeeds on its one attempt, nothing resent, one
// order, and the journal says how the answer came.
func TestHTTPCutStreamResumed(t *testing.T) {
	w := newWorld(t, t.TempDir())
	url := startHTTPDemo(t, w, "--cut-after-commit", "1", "--delay", "600ms", "--protocols", "2025-11-25")
	r := w.run("call", "create_order", "--args", `{"item":"widget","quantity":1,"buyer":"bob"}`, "--url", url)
	wantExit(t, r, exitOK, "call whose stream is cut after commit, with events before")
	out := parseCallOut(t, r)
	if out.State != "succeeded" {
		t.Fatalf("state %q, want succeeded\n%s", out.State, r)
	}
	if n := totalOrders(t, w.db()); n != 1 {
		t.Fatalf("%d orders, want 1", n)
	}
	c := w.show(out.ID)
	if len(c.Attempts) != 1 {
		t.Fatalf("%d attempts, want 1: the answer was recovered, not resent", len(c.Attempts))
	}
	show := w.run("show", strconv.FormatInt(out.ID, 10))
	if !strings.Contains(show.stdout, "recovered by resuming the stream; not resent") {
		t.Fatalf("show does not say the answer came on a resumed stream:\n%s", show.stdout)
	}
	if s := w.run("stats"); !strings.Contains(s.stdout, "answers recovered by resuming a broken stream (not resent) 1") {
		t.Fatalf("stats does not count the resumed answer:\n%s", s.stdout)
	}
}

// Where the server cannot resume the stream, the cut call is unknown as
// before, and was sent once: a 2026-07-28 connection (resumption was
// removed from that version), and a 2025 session whose stream had carried
// no event before the cut (no Last-Event-ID to resume from).
func TestHTTPCutStreamNotResumable(t *testing.T) {
	for _, tt := range []struct {
		name  string
		flags []string
	}{
		{"stateless 2026-07-28", []string{"--delay", "600ms"}},
		{"no event before the cut", []string{"--protocols", "2025-11-25"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t, t.TempDir())
			url := startHTTPDemo(t, w, append([]string{"--cut-after-commit", "1"}, tt.flags...)...)
			wantCutCallUnknown(t, w, url, "call whose stream is cut and cannot be resumed")
		})
	}
}

// demo-server's --protocols takes protocol versions mcp-go knows, and only
// with --http: exit 2 with a line naming the fault, and nothing served.
func TestDemoServerProtocolsBadInput(t *testing.T) {
	w := newWorld(t, t.TempDir())
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--http", "127.0.0.1:0", "--protocols", "2025-11-25,1999-01-01"}, `--protocols: "1999-01-01" is not a protocol version`},
		{[]string{"--protocols", "2025-11-25"}, "--protocols is for --http"},
	} {
		r := cliIn(t, w.bin, w.dir, "", append([]string{"demo-server"}, tt.args...)...)
		wantExit(t, r, exitBadInput, strings.Join(tt.args, " "))
		if !strings.Contains(r.stderr, tt.want) || strings.Count(strings.TrimSpace(r.stderr), "\n") > 1 {
			t.Errorf("demo-server %v: want one or two lines saying %q; stderr:\n%s", tt.args, tt.want, r.stderr)
		}
	}
}

// A stream cut after the order committed, on a connection whose events
// carried ids, but the resume GET is refused (405, as a server or gateway
// that serves no GET streams answers): the call is unknown on its one
// attempt, one order, and the refused GET was not asked again (a refusal
// ends the resume; only a broken or quiet resumed stream is tried again).
func TestHTTPCutStreamResumeRefused(t *testing.T) {
	w := newWorld(t, t.TempDir())
	demoURL := startHTTPDemo(t, w, "--cut-after-commit", "1", "--delay", "600ms", "--protocols", "2025-11-25")
	target, err := url.Parse(demoURL)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: target.Scheme, Host: target.Host})
	rp.FlushInterval = -1                    // SSE: each event as it comes
	rp.ErrorLog = log.New(io.Discard, "", 0) // the cut is the test's; not noise in its log
	var mu sync.Mutex
	refused := 0
	relay := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && r.Header.Get("Last-Event-ID") != "" {
			mu.Lock()
			refused++
			mu.Unlock()
			http.Error(rw, "no streams to resume here", http.StatusMethodNotAllowed)
			return
		}
		rp.ServeHTTP(rw, r)
	}))
	t.Cleanup(relay.Close)
	wantCutCallUnknown(t, w, relay.URL+target.Path, "call whose stream is cut and whose resume is refused")
	mu.Lock()
	defer mu.Unlock()
	if refused != 1 {
		t.Fatalf("%d resume GETs were refused, want exactly 1 (a refusal is final)", refused)
	}
}

// wantCutCallUnknown makes a create_order on url whose stream is cut after
// the commit and not recovered: unknown (exit 3) on its one attempt, one
// order, and no resume counted by stats.
func wantCutCallUnknown(t *testing.T, w *world, url, what string) {
	t.Helper()
	r := w.run("call", "create_order", "--args", `{"item":"widget","quantity":1,"buyer":"bob"}`, "--url", url)
	wantExit(t, r, exitUnknown, what)
	out := parseCallOut(t, r)
	if n := totalOrders(t, w.db()); n != 1 {
		t.Fatalf("%d orders, want 1", n)
	}
	if c := w.show(out.ID); len(c.Attempts) != 1 || c.State != "unknown" {
		t.Fatalf("want one attempt, unknown; got %s with %d attempts", c.State, len(c.Attempts))
	}
	if s := w.run("stats"); strings.Contains(s.stdout, "resuming") {
		t.Fatalf("stats counts a resume that did not happen:\n%s", s.stdout)
	}
}
