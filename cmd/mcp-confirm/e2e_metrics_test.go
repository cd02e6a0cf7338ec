package main

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// proxy --metrics: a host's read, a write that succeeds and a write whose
// answer never comes (the demo hangs after committing it) are counted apart
// (a timeout is not a failure), the journal's unknown call is a gauge with
// its age, and the journal's commits and the session are there too. The
// endpoint is on loopback, at the address the log names.
func TestProxyMetrics(t *testing.T) {
	w := newWorld(t, t.TempDir())
	logPath := filepath.Join(w.dir, "proxy.log")
	args := append([]string{"proxy", "--db", w.journal, "--timeout", "1s", "--log", logPath, "--metrics", ":0"},
		w.server("--hang-after-commit", "1")...)
	host := startHost(t, childEnv(w.dir), w.bin, args...)

	hostCall(t, host, "create_order", map[string]any{"item": "widget", "quantity": 1, "buyer": "alice"}) // hangs: unknown
	if res := hostCall(t, host, "create_order", map[string]any{"item": "widget", "quantity": 1, "buyer": "bob"}); res.IsError {
		t.Fatalf("second create_order: %+v", res)
	}
	if res := hostCall(t, host, "find_orders", map[string]any{"buyer": "bob"}); res.IsError {
		t.Fatalf("find_orders: %+v", res)
	}

	var endpoint string
	addr := regexp.MustCompile(`metrics_url=(http://127\.0\.0\.1:\d+/metrics)`)
	for deadline := time.Now().Add(10 * time.Second); endpoint == ""; time.Sleep(20 * time.Millisecond) {
		b, _ := os.ReadFile(logPath)
		if m := addr.FindSubmatch(b); m != nil {
			endpoint = string(m[1])
		} else if time.Now().After(deadline) {
			t.Fatalf("the log names no loopback metrics URL:\n%s", b)
		}
	}
	resp, err := http.Get(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	scrape := string(body)
	for _, want := range []string{
		`mcp_confirm_calls_total{kind="write",outcome="timeout",server="mcp-confirm-demo",tool="create_order"} 1`,
		`mcp_confirm_calls_total{kind="write",outcome="succeeded",server="mcp-confirm-demo",tool="create_order"} 1`,
		`mcp_confirm_calls_total{kind="read",outcome="succeeded",server="mcp-confirm-demo",tool="find_orders"} 1`,
		`mcp_confirm_journal_calls{state="unknown"} 1`,
		`mcp_confirm_journal_calls{state="succeeded"} 1`,
		`mcp_confirm_unknown_calls{server="mcp-confirm-demo",tool="create_order"} 1`,
		`mcp_confirm_sessions_started_total 1`,
	} {
		if !strings.Contains(scrape, want+"\n") {
			t.Errorf("the scrape has no line %q", want)
		}
	}
	for _, re := range []string{
		`(?m)^mcp_confirm_unknown_oldest_age_seconds\{server="mcp-confirm-demo",tool="create_order"\} [0-9.e+-]+$`,
		`(?m)^mcp_confirm_journal_commit_seconds_count\{sync="full"\} [1-9][0-9]*$`,
		`(?m)^mcp_confirm_call_duration_seconds_count\{kind="write"\} 2$`,
	} {
		if !regexp.MustCompile(re).MatchString(scrape) {
			t.Errorf("the scrape matches no %s", re)
		}
	}
	if t.Failed() {
		t.Logf("scrape:\n%s", scrape)
	}

	// An address that is not HOST:PORT: exit 2, before a journal is made.
	other := filepath.Join(w.dir, "other.db")
	r := cliIn(t, w.bin, w.dir, "", append([]string{"proxy", "--db", other, "--metrics", "9464"}, w.server()...)...)
	wantExit(t, r, exitBadInput, "--metrics 9464")
	if !strings.Contains(r.stderr, `--metrics "9464": want HOST:PORT`) {
		t.Errorf("stderr does not say what --metrics wants:\n%s", r.stderr)
	}
	if _, err := os.Stat(other); err == nil {
		t.Errorf("a journal was created for a proxy that refused its flags")
	}
}

// The console's own flags are checked before anything else: a bad
// --concurrency or --metrics is exit 2 with a line naming it, terminal or
// not, and no journal is made.
func TestConsoleFlagsBadInput(t *testing.T) {
	w := newWorld(t, t.TempDir())
	journal := filepath.Join(w.dir, "console.db")
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--concurrency", "0"}, "--concurrency 0: want 1 to 64"},
		{[]string{"tui", "--concurrency", "65"}, "--concurrency 65: want 1 to 64"},
		{[]string{"--metrics", "9464"}, `--metrics "9464"`},
	} {
		r := cliIn(t, w.bin, w.dir, "", append(append([]string{}, tt.args...), "--db", journal)...)
		wantExit(t, r, exitBadInput, strings.Join(tt.args, " "))
		if !strings.Contains(r.stderr, tt.want) {
			t.Errorf("%v: stderr does not say %q:\n%s", tt.args, tt.want, r.stderr)
		}
		if _, err := os.Stat(journal); err == nil {
			t.Fatalf("%v: a journal was made by a console that refused its flags", tt.args)
		}
	}
}
