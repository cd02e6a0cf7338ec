package proxy_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcp-confirm/mcp-confirm/pending"
	"github.com/mcp-confirm/mcp-confirm/proxy"
)

// The TypeScript SDK host, under the names real hosts send: the proxy's
// log says which host it recognised and which clock applies.
func TestTSHostDeadlineByName(t *testing.T) {
	for _, c := range []struct {
		client, want string
	}{
		{"claude-ai", `host="Claude Desktop" client=claude-ai host_deadline=4m0s`},
		{"gemini-cli-mcp-client", `host="Gemini CLI" client=gemini-cli-mcp-client host_deadline=10m0s`},
		{"claude-code", `host="Claude Code" client=claude-code host_deadline=none`},
		{"ts-sdk-host", `host="not recognised" client=ts-sdk-host host_deadline=1m0s`},
	} {
		t.Run(c.client, func(t *testing.T) {
			dir := t.TempDir()
			args := append(proxyArgs(filepath.Join(dir, "journal.db"), "--"), bin, "demo-server", "--db", filepath.Join(dir, "demo.db"))
			run := tsHostWith(t, map[string]any{"clientName": c.client}, bin, args, step{"op": "listTools"})
			line := clockLine(t, run.stderr)
			if !strings.Contains(line, c.want) {
				t.Errorf("write clock line %q does not say %q", line, c.want)
			}
		})
	}
}

// clockLine is the proxy's one "write clock" line in a log.
func clockLine(t *testing.T, log string) string {
	t.Helper()
	var found []string
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, `msg="write clock"`) {
			found = append(found, l)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d write clock lines in the log, want 1:\n%s", len(found), log)
	}
	return found[0]
}

// An mcp-go host (it probes server/discover before initialize, so it names
// itself on its second line) recognised by name: goose's 300 s deadline
// gives a 4 min write clock.
func TestGoHostDeadlineByName(t *testing.T) {
	h := startProxyAs(t, "goose", demoSpec(t), nil)
	if _, err := h.call(context.Background(), "find_orders", map[string]any{"buyer": "alice"}); err != nil {
		t.Fatal(err)
	}
	line := clockLine(t, h.logs.String())
	for _, want := range []string{`host=goose`, `host_deadline=5m0s`, `write_timeout=4m0s`, `max_total=4m30s`} {
		if !strings.Contains(line, want) {
			t.Errorf("write clock line %q does not say %s", line, want)
		}
	}
}

// --host-timeout fits the clock under the host's own deadline, and that is
// the clock a lost write ends on: unknown at 80 % of 2 s, long before the
// 50 s of a host the proxy does not know.
func TestHostTimeoutSetsTheWriteClock(t *testing.T) {
	h := startProxy(t, demoSpec(t, "--hang-after-commit", "1"), func(o *proxy.Options) { o.HostTimeout = 2 * time.Second })
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second) // a liveness bound: the unknown host's clock is 50 s
	defer cancel()
	r, err := h.call(ctx, "create_order", order)
	if err != nil {
		t.Fatalf("create_order: %v", err)
	}
	st := status(t, r)
	if st["mcp-confirm"] != "unknown" {
		t.Fatalf("want the unknown answer, got %v %q", st, text(r))
	}
	c := getCall(t, h.journal, int64(st["call_id"].(float64)))
	if c.State != pending.StateUnknown || c.Reason != "idle timeout" {
		t.Fatalf("journal: %s %q, want unknown, idle timeout", c.State, c.Reason)
	}
	line := clockLine(t, h.logs.String())
	for _, want := range []string{`set_by=--host-timeout`, `write_timeout=1.6s`, `max_total=1.8s`} {
		if !strings.Contains(line, want) {
			t.Errorf("write clock line %q does not say %s", line, want)
		}
	}
}

// A --timeout that the host would not wait for is said on the log.
func TestClockPastTheHostIsWarned(t *testing.T) {
	h := startProxyAs(t, "codex-mcp-client", demoSpec(t), func(o *proxy.Options) { o.Timeout = 90 * time.Second })
	if _, err := h.call(context.Background(), "find_orders", map[string]any{"buyer": "alice"}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(h.logs.String(), "the host gives up before the proxy answers an unknown write") {
		t.Errorf("no warning that Codex's 60 s is shorter than a 90 s --timeout:\n%s", h.logs.String())
	}
}
