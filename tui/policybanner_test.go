package tui

import (
	mrand "math/rand/v2"
	"strings"
	"testing"

	"github.com/charmbracelet/x/exp/golden"

	"github.com/mcp-confirm/mcp-confirm/guard"
)

// withPolicy puts the env's guard and console under the policy text.
func (e *env) withPolicy(t *testing.T, text string) {
	t.Helper()
	pol, err := guard.ParsePolicy(text, "test policy")
	if err != nil {
		t.Fatal(err)
	}
	var seed [32]byte
	copy(seed[:], "mcp-confirm tui golden key seed!")
	e.policy = pol
	e.g = guard.New(e.j, e.srv, guard.Options{Policy: pol, Operator: "ops", Keys: guard.SeededKeys(mrand.NewChaCha8(seed)), Server: testIdentity})
}

// A policy section for a tool the server does not list (and the other
// problems guard.Policy.Check finds) shows as a banner above the calls
// once the tools are listed, so a typo does not silently leave its redact,
// kind and query unused. It takes at most three lines; more problems are
// counted, and the screen keeps the rest of the window.
func TestGoldenPolicyBanner(t *testing.T) {
	for _, tc := range []struct {
		name, policy string
		w, h         int
		want         []string
	}{
		{"one_80x24", testPolicy + `
[tools.create_ordr]
redact = ["buyer"]
`, 80, 24, []string{`⚠ policy [tools.create_ordr]: the server lists no tool "create_ordr"`, "(did you mean create_order?)"}},
		{"two_80x24", `
[tools.create_order]
query_tool = "find_order"

[tools.send_mail]
kind = "write"

[tools.find_orders]
kind = "write"
`, 80, 24, []string{`⚠ policy [tools.create_order]: query_tool "find_order" is not a tool`, "(did you mean find_orders?) (+1 more: mcp-confirm policy check lists them all)"}},
		{"one_120x30", testPolicy + `
[tools.create_ordr]
redact = ["buyer"]
`, 120, 30, []string{"(did you mean create_order?)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.withPolicy(t, tc.policy)
			e.seed()
			m := e.model(tc.w, tc.h)
			v := m.View()
			checkFits(t, v, tc.w, tc.h)
			for _, w := range tc.want {
				if !strings.Contains(flat(v), w) {
					t.Errorf("no %q in the view:\n%s", w, v)
				}
			}
			golden.RequireEqual(t, v)
		})
	}
}

// A policy that fits the server's tools shows no banner; a listing that
// fixes the problem (the server now has the tool) takes the banner away
// and gives its lines back to the screen.
func TestPolicyBannerFollowsTheToolsListed(t *testing.T) {
	e := newEnv(t)
	e.seed()
	m := e.model(80, 24)
	if v := m.View(); strings.Contains(v, "⚠ policy") {
		t.Fatalf("a banner under a policy that fits the tools:\n%s", v)
	}
	full := m.bodyHeight()

	e.withPolicy(t, testPolicy+"\n[tools.refund]\nkind = \"write\"\n")
	m = e.model(80, 24)
	if v := flat(m.View()); !strings.Contains(v, `⚠ policy [tools.refund]: the server lists no tool "refund"`) {
		t.Fatalf("no banner for [tools.refund]:\n%s", m.View())
	}
	n := len(m.policyBanner())
	if got := m.bodyHeight(); n == 0 || got != full-n {
		t.Errorf("body height with a %d-line banner: %d, want %d", n, got, full-n)
	}

	e.srv.tools = append(e.srv.tools, e.srv.tools[1]) // a tool named refund appears
	e.srv.tools[len(e.srv.tools)-1].Name = "refund"
	m = settle(t, m, listToolsCmd("", m.sh.opts.Engine, m.sh.opts.Policy))
	if v := m.View(); strings.Contains(v, "⚠ policy") {
		t.Errorf("the banner stays after the server lists refund:\n%s", v)
	}
	if got := m.bodyHeight(); got != full {
		t.Errorf("body height after the banner went: %d, want %d", got, full)
	}
}
