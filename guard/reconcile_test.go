package guard

import (
	"encoding/json"
	"testing"

	"github.com/mcp-confirm/mcp-confirm/pending"
)

func TestEvidenceSummary(t *testing.T) {
	for _, tc := range []struct {
		name string
		r    Result
		want string
	}{
		{"found", Result{State: pending.StateSucceeded, Result: json.RawMessage(
			`{"content":[],"structuredContent":{"orders":[{"order_id":17,"item":"widget"}],"note":"x"}}`)}, "orders: 1 (order_id 17)"},
		{"none", Result{State: pending.StateSucceeded, Result: json.RawMessage(`{"structuredContent":{"orders":[]}}`)}, "orders: 0"},
		{"no list", Result{State: pending.StateSucceeded, Result: json.RawMessage(`{"structuredContent":{"budget_left":3}}`)}, "no list in the answer"},
		{"text only", Result{State: pending.StateSucceeded, Result: json.RawMessage(`{"content":[{"type":"text","text":"one\norder"}]}`)},
			"no structured content: one order"},
		{"rpc error", Result{State: pending.StateFailed, Error: json.RawMessage(`{"code":-32601,"message":"no such\u001b[31m tool"}`)},
			"the read failed: no such tool"},
		{"tool error", Result{State: pending.StateFailed, Result: json.RawMessage(`{"isError":true,"content":[{"type":"text","text":"db down"}]}`)},
			"the read failed: db down"},
	} {
		if got := EvidenceSummary(tc.r); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
