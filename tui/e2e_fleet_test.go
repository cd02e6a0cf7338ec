package tui

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcp-confirm/mcp-confirm/internal/npmfixture"
)

// The console over a host config naming three servers, on the real binary
// in a real terminal (issue 21, "One console, all servers"): shop and
// warehouse are demo servers over their own orders files, everything is
// the TypeScript SDK's reference server from npm. An order is lost on
// each demo server (made by the CLI); in the console the operator sees
// both with the three servers in the status bar, none started, queries
// both at once (S) and accepts what each server's own find_orders found
// (A y), then makes a new call on everything (c, server, tool, form). The
// journal then holds each decision on its own call, with evidence from
// that call's own server, and each demo server holds one order.
func TestEndToEndFleetInTmux(t *testing.T) {
	if _, err := exec.LookPath("tmux"); err != nil && os.Getenv("CI") != "true" {
		t.Skip("tmux is not installed")
	}
	everything := npmfixture.Bin(t, "mcp-server-everything")
	bin := buildBinary(t, "../cmd/mcp-confirm", "mcp-confirm")
	dir := t.TempDir()
	journal, config, policy := filepath.Join(dir, "journal.db"), filepath.Join(dir, "mcp.json"), filepath.Join(dir, "policy.toml")
	orders := map[string]string{"shop": filepath.Join(dir, "shop.db"), "warehouse": filepath.Join(dir, "warehouse.db")}
	servers := map[string]any{"everything": map[string]any{"command": "node", "args": []string{everything, "stdio"}}}
	for name, db := range orders {
		servers[name] = map[string]any{"command": bin, "args": []string{"demo-server", "--db", db, "--hang-after-commit", "1"}}
	}
	b, _ := json.Marshal(map[string]any{"mcpServers": servers})
	if err := os.WriteFile(config, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(policy, []byte("[tools.create_order]\nquery_tool = \"find_orders\"\nquery_args = { idempotency_key = \"{key}\" }\n"+
		"[tools.echo]\nkind = \"write\" # so the new call is journaled\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	// 1. A lost order on each demo server, by the CLI. The buyers differ,
	// so each query's evidence says whose order it found.
	lost := func(server, buyer string) (id int64, key string) {
		out, err := exec.Command(bin, "call", "create_order", "--db", journal, "--config", config, "--server", server,
			"--timeout", "1s", "--args", fmt.Sprintf(`{"item":"widget","quantity":2,"buyer":%q}`, buyer)).Output()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 3 {
			t.Fatalf("create_order on %s: want exit 3 (unknown), got %v\n%s", server, err, out)
		}
		var res struct {
			ID  int64  `json:"id"`
			Key string `json:"key"`
		}
		if err := json.Unmarshal(out, &res); err != nil {
			t.Fatalf("call output %q: %v", out, err)
		}
		return res.ID, res.Key
	}
	shopID, shopKey := lost("shop", "alice") // the oldest: the unknown tab's first row
	bobID, bobKey := lost("warehouse", "bob")
	carolID, carolKey := lost("warehouse", "carol")

	// 2. The console over the whole config: no server runs until used,
	// and each row names its call's server.
	tm := newTerm(t, 120, 34, []string{"TERM=xterm-256color"}, bin, "--db", journal, "--config", config, "--policy", policy)
	tm.waitFor("3 unknown", "3 servers: everything not started · shop not started · warehouse not started", "SERVER", "shop", "warehouse")

	// 3. r on alice's order: shop, its own server, is started and lists
	// its tools first; create_order declares idempotency_key there, so
	// the dialog says a retry is safe (no "retry" to type). The retry goes
	// to shop, which replays the order it committed; warehouse is not
	// started for it.
	tm.press("r")
	tm.waitFor("Yes, retry", "server   shop", "declares idempotency_key")
	tm.press("y")
	tm.waitFor("replayed by the server")
	tm.waitFor("2 unknown", "everything not started · shop running · warehouse not started")

	// 4. The two left, queried at once (each on its own server) and
	// accepted in one dialog.
	tm.press("*")
	tm.waitFor(fmt.Sprintf("%s 2 selected", GlyphPicked))
	tm.press("S")
	tm.waitFor("Queried 2 calls", "found 2, not found 0, query failed 0, no query configured 0")
	tm.press("A")
	tm.waitFor("Mark 2 found calls applied?", "Yes, mark them applied")
	tm.press("y")
	tm.waitFor("marked 2 calls applied, each with its query's evidence")
	tm.press("Escape")
	tm.waitFor("0 unknown", "everything not started · shop running · warehouse running")

	// 5. A new call on everything: the server first, then its tool.
	tm.press("c")
	tm.waitFor("Pick the server for the new call", "› everything")
	tm.press("Enter")
	tm.waitFor("Pick the tool to call on everything", "› W write echo")
	// The policy's create_order section is shop's and warehouse's: over
	// several servers it is no problem that everything lacks the tool.
	if s := tm.screen(); strings.Contains(s, `lists no tool "create_order"`) {
		t.Errorf("everything's tools warn of another server's policy section:\n%s", s)
	}
	tm.press("Enter")
	tm.waitFor(`"message": ""`)
	tm.press("Up", "End", "Left") // between the quotes of the argument template
	tm.run("send-keys", "-t", "app", "-l", "hello from the fleet")
	tm.press("C-s")
	tm.waitFor("hello from the fleet", "everything running")
	tm.press("q")
	if code := tm.exitCode(); code != "0" {
		t.Fatalf("console exit status %s", code)
	}

	// 6. The journal: each decision on its own call, with what that call's
	// own server said.
	type shown struct {
		State       string `json:"state"`
		Key         string `json:"key"`
		ServerAlias string `json:"server_alias"`
		Tool        string `json:"tool"`
		Attempts    []struct {
			Outcome string `json:"outcome"`
		} `json:"attempts"`
		Decisions []struct {
			Action   string          `json:"action"`
			Evidence json.RawMessage `json:"evidence"`
		} `json:"decisions"`
	}
	show := func(id int64) shown {
		out, err := exec.Command(bin, "show", fmt.Sprint(id), "--db", journal, "--json").Output()
		if err != nil {
			t.Fatalf("show %d: %v", id, err)
		}
		var c shown
		if err := json.Unmarshal(out, &c); err != nil {
			t.Fatalf("show output %q: %v", out, err)
		}
		return c
	}
	actions := func(c shown) string {
		var a []string
		for _, d := range c.Decisions {
			a = append(a, d.Action)
		}
		return strings.Join(a, " ")
	}
	if c := show(shopID); c.State != "succeeded" || c.Key != shopKey || len(c.Attempts) != 2 || actions(c) != "retry" {
		t.Errorf("alice's order on shop: %s, %d attempts, decisions %q; want succeeded by its retry", c.State, len(c.Attempts), actions(c))
	}
	for _, w := range []struct {
		id         int64
		key, buyer string
	}{{bobID, bobKey, "bob"}, {carolID, carolKey, "carol"}} {
		c := show(w.id)
		if c.State != "applied" || c.Key != w.key || actions(c) != "query mark" || c.ServerAlias != "warehouse" {
			t.Errorf("%s's order: %s on %q, decisions %q; want applied on warehouse after its query", w.buyer, c.State, c.ServerAlias, actions(c))
			continue
		}
		// The query ran on warehouse: its find_orders found this order.
		if ev := string(c.Decisions[0].Evidence); !strings.Contains(ev, fmt.Sprintf(`\"buyer\":\"%s\"`, w.buyer)) && !strings.Contains(ev, fmt.Sprintf(`"buyer":"%s"`, w.buyer)) {
			t.Errorf("%s's query evidence does not name the order: %s", w.buyer, ev)
		}
	}
	out, err := exec.Command(bin, "list", "--db", journal, "--tool", "echo", "--json").Output()
	if err != nil {
		t.Fatalf("list --tool echo: %v", err)
	}
	var echoes []shown
	if err := json.Unmarshal(out, &echoes); err != nil || len(echoes) != 1 || echoes[0].ServerAlias != "everything" || echoes[0].State != "succeeded" {
		t.Errorf("the new call on everything: %s (%v); want one echo, succeeded, on everything", out, err)
	}

	// 7. The business systems: one order per lost call, each on its own
	// server, none made twice.
	if n, m := countOrders(t, orders["shop"]), countOrders(t, orders["warehouse"]); n != 1 || m != 2 {
		t.Fatalf("orders: shop %d, warehouse %d; want 1 and 2", n, m)
	}
}
