package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcp-confirm/mcp-confirm/guard"
	"github.com/mcp-confirm/mcp-confirm/pending"
)

// TestStatsCheckLimits: stats --check with --max-unknown and
// --max-unknown-age, for cron and monitoring: one line per breach and exit
// 1; within the limits "journal ok" and exit 0.
func TestStatsCheckLimits(t *testing.T) {
	dir := t.TempDir()
	w := newWorld(t, dir)
	r := w.run("call", "get_budget", "--args", `{"buyer":"bob"}`) // a journal with no unknown call
	wantExit(t, r, 0, "a read on the built-in demo")
	r = w.run("stats", "--check", "--max-unknown", "0", "--max-unknown-age", "1m")
	wantExit(t, r, 0, "no unknown call")
	if strings.TrimSpace(r.stdout) != "journal ok" {
		t.Errorf("stdout %q, want journal ok", r.stdout)
	}

	// Three calls lost two hours ago, one just now.
	past := time.Now().Add(-2 * time.Hour)
	old := []seededCall{{key: "old-00000001", tool: "create_order"}, {key: "old-00000002", tool: "create_order"}, {key: "old-00000003", tool: "create_order"}}
	id := guard.ServerIdentity{Builtin: guard.BuiltinDemo, DemoDB: filepath.Join(dir, "demo.db")}.JSON()
	recordUnknownWith(t, w.journal, pending.Options{Now: func() time.Time { return past }}, "mcp-confirm-demo", id, old)
	recordUnknown(t, w.journal, "mcp-confirm-demo", id, []seededCall{{key: "new-00000001", tool: "create_order"}})

	r = w.run("stats", "--check", "--max-unknown", "2", "--max-unknown-age", "1h")
	wantExit(t, r, 1, "two breaches")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "4 unknown call(s), more than --max-unknown 2") ||
		!strings.Contains(lines[1], "has been unknown for 2h") || !strings.Contains(lines[1], "longer than --max-unknown-age 1h") {
		t.Errorf("want one line per breach:\n%s", r.stdout)
	}
	r = w.run("stats", "--check", "--max-unknown", "4", "--max-unknown-age", "3h")
	wantExit(t, r, 0, "within both limits")
	r = w.run("stats", "--check", "--max-unknown-age", "90m", "--json")
	wantExit(t, r, 1, "age breach, json")
	var out struct {
		OK       bool     `json:"ok"`
		Breaches []string `json:"breaches"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || out.OK || len(out.Breaches) != 1 {
		t.Errorf("--json: %+v (%v)\n%s", out, err, r.stdout)
	}
	r = w.run("stats", "--check") // the file only, as before
	wantExit(t, r, 0, "stats --check without limits")

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"stats", "--max-unknown", "3"}, "Add --check"},
		{[]string{"stats", "--check", "--max-unknown", "-1"}, "--max-unknown must be 0 or more"},
		{[]string{"stats", "--check", "--max-unknown-age", "0s"}, "--max-unknown-age must be more than 0"},
		{[]string{"stats", "--check", "--max-unknown-age", "soon"}, "invalid argument"},
	} {
		r := w.run(tc.args...)
		wantExit(t, r, 2, strings.Join(tc.args, " "))
		stderrLines(t, r, strings.Join(tc.args, " "))
		if !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%v: stderr should say %q:\n%s", tc.args, tc.want, r.stderr)
		}
	}
}
