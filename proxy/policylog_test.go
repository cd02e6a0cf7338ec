package proxy_test

import (
	"strings"
	"testing"

	"github.com/mcp-confirm/mcp-confirm/guard"
	"github.com/mcp-confirm/mcp-confirm/proxy"
)

// At start the proxy says on its log which parts of the policy will not
// apply to the server's tools (guard.Policy.Check), as call and tools do
// on stderr: a typo in a section name must not silently leave its redact,
// kind and query unused. A policy that fits says nothing.
func TestProxyLogsPolicyProblemsAtStart(t *testing.T) {
	for _, tc := range []struct {
		name, policy string
		want         []string // each a substring of one log line
	}{
		{"unknown tool", "[tools.create_ordr]\nredact = [\"buyer\"]\n", []string{
			`section=tools.create_ordr problem="the server lists no tool \"create_ordr\", so this section never applies" did_you_mean=create_order`}},
		{"query_tool missing and a write", "[tools.create_order]\nquery_tool = \"find_order\"\n\n[tools.get_budget]\nquery_tool = \"create_order\"\n", []string{
			`section=tools.create_order problem="query_tool \"find_order\" is not a tool of the server" did_you_mean=find_orders`,
			`section=tools.get_budget problem="query_tool \"create_order\" is a write`}},
		{"fits", "[tools.create_order]\nquery_tool = \"find_orders\"\nquery_args = { idempotency_key = \"{key}\" }\n", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pol, err := guard.ParsePolicy(tc.policy, "test policy")
			if err != nil {
				t.Fatal(err)
			}
			h := startProxy(t, demoSpec(t), func(o *proxy.Options) { o.Policy = pol })
			logs := h.logs.String() // the tools are listed before initialize is answered
			var lines []string
			for _, l := range strings.Split(logs, "\n") {
				if strings.Contains(l, "msg=\"policy: ") {
					lines = append(lines, l)
				}
			}
			if len(lines) != len(tc.want) {
				t.Fatalf("%d policy lines in the log, want %d:\n%s", len(lines), len(tc.want), logs)
			}
			for i, w := range tc.want {
				if !strings.Contains(lines[i], "level=WARN") || !strings.Contains(lines[i], w) {
					t.Errorf("policy line %d:\n got %s\nwant a WARN with %s", i, lines[i], w)
				}
			}
		})
	}
}
