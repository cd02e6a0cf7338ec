package tui

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// Bulk reconciliation on the real binary in a real terminal (issue 21):
// four write calls to demo servers lose their answers (three on the
// console's server, one on another); in the console the operator selects
// them with space, queries them all with S, reads the groups, and accepts
// the found group with A y. The journal then says applied, with the
// query's evidence, for each of the three, and nothing for the fourth.
func TestEndToEndBulkReconcileInTmux(t *testing.T) {
	if _, err := exec.LookPath("tmux"); err != nil && os.Getenv("CI") != "true" {
		t.Skip("tmux is not installed")
	}
	bin := buildBinary(t, "../cmd/mcp-confirm", "mcp-confirm")
	dir := t.TempDir()
	journal, demoDB, otherDB := filepath.Join(dir, "journal.db"), filepath.Join(dir, "demo.db"), filepath.Join(dir, "other.db")
	policy := filepath.Join(dir, "policy.toml")
	if err := os.WriteFile(policy, []byte("[tools.create_order]\nquery_tool = \"find_orders\"\nquery_args = { idempotency_key = \"{key}\" }\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	// 1. The unknown calls, made by the CLI as scripts would: each demo
	// server commits the order, then never answers. No policy here: the
	// calls are not queried as they become unknown.
	lost := func(db string, quantity int) (id int64, key string) {
		out, err := exec.Command(bin, "call", "create_order", "--db", journal, "--timeout", "1s",
			"--args", fmt.Sprintf(`{"item":"widget","quantity":%d,"buyer":"alice"}`, quantity),
			"--", bin, "demo-server", "--db", db, "--hang-after-commit", "1").Output()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 3 {
			t.Errorf("call %d: want exit 3 (unknown), got %v\n%s", quantity, err, out)
			return 0, ""
		}
		var res struct {
			ID    int64  `json:"id"`
			State string `json:"state"`
			Key   string `json:"key"`
		}
		if err := json.Unmarshal(out, &res); err != nil || res.State != "unknown" {
			t.Errorf("call output %q: %v", out, err)
		}
		return res.ID, res.Key
	}
	ids := make([]int64, 4)
	var wg sync.WaitGroup
	var mu sync.Mutex
	for i := range 3 {
		wg.Go(func() {
			id, _ := lost(demoDB, i+1)
			mu.Lock()
			ids[i] = id
			mu.Unlock()
		})
	}
	wg.Wait()
	ids[3], _ = lost(otherDB, 4) // on another demo server
	if t.Failed() {
		t.FailNow()
	}

	// 2. The console on the same journal and the first server.
	// With --metrics and --concurrency, the console's own flags: the
	// metrics are scraped after the bulk accept.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	metricsAddr := ln.Addr().String()
	ln.Close()
	tm := newTerm(t, 110, 32, []string{"TERM=xterm-256color"}, bin, "--db", journal, "--policy", policy,
		"--metrics", metricsAddr, "--concurrency", "2",
		"--", bin, "demo-server", "--db", demoDB, "--hang-after-commit", "1")
	tm.waitFor("create_order", "unknown 4", "mcp-confirm-demo running")
	for n := 1; n <= 4; n++ {
		tm.press("Space")
		tm.waitFor(fmt.Sprintf("%s %d selected", GlyphPicked, n))
	}
	tm.waitFor("S query 4 selected")
	tm.press("S")
	tm.waitFor("Queried 4 calls", "4/4", "found 3, not found 0, query failed 1, no query configured 0")
	tm.waitFor("orders: 1 (order_id")
	tm.press("A")
	tm.waitFor("Mark 3 found calls applied?", "calls 1–3 of 3", "Yes, mark them applied")
	tm.press("y")
	tm.waitFor("marked 3 calls applied, each with its query's evidence")
	scrape := scrapeMetrics(t, "http://"+metricsAddr+"/metrics")
	for _, want := range []string{`mcp_confirm_journal_calls{state="applied"} 3`, `mcp_confirm_journal_calls{state="unknown"} 1`,
		`mcp_confirm_sessions_started_total 1`, `mcp_confirm_journal_commit_seconds_count{sync="full"}`} {
		if !strings.Contains(scrape, want) {
			t.Errorf("the console's metrics lack %q:\n%s", want, scrape)
		}
	}
	tm.press("Down")
	tm.press("Down")
	tm.waitFor("query failed (1)", "was made on")
	tm.press("Escape")
	tm.waitFor("unknown 1")
	tm.press("q")
	if code := tm.exitCode(); code != "0" {
		t.Fatalf("console exit status %s", code)
	}

	// 3. The journal: the three found calls applied, each marked with the
	// evidence its query kept; the fourth unknown and untouched (its query
	// was refused before anything was asked: it was made on another server).
	for i, id := range ids {
		show, err := exec.Command(bin, "show", fmt.Sprint(id), "--db", journal, "--json").Output()
		if err != nil {
			t.Fatalf("show %d: %v", id, err)
		}
		var c struct {
			State     string `json:"state"`
			Decisions []struct {
				Action   string          `json:"action"`
				Note     string          `json:"note"`
				Evidence json.RawMessage `json:"evidence"`
			} `json:"decisions"`
		}
		if err := json.Unmarshal(show, &c); err != nil {
			t.Fatalf("show output %q: %v", show, err)
		}
		var actions []string
		var query, mark json.RawMessage
		var note string
		for _, d := range c.Decisions {
			actions = append(actions, d.Action)
			switch d.Action {
			case "query":
				query = d.Evidence
			case "mark":
				mark, note = d.Evidence, d.Note
			}
		}
		if i == 3 {
			if c.State != "unknown" || len(actions) != 0 {
				t.Errorf("call %d on the other server: %s, decisions %v", id, c.State, actions)
			}
			continue
		}
		if c.State != "applied" || strings.Join(actions, " ") != "query mark" || string(mark) != string(query) ||
			!strings.Contains(string(mark), `"order_id"`) || !strings.Contains(note, "the query found it (orders: 1 (order_id") {
			t.Errorf("call %d: %s, decisions %v, note %q, mark evidence %s", id, c.State, actions, note, mark)
		}
	}
	// 4. The business system: one order per call, none made twice.
	if n := countOrders(t, demoDB); n != 3 {
		t.Fatalf("the demo database holds %d orders, want 3", n)
	}
}

// scrapeMetrics GETs a Prometheus text page.
func scrapeMetrics(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("scrape %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape %s: status %d, %v", url, resp.StatusCode, err)
	}
	return string(b)
}
