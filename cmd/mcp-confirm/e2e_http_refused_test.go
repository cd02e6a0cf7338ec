package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// refusingGateway is a hostile gateway on a real loopback listener in front
// of the demo server process: it passes everything on, but a create_order
// tools/call is run by the server (the whole answer read, so the order is
// committed) and then answered with status instead, as a gateway or server
// that runs a call and says 404 (or 400, 401) does. With stripKey the tool
// takes no idempotency key: its schema loses the key argument in tools/list
// and the key in _meta is taken out of each call, so the server runs every
// request it gets.
type refusingGateway struct {
	url      string
	mu       sync.Mutex
	calls    int // create_order tools/calls the server ran
	sessions []string
}

func newRefusingGateway(t *testing.T, upstream string, status int, stripKey bool) *refusingGateway {
	t.Helper()
	target, err := url.Parse(upstream)
	if err != nil {
		t.Fatal(err)
	}
	g := &refusingGateway{}
	client := &http.Client{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		write := bytes.Contains(body, []byte(`"tools/call"`)) && bytes.Contains(body, []byte(`"create_order"`))
		if write && stripKey {
			body = withoutMetaKey(t, body)
		}
		req, err := http.NewRequestWithContext(r.Context(), r.Method, target.String(), bytes.NewReader(body))
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		req.Header = r.Header.Clone()
		req.Header.Del("Content-Length")
		resp, err := client.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		if write {
			// The server has run it once its whole answer is in.
			_, _ = io.Copy(io.Discard, resp.Body)
			g.mu.Lock()
			g.calls++
			g.sessions = append(g.sessions, r.Header.Get("Mcp-Session-Id"))
			g.mu.Unlock()
			http.Error(w, http.StatusText(status), status)
			return
		}
		answer := resp.Body
		if stripKey && bytes.Contains(body, []byte(`"tools/list"`)) {
			all, _ := io.ReadAll(resp.Body)
			answer = io.NopCloser(bytes.NewReader(withoutKeyArg(t, all)))
			resp.Header.Del("Content-Length")
		}
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		fl, _ := w.(http.Flusher)
		buf := make([]byte, 4096)
		for {
			n, err := answer.Read(buf)
			if n > 0 {
				_, _ = w.Write(buf[:n])
				if fl != nil {
					fl.Flush()
				}
			}
			if err != nil {
				return
			}
		}
	}))
	t.Cleanup(srv.Close)
	g.url = srv.URL + target.Path
	return g
}

// ran is how many create_order calls the server ran, and the session ids
// they came with.
func (g *refusingGateway) ran() (int, []string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.calls, append([]string(nil), g.sessions...)
}

// withoutMetaKey takes the idempotency key out of a tools/call's _meta.
func withoutMetaKey(t *testing.T, body []byte) []byte {
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		t.Errorf("gateway: a tools/call that is not one JSON object: %v", err)
		return body
	}
	if p, ok := m["params"].(map[string]any); ok {
		if meta, ok := p["_meta"].(map[string]any); ok {
			delete(meta, "io.github.mcp-confirm/idempotency-key")
		}
		if args, ok := p["arguments"].(map[string]any); ok {
			delete(args, "idempotency_key")
		}
	}
	out, _ := json.Marshal(m)
	return out
}

// withoutKeyArg takes create_order's idempotency_key argument out of a
// tools/list answer, as JSON or as SSE events.
func withoutKeyArg(t *testing.T, answer []byte) []byte {
	strip := func(line []byte) []byte {
		var m map[string]any
		if json.Unmarshal(line, &m) != nil {
			return line
		}
		res, _ := m["result"].(map[string]any)
		tools, _ := res["tools"].([]any)
		for _, tl := range tools {
			tool, _ := tl.(map[string]any)
			if tool["name"] != "create_order" {
				continue
			}
			schema, _ := tool["inputSchema"].(map[string]any)
			props, _ := schema["properties"].(map[string]any)
			delete(props, "idempotency_key")
		}
		out, _ := json.Marshal(m)
		return out
	}
	if !bytes.Contains(answer, []byte("data:")) {
		return strip(answer)
	}
	var out bytes.Buffer
	sc := bufio.NewScanner(bytes.NewReader(answer))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if data, ok := bytes.CutPrefix(line, []byte("data:")); ok {
			line = append([]byte("data: "), strip(bytes.TrimSpace(data))...)
		}
		out.Write(line)
		out.WriteByte('\n')
	}
	return out.Bytes()
}

// noFalseNotRun fails if what mcp-confirm printed tells as a fact that the
// call was not run or not sent.
func noFalseNotRun(t *testing.T, what, text string) {
	t.Helper()
	for _, false_ := range []string{"not executed", "not sent", "nothing was run", "Nothing was sent", "nothing was sent", "did not take effect"} {
		if strings.Contains(text, false_) {
			t.Errorf("%s says %q of a call the server ran:\n%s", what, false_, text)
		}
	}
}

// A create_order whose tool takes no idempotency key, which the server
// runs and then answers 404 for its session: one execution, one attempt,
// the call unknown with what the server said ("it says it did not run
// this"), never sent again on its own (a second run would not be
// deduplicated), and list and show say so.
func TestHTTPRunThen404WithoutKeyWaitsForOperator(t *testing.T) {
	w := newWorld(t, t.TempDir())
	gw := newRefusingGateway(t, startHTTPDemo(t, w, "--protocols", "2025-11-25"), http.StatusNotFound, true)
	r := w.run("call", "create_order", "--args", `{"item":"widget","quantity":1,"buyer":"bob"}`, "--url", gw.url)
	ran, sessions := gw.ran()
	if ran != 1 || totalOrders(t, w.db()) != 1 {
		t.Errorf("the server ran create_order %d times (%d orders), want once: never resent on its own", ran, totalOrders(t, w.db()))
	}
	if len(sessions) == 0 || sessions[0] == "" {
		t.Fatalf("the create_order came without a session id: the 404 is not one for the session")
	}
	wantExit(t, r, exitUnknown, "a create_order without a key the server ran and answered 404")
	out := parseCallOut(t, r)
	const said = "the server answered 404 for the session: it says it did not run this"
	if out.State != "unknown" || out.Reason != said {
		t.Errorf("call printed %s (%q), want unknown (%q)", out.State, out.Reason, said)
	}
	if !strings.Contains(r.stderr, "NOT resent") {
		t.Errorf("stderr does not say the call was not resent:\n%s", r.stderr)
	}
	noFalseNotRun(t, "call", r.stdout+r.stderr)
	c := w.show(out.ID)
	if len(c.Attempts) != 1 || c.Attempts[0].Outcome != "unknown" || c.Attempts[0].Reason != said {
		t.Fatalf("attempts %+v, want one, unknown (%q)", c.Attempts, said)
	}
	l := w.run("list")
	wantExit(t, l, exitOK, "list")
	if !strings.Contains(l.stdout, "unknown") || !strings.Contains(l.stdout, "it says it did not run this") {
		t.Errorf("list does not show the call unknown, with what the server said:\n%s", l.stdout)
	}
	s := w.run("show", strconv.FormatInt(out.ID, 10))
	wantExit(t, s, exitOK, "show")
	if !strings.Contains(s.stdout, said) {
		t.Errorf("show does not say what the server said:\n%s", s.stdout)
	}
	noFalseNotRun(t, "list", l.stdout)
	noFalseNotRun(t, "show", s.stdout)
}

// A create_order whose tool takes the idempotency key, which the server
// runs and answers 404 for its session, every time: it is sent once more,
// as attempt 2, on a new session, with the same key (the server
// deduplicates it: one order), journaled with why that was safe; the
// second 404 is not followed by a third attempt, and the call waits for the
// operator. An operator's retry sends it once, and no automatic resend
// follows that one either.
func TestHTTPRunThen404WithKeyResentOnce(t *testing.T) {
	w := newWorld(t, t.TempDir())
	gw := newRefusingGateway(t, startHTTPDemo(t, w, "--protocols", "2025-11-25"), http.StatusNotFound, false)
	r := w.run("call", "create_order", "--args", `{"item":"widget","quantity":1,"buyer":"bob"}`, "--url", gw.url)
	wantExit(t, r, exitUnknown, "a keyed create_order the server ran and answered 404, twice")
	out := parseCallOut(t, r)
	if out.State != "unknown" || !strings.Contains(out.Reason, "it says it did not run this") {
		t.Errorf("call printed %s (%q), want unknown with what the server said", out.State, out.Reason)
	}
	noFalseNotRun(t, "call", r.stdout+r.stderr)
	ran, sessions := gw.ran()
	if ran != 2 {
		t.Fatalf("the server got create_order %d times, want 2: the first and its one resend", ran)
	}
	if sessions[0] == "" || sessions[1] == "" || sessions[0] == sessions[1] {
		t.Errorf("session ids %q, want two different ones: the resend goes on a new session", sessions)
	}
	if n := ordersFor(t, w.db(), out.Key); n != 1 {
		t.Errorf("%d orders for the key, want 1: the server deduplicated the resend", n)
	}
	c := w.show(out.ID)
	if len(c.Attempts) != 2 {
		t.Fatalf("%d attempts, want 2: %+v", len(c.Attempts), c.Attempts)
	}
	const safe = "the tool takes the idempotency key, so the server deduplicates a second run"
	a1, a2 := c.Attempts[0], c.Attempts[1]
	if a1.Outcome != "unknown" || !strings.Contains(a1.Reason, "the server answered 404 for the session: it says it did not run this") ||
		!strings.Contains(a1.Reason, "sent once more as attempt 2, on a new session, with the same key") || !strings.Contains(a1.Reason, safe) {
		t.Errorf("attempt 1: %s %q, want unknown, what the server said, and why it was sent once more", a1.Outcome, a1.Reason)
	}
	if a2.Outcome != "unknown" || a2.Session <= a1.Session || !strings.Contains(a2.Reason, "no further resend") {
		t.Errorf("attempt 2: %s on session %d (attempt 1 on %d) %q, want unknown on a newer session, no further resend",
			a2.Outcome, a2.Session, a1.Session, a2.Reason)
	}
	s := w.run("show", strconv.FormatInt(out.ID, 10))
	if !strings.Contains(s.stdout, safe) {
		t.Errorf("show does not say why the write was sent once more:\n%s", s.stdout)
	}
	noFalseNotRun(t, "show", s.stdout)

	r = w.run("retry", strconv.FormatInt(out.ID, 10))
	wantExit(t, r, exitUnknown, "the operator's retry, answered 404 again")
	if ran, _ := gw.ran(); ran != 3 {
		t.Errorf("after the retry the server got create_order %d times, want 3: the retry once, no resend after it", ran)
	}
	if c := w.show(out.ID); len(c.Attempts) != 3 || c.State != "unknown" {
		t.Errorf("after the retry: %s with %d attempts, want unknown with 3", c.State, len(c.Attempts))
	}
}

// 400 and 401 to a create_order the server ran: one execution, one
// attempt, the call unknown with what the server said, never "not sent" or
// "not executed"; a 401 still says to log in, and exits 3 as any unknown
// outcome does (a 401 at the start, with nothing sent, is exit 5).
func TestHTTPRunThen400Or401IsUnknown(t *testing.T) {
	for _, c := range []struct {
		status int
		exit   int
	}{
		{http.StatusBadRequest, exitUnknown},
		{http.StatusUnauthorized, exitUnknown},
	} {
		t.Run(strconv.Itoa(c.status), func(t *testing.T) {
			w := newWorld(t, t.TempDir())
			gw := newRefusingGateway(t, startHTTPDemo(t, w), c.status, false)
			r := w.run("call", "create_order", "--args", `{"item":"widget","quantity":1,"buyer":"bob"}`, "--url", gw.url)
			wantExit(t, r, c.exit, "a create_order the server ran and answered "+strconv.Itoa(c.status))
			said := "the server answered " + strconv.Itoa(c.status) + ": it says it did not run this"
			if !strings.Contains(r.stderr, said) || !strings.Contains(r.stderr, "unknown") {
				t.Errorf("stderr does not say the call is unknown, with what the server said:\n%s", r.stderr)
			}
			if c.status == http.StatusUnauthorized && !strings.Contains(r.stderr, "mcp-confirm login --url "+gw.url) {
				t.Errorf("a 401 does not say to log in:\n%s", r.stderr)
			}
			noFalseNotRun(t, "call", r.stdout+r.stderr)
			if ran, _ := gw.ran(); ran != 1 || totalOrders(t, w.db()) != 1 {
				t.Fatalf("the server ran create_order %d times (%d orders), want once", ran, totalOrders(t, w.db()))
			}
			calls := w.list()
			if len(calls) != 1 || calls[0].State != "unknown" || calls[0].Reason != said {
				t.Fatalf("journal: %+v, want one call, unknown (%q)", calls, said)
			}
			if got := w.show(calls[0].ID); len(got.Attempts) != 1 || got.Attempts[0].Outcome != "unknown" {
				t.Errorf("attempts %+v, want one, unknown: never resent", got.Attempts)
			}
			s := w.run("show", strconv.FormatInt(calls[0].ID, 10))
			noFalseNotRun(t, "show", s.stdout)
		})
	}
}
