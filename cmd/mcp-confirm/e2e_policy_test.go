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
