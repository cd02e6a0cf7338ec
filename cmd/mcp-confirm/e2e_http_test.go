package main

import (
	"context"
	"net"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// startHTTPDemo runs the demo server over Streamable HTTP on a loopback
// port of its own choosing, as a real process, and returns its URL. The
// server is stopped at the end of the test.
func startHTTPDemo(t *testing.T, w *world, flags ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	args := append([]string{"demo-server", "--http", "127.0.0.1:0", "--db", w.demoDB}, flags...)
	cmd := e2eCmd(ctx, w.bin, w.dir, args...)
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
	})
	listening := regexp.MustCompile(`msg="demo server listening" url=(\S+)`)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if m := listening.FindStringSubmatch(stderr.String()); m != nil {
			return m[1]
		}
		if time.Now().After(deadline) {
			t.Fatalf("the HTTP demo server did not start:\n%s", stderr.String())
		}
	}
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
