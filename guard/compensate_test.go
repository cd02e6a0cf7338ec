package guard

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/mcp-confirm/mcp-confirm/pending"
)

const compensatePolicy = `
[tools.create_order]
cancel_tool = "cancel_order"
cancel_args = { order_key = "{key}", buyer = "{arg.buyer}" }
`

// An unknown create_order is compensated: the decision is on it, the
// cancel is a guarded write of its own (its own key, the original's key in
// its arguments), linked both ways; the original keeps its state. A
// second compensation while the first cancel is unknown is held back.
func TestCompensate(t *testing.T) {
	h := newHarness(t, compensatePolicy)
	h.f.mu.Lock()
	h.f.tools = append(h.f.tools, tool("cancel_order", ptr(false), "order_key", "buyer"))
	h.f.mu.Unlock()
	h.f.set("create_order", always(lostOutcome()))
	res, err := h.call(Request{Tool: "create_order", Args: order(2)})
	if err != nil || res.State != pending.StateUnknown {
		t.Fatalf("the order: %s, %v; want unknown", res.State, err)
	}
	orig := res.Call
	h.f.set("cancel_order", always(okOutcome(map[string]any{"cancelled": true})))
	cres, err := h.g.Compensate(context.Background(), orig.ID, CompensateOptions{Note: "customer cancelled"})
	if err != nil || cres.State != pending.StateSucceeded {
		t.Fatalf("compensate: %s, %v; want the cancel succeeded", cres.State, err)
	}
	sent := h.f.sent("cancel_order")
	if len(sent) != 1 || sent[0].Args["order_key"] != orig.Key || sent[0].Args["buyer"] != "alice" {
		t.Fatalf("the cancel sent: %+v; want once, with order_key %s and buyer alice", sent, orig.Key)
	}
	if cres.Key == orig.Key || cres.Call.Compensates != orig.ID {
		t.Fatalf("the cancel: key %s (original's %s), compensates %d; want its own key, linked to %d", cres.Key, orig.Key, cres.Call.Compensates, orig.ID)
	}
	o := h.get(orig.ID)
	if o.State != pending.StateUnknown || len(o.CompensatedBy) != 1 || o.CompensatedBy[0] != cres.Call.ID {
		t.Fatalf("the original after: %s, compensated by %v", o.State, o.CompensatedBy)
	}
	if a := actions(o); len(a) != 1 || a[0] != pending.ActionCompensate {
		t.Fatalf("the original's decisions: %v, want [compensate]", a)
	}
	if h.writes() != 1 {
		t.Fatalf("create_order sent %d times, want once", h.writes())
	}
	// Undone once is undone: a second compensation is refused unsent.
	if _, err := h.g.Compensate(context.Background(), orig.ID, CompensateOptions{}); !errors.Is(err, ErrNotAllowed) ||
		!strings.Contains(err.Error(), "already undone by call") {
		t.Fatalf("a second compensation: %v; want ErrNotAllowed, already undone", err)
	}
	if n := len(h.f.sent("cancel_order")); n != 1 || len(actions(h.get(orig.ID))) != 1 {
		t.Fatalf("a refused second compensation sent %d cancels in all, decisions %v", n, actions(h.get(orig.ID)))
	}

	// A cancel whose own outcome is unknown holds an identical one back.
	h2 := newHarness(t, compensatePolicy)
	h2.f.mu.Lock()
	h2.f.tools = append(h2.f.tools, tool("cancel_order", ptr(false), "order_key", "buyer"))
	h2.f.mu.Unlock()
	h2.f.set("create_order", always(lostOutcome()))
	h2.f.set("cancel_order", always(lostOutcome()))
	res, _ = h2.call(Request{Tool: "create_order", Args: order(2)})
	if r, err := h2.g.Compensate(context.Background(), res.Call.ID, CompensateOptions{}); err != nil || r.State != pending.StateUnknown {
		t.Fatalf("first compensate: %s, %v; want the cancel unknown", r.State, err)
	}
	if _, err := h2.g.Compensate(context.Background(), res.Call.ID, CompensateOptions{}); !errors.Is(err, ErrHeld) {
		t.Fatalf("second compensate while the first cancel is unknown: %v; want held", err)
	}
	if n := len(h2.f.sent("cancel_order")); n != 1 {
		t.Fatalf("cancel_order sent %d times, want once", n)
	}
	held := h2.get(res.Call.ID)
	if a := actions(held); len(a) != 3 || a[2] != pending.ActionNote || !strings.Contains(held.Decisions[2].Note, "not made") {
		t.Fatalf("the held compensation's log: %v; want compensate, compensate, a note that it was not made", a)
	}
}

// Refusals send nothing and record nothing: no cancel_tool in the policy,
// a failed call (the server did nothing), a cancel_tool that is a read.
func TestCompensateRefused(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, "")
	h.f.set("create_order", always(lostOutcome()))
	res, _ := h.call(Request{Tool: "create_order", Args: order(1)})
	if _, err := h.g.Compensate(ctx, res.Call.ID, CompensateOptions{}); !errors.Is(err, ErrNotAllowed) {
		t.Fatalf("no cancel_tool: %v; want not allowed", err)
	}

	h = newHarness(t, compensatePolicy)
	h.f.mu.Lock()
	h.f.tools = append(h.f.tools, tool("cancel_order", ptr(true), "order_key", "buyer")) // a read
	h.f.mu.Unlock()
	h.f.set("create_order", always(rawOutcome(`{"content":[],"isError":true}`)))
	failed, _ := h.call(Request{Tool: "create_order", Args: order(1)})
	if _, err := h.g.Compensate(ctx, failed.Call.ID, CompensateOptions{}); !errors.Is(err, ErrNotAllowed) {
		t.Fatalf("a failed call: %v; want not allowed", err)
	}
	h.f.set("create_order", always(lostOutcome()))
	unknown, _ := h.call(Request{Tool: "create_order", Args: order(3)})
	if _, err := h.g.Compensate(ctx, unknown.Call.ID, CompensateOptions{}); !errors.Is(err, ErrNotAllowed) {
		t.Fatalf("a cancel_tool that is a read: %v; want not allowed", err)
	}
	for _, listed := range h.calls() {
		if c := h.get(listed.ID); len(c.Decisions) != 0 || c.Tool != "create_order" {
			t.Fatalf("a refused compensate left %+v", c)
		}
	}
	if n := len(h.f.sent("cancel_order")); n != 0 {
		t.Fatalf("cancel_order sent %d times by refused compensations", n)
	}
}

// CompensationPreview is what Compensate sends, worked out from the policy
// and the call alone: it sends and records nothing, and it refuses what
// Compensate refuses, for the same reasons.
func TestCompensationPreview(t *testing.T) {
	h := newHarness(t, compensatePolicy+`
[tools.pay]
redact = ["card"]
cancel_tool = "refund"
cancel_args = { card = "{arg.card}" }
`)
	h.f.mu.Lock()
	h.f.tools = append(h.f.tools, tool("cancel_order", ptr(false), "order_key", "buyer"))
	h.f.mu.Unlock()
	h.f.set("create_order", always(lostOutcome()))
	res, _ := h.call(Request{Tool: "create_order", Args: order(2)})
	orig := res.Call
	tool, args, err := h.g.CompensationPreview(orig)
	if err != nil || tool != "cancel_order" || args["order_key"] != orig.Key || args["buyer"] != "alice" || len(args) != 2 {
		t.Fatalf("preview: %s %v, %v; want cancel_order {order_key: %s, buyer: alice}", tool, args, err, orig.Key)
	}
	if n := len(h.f.sent("cancel_order")); n != 0 || len(h.get(orig.ID).Decisions) != 0 {
		t.Fatalf("a preview sent %d cancels and left decisions %v", n, actions(h.get(orig.ID)))
	}
	h.f.set("cancel_order", always(okOutcome(map[string]any{"cancelled": true})))
	if _, err := h.g.Compensate(context.Background(), orig.ID, CompensateOptions{}); err != nil {
		t.Fatal(err)
	}
	sent := h.f.sent("cancel_order")
	if len(sent) != 1 || jsonOf(t, withoutKey(sent[0].Args)) != jsonOf(t, args) {
		t.Fatalf("Compensate sent %+v; want the preview's arguments %v", sent, args)
	}

	for _, tc := range []struct {
		name string
		c    pending.Call
		want error
		says string
	}{
		{"a read", pending.Call{ID: 3, Tool: "find_orders", Kind: pending.KindRead, State: pending.StateSucceeded}, ErrNotAllowed, "is a read"},
		{"a failed call", pending.Call{ID: 4, Tool: "create_order", Kind: pending.KindWrite, State: pending.StateFailed}, ErrNotAllowed, "call 4 is failed"},
		{"no cancel_tool", pending.Call{ID: 5, Tool: "send_email", Kind: pending.KindWrite, State: pending.StateSucceeded}, ErrNotAllowed, "no cancel_tool for send_email"},
		{"a redacted argument", pending.Call{ID: 6, Tool: "pay", Kind: pending.KindWrite, State: pending.StateUnknown, Args: []byte(`{"card":"` + Redacted + `"}`)}, ErrBadInput, "cancel_args for pay"},
	} {
		if tool, args, err := h.g.CompensationPreview(tc.c); !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.says) || tool != "" || args != nil {
			t.Errorf("%s: %q %v, %v; want %v saying %q", tc.name, tool, args, err, tc.want, tc.says)
		}
	}
}

// withoutKey is a cancel's arguments as sent, less the key argument the
// session adds (the cancel's own key).
func withoutKey(args map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range args {
		if k != "idempotency_key" {
			out[k] = v
		}
	}
	return out
}
