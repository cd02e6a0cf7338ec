package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestE2EAutomaticQuery: with a query configured in the policy, a write
// that becomes unknown is queried once, automatically (a read, so safe);
// the evidence and the proposal are stored and the call stays unknown for
// the operator. With auto_resolve, a definite match marks it applied.
func TestE2EAutomaticQuery(t *testing.T) {
	const query = `[tools.create_order]
query_tool = "find_orders"
query_args = { idempotency_key = "{key}" }
`
	for _, tc := range []struct {
		name   string
		extra  string
		code   int
		state  string
		action []string
	}{
		{"proposal only", "", exitUnknown, "unknown", []string{"query"}},
		{"auto_resolve", "auto_resolve = true\n", exitOK, "applied", []string{"query", "mark"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, t.TempDir())
			db := w.db()
			policy := filepath.Join(w.dir, "policy.toml")
			if err := os.WriteFile(policy, []byte(query+tc.extra), 0o600); err != nil {
				t.Fatal(err)
			}
			r := w.call(`{"item":"widget","quantity":1,"buyer":"bob"}`, []string{"--timeout", "2s", "--policy", policy}, "--hang-after-commit", "1")
			wantExit(t, r, tc.code, "lost response with a query in the policy")
			out := parseCallOut(t, r)
			c := w.show(out.ID)
			if c.State != tc.state || c.Proposal == "" {
				t.Fatalf("want %s with a proposal, got %s (proposal %q)", tc.state, c.State, c.Proposal)
			}
			if have := strings.Join(actionsOf(c), ","); have != strings.Join(tc.action, ",") {
				t.Fatalf("decisions %s, want %v", have, tc.action)
			}
			q := c.Decisions[0]
			if !strings.Contains(q.Operator, "automatic") || !strings.Contains(string(q.Evidence), out.Key) {
				t.Errorf("the automatic query should be recorded as such, with the order as evidence: %+v", q)
			}
			if got := w.sent("create_order"); got[out.Key] != 1 {
				t.Fatalf("the write was resent: %v", got)
			}
			if got := w.sent("find_orders"); got[""] != 1 {
				t.Errorf("want exactly one find_orders (the automatic query), wire has %v", got)
			}
			if n := ordersFor(t, db, out.Key); n != 1 {
				t.Fatalf("want 1 order, got %d", n)
			}
			if tc.state == "unknown" {
				// The operator's own query uses the policy's query_tool.
				// No server named: the query goes to the call's own server.
				r := w.run("query", strconv.FormatInt(out.ID, 10), "--policy", policy)
				wantExit(t, r, exitOK, "query from the policy")
				if c := w.show(out.ID); len(c.Decisions) != 2 || c.State != "unknown" {
					t.Errorf("after the operator's query: %s, %d decisions", c.State, len(c.Decisions))
				}
			}
		})
	}
}

// TestE2EPolicyCheck: a policy whose sections do not match the server's
// tools is reported by policy check (exit 2, every problem, the nearest
// name), warned of by call and tools (which still work), and a policy
// that matches passes (exit 0).
func TestE2EPolicyCheck(t *testing.T) {
	w := newWorld(t, t.TempDir())
	write := func(name, text string) string {
		p := filepath.Join(w.dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	bad := write("bad.toml", "[tools.create_ordr]\nredact = [\"card\"]\n\n[tools.create_order]\nquery_tool = \"find_order\"\n\n[tools.get_budget]\nkind = \"read\"\n")
	good := write("good.toml", "[tools.create_order]\nquery_tool = \"find_orders\"\n")
	zero := write("zero.toml", "[defaults]\nread_attempts = 0\n")

	r := w.run(append([]string{"policy", "check", "--policy", bad}, w.server()...)...)
	wantExit(t, r, exitBadInput, "policy check of a bad policy")
	for _, want := range []string{
		`[tools.create_ordr]: the server lists no tool "create_ordr", so this section never applies (did you mean create_order?)`,
		`[tools.create_order]: query_tool "find_order" is not a tool of the server (did you mean find_orders?)`,
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("policy check does not say %q:\n%s", want, r)
		}
	}
	if strings.Count(strings.TrimSpace(r.stdout), "\n") != 1 {
		t.Errorf("want exactly two problems:\n%s", r.stdout)
	}
	r = w.run(append([]string{"policy", "check", "--policy", good}, w.server()...)...)
	wantExit(t, r, exitOK, "policy check of a good policy")
	r = w.run(append([]string{"policy", "check", "--policy", zero}, w.server()...)...)
	wantExit(t, r, exitBadInput, "policy check of read_attempts = 0")
	if !strings.Contains(r.stderr, "read_attempts must be at least 1") {
		t.Errorf("read_attempts = 0 not named:\n%s", r)
	}

	r = w.call(`{"item":"widget","quantity":1,"buyer":"bob"}`, []string{"--policy", bad})
	wantExit(t, r, exitOK, "a call under a policy with problems")
	if !strings.Contains(r.stderr, "warning: policy [tools.create_ordr]") || !strings.Contains(r.stderr, "did you mean create_order?") {
		t.Errorf("call does not warn of the unknown section:\n%s", r.stderr)
	}
	r = w.run(append([]string{"tools", "--policy", bad}, w.server()...)...)
	wantExit(t, r, exitOK, "tools under a policy with problems")
	if !strings.Contains(r.stderr, "warning: policy [tools.create_ordr]") {
		t.Errorf("tools does not warn of the unknown section:\n%s", r.stderr)
	}
}
