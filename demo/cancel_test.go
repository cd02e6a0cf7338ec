package demo_test

import (
	"path/filepath"
	"testing"

	"github.com/mcp-confirm/mcp-confirm/idempotency"
)

// cancel_order undoes an order by its key: the order is marked cancelled,
// the budget refunded once; a resend under the cancel's own key replays it,
// a second cancel of the same order and a cancel of a key that made no
// order are definite failures that change nothing.
func TestCancelOrderByKey(t *testing.T) {
	db := filepath.Join(t.TempDir(), "demo.db")
	p := startDemo(t, db)
	const orderKey, cancelKey = "01JCANCELORDER00000000001", "01JCANCELCANCEL0000000001"

	if res := p.mustCall("create_order", order, orderKey); res.IsError {
		t.Fatalf("create_order: %v", res.Content)
	}
	if got := budget(t, p, "alice"); got != 950 {
		t.Fatalf("alice's budget after the order %v, want 950", got)
	}
	res := p.mustCall("cancel_order", map[string]any{"order_key": orderKey}, cancelKey)
	sc := structured(t, res)
	if res.IsError || sc["cancelled"] != true || sc["refunded"] != float64(50) || sc["budget_left"] != float64(1000) {
		t.Fatalf("cancel_order: isError=%v %v, want cancelled with 50 refunded", res.IsError, sc)
	}
	found := structured(t, p.mustCall("find_orders", map[string]any{"idempotency_key": orderKey}, ""))["orders"].([]any)
	if len(found) != 1 || found[0].(map[string]any)["cancelled_at"] == nil {
		t.Fatalf("find_orders after the cancel: %v, want one order with cancelled_at", found)
	}

	res = p.mustCall("cancel_order", map[string]any{"order_key": orderKey}, cancelKey)
	if replayed, _ := metaBool(res, idempotency.MetaReplayed); res.IsError || !replayed {
		t.Errorf("resend of the cancel: isError=%v replayed=%v, want the first result replayed", res.IsError, replayed)
	}
	res = p.mustCall("cancel_order", map[string]any{"order_key": orderKey}, "01JCANCELCANCEL0000000002")
	if sc := structured(t, res); !res.IsError || sc["error"] != "already_cancelled" {
		t.Errorf("second cancel under a new key: isError=%v %v, want already_cancelled", res.IsError, sc)
	}
	res = p.mustCall("cancel_order", map[string]any{"order_key": "01JNOORDERHERE00000000001"}, "")
	if sc := structured(t, res); !res.IsError || sc["error"] != "no_such_order" {
		t.Errorf("cancel of a key with no order: isError=%v %v, want no_such_order", res.IsError, sc)
	}
	if got := budget(t, p, "alice"); got != 1000 {
		t.Errorf("alice's budget at the end %v, want 1000 (refunded once)", got)
	}
}
