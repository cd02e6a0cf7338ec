package guard

import (
	"reflect"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

func TestPolicyCheck(t *testing.T) {
	tools := []mcp.Tool{
		mcp.NewTool("create_order", mcp.WithString("item"), mcp.WithString("idempotency_key")),
		mcp.NewTool("find_orders", mcp.WithString("buyer"), mcp.WithReadOnlyHintAnnotation(true)),
		mcp.NewTool("cancel_order", mcp.WithString("order_id")),
		mcp.NewTool("refund", mcp.WithString("order_id")),
		{Name: "raw", InputSchema: mcp.ToolInputSchema{Type: "object"}},
	}
	cases := []struct {
		name, policy string
		want         []PolicyProblem
	}{
		{"all good", `
[tools.create_order]
query_tool = "find_orders"
key_arg = "idempotency_key"
redact = ["item"]`, nil},
		{"a typo of a tool", "[tools.create_ordr]\nredact = [\"card\"]\n", []PolicyProblem{{
			Section: "tools.create_ordr", Nearest: "create_order", Unlisted: true,
			Problem: `the server lists no tool "create_ordr", so this section never applies`}}},
		{"an unknown tool with nothing near", "[tools.ship_it]\nkind = \"write\"\n", []PolicyProblem{{
			Section: "tools.ship_it", Unlisted: true, Problem: `the server lists no tool "ship_it", so this section never applies`}}},
		{"a missing query tool", "[tools.create_order]\nquery_tool = \"find_order\"\n", []PolicyProblem{{
			Section: "tools.create_order", Nearest: "find_orders", Problem: `query_tool "find_order" is not a tool of the server`}}},
		{"a query tool that writes", "[tools.create_order]\nquery_tool = \"refund\"\n", []PolicyProblem{{
			Section: "tools.create_order",
			Problem: `query_tool "refund" is a write (its readOnlyHint is false): a query must only read; say kind = "read" in [tools.refund] if it does`}}},
		{"a query tool without annotations", "[tools.create_order]\nquery_tool = \"raw\"\n", []PolicyProblem{{
			Section: "tools.create_order",
			Problem: `query_tool "raw" is a write (no readOnlyHint says it only reads): a query must only read; say kind = "read" in [tools.raw] if it does`}}},
		{"a query tool the policy calls a read", "[tools.create_order]\nquery_tool = \"refund\"\n[tools.refund]\nkind = \"read\"\n", nil},
		{"a key_arg the tool does not take", "[tools.create_order]\nkey_arg = \"idempotency_kye\"\n", []PolicyProblem{{
			Section: "tools.create_order", Nearest: "idempotency_key",
			Problem: `key_arg "idempotency_kye" is not an argument of create_order: the key would go where the server does not look`}}},
		{"several, in section order", "[tools.zz]\n[tools.cancel_ordr]\n", []PolicyProblem{
			{Section: "tools.cancel_ordr", Nearest: "cancel_order", Unlisted: true, Problem: `the server lists no tool "cancel_ordr", so this section never applies`},
			{Section: "tools.zz", Unlisted: true, Problem: `the server lists no tool "zz", so this section never applies`}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := ParsePolicy(tc.policy, "p.toml")
			if err != nil {
				t.Fatal(err)
			}
			if got := p.Check(tools); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
	var none *Policy
	if got := none.Check(tools); got != nil {
		t.Errorf("no policy: %+v", got)
	}
}
