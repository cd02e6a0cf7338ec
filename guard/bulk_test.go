package guard

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/mcp-confirm/mcp-confirm/mcpclient"
	"github.com/mcp-confirm/mcp-confirm/pending"
)

const bulkPolicy = `
[tools.create_order]
query_tool = "find_orders"
query_args = { idempotency_key = "{key}" }
`

// lostOrder makes one create_order whose answer is lost: unknown. The
// automatic query answers with find.
func lostOrder(t *testing.T, h *harness, find mcpclient.Delivery) pending.Call {
	t.Helper()
	h.f.set("create_order", always(lostOutcome()))
	h.f.set("find_orders", always(find))
	res, err := h.call(Request{Tool: "create_order", Args: order(1)})
	if err != nil || res.State != pending.StateUnknown {
		t.Fatalf("lost order: %v %v", res.State, err)
	}
	return res.Call
}

var (
	foundOrder   = okOutcome(map[string]any{"orders": []any{map[string]any{"order_id": 17}}})
	noOrder      = okOutcome(map[string]any{"orders": []any{}})
	failedLookup = rawOutcome(`{"isError":true,"content":[{"type":"text","text":"db down"}]}`)
)

// A found call is marked applied with the evidence its query kept, the
// way reconcile --apply-found marks it, and the note names the finding.
func TestAcceptFoundMarksWithTheQueryEvidence(t *testing.T) {
	h := newHarness(t, bulkPolicy)
	c := lostOrder(t, h, failedLookup)
	h.f.set("find_orders", always(foundOrder))
	if r := h.g.Reconcile(context.Background(), h.get(c.ID), ReconcileOptions{}); r.Finding != FindingFound || r.Applied {
		t.Fatalf("reconcile: %+v", r)
	}
	got, summary, err := h.g.AcceptFound(context.Background(), c.ID, "")
	if err != nil || got.State != pending.StateApplied || summary != "orders: 1 (order_id 17)" {
		t.Fatalf("accept: %v %q %v", got.State, summary, err)
	}
	now := h.get(c.ID)
	if now.State != pending.StateApplied {
		t.Fatalf("journal state %s", now.State)
	}
	var query, mark pending.Decision
	for _, d := range now.Decisions {
		switch d.Action {
		case pending.ActionQuery:
			query = d
		case pending.ActionMark:
			mark = d
		}
	}
	if !bytes.Equal(mark.Evidence, query.Evidence) || len(mark.Evidence) == 0 {
		t.Fatalf("mark evidence %s, query evidence %s", mark.Evidence, query.Evidence)
	}
	if mark.Operator != "tester" || !strings.Contains(mark.Note, "the query found it (orders: 1 (order_id 17))") {
		t.Fatalf("mark by %q, note %q", mark.Operator, mark.Note)
	}
	if h.writes() != 1 {
		t.Fatalf("%d writes sent, want the first only", h.writes())
	}
}

// Nothing is marked, and nothing written, unless the latest query found it.
func TestAcceptFoundRefusesWithoutAFinding(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(h *harness) pending.Call
		why   string
	}{
		{"never queried", func(h *harness) pending.Call {
			// Made by a guard with no query configured: no automatic query.
			plain := New(h.j, h.f, Options{Operator: "tester", Keys: h.g.opts.Keys})
			h.f.set("create_order", always(lostOutcome()))
			res, err := plain.Call(context.Background(), Request{Tool: "create_order", Args: order(1)})
			if err != nil || res.State != pending.StateUnknown {
				t.Fatalf("lost order: %v %v", res.State, err)
			}
			return res.Call
		}, "never queried"},
		{"latest query failed", func(h *harness) pending.Call {
			return lostOrder(t, h, failedLookup)
		}, "the read failed: db down"},
		{"found, then not found", func(h *harness) pending.Call {
			c := lostOrder(t, h, foundOrder)
			h.f.set("find_orders", always(noOrder))
			h.g.Reconcile(context.Background(), h.get(c.ID), ReconcileOptions{})
			return c
		}, "orders: 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, bulkPolicy)
			c := tc.setup(h)
			before := len(h.get(c.ID).Decisions)
			_, _, err := h.g.AcceptFound(context.Background(), c.ID, "")
			var nf *NotFoundByQueryError
			if !errors.As(err, &nf) || !errors.Is(err, ErrNotAllowed) || !strings.Contains(err.Error(), tc.why) {
				t.Fatalf("err %v, want a NotFoundByQueryError saying %q", err, tc.why)
			}
			if now := h.get(c.ID); now.State != pending.StateUnknown || len(now.Decisions) != before {
				t.Fatalf("after a refusal: %s with %d decisions (was %d)", now.State, len(now.Decisions), before)
			}
		})
	}
}

// A call decided meanwhile is refused by the journal, and the call as it
// is now comes back.
func TestAcceptFoundRefusesADecidedCall(t *testing.T) {
	h := newHarness(t, bulkPolicy)
	c := lostOrder(t, h, foundOrder)
	if err := h.g.Abandon(context.Background(), c.ID, "elsewhere"); err != nil {
		t.Fatal(err)
	}
	got, _, err := h.g.AcceptFound(context.Background(), c.ID, "")
	if !errors.Is(err, ErrNotAllowed) || !errors.Is(err, pending.ErrIllegalTransition) || got.State != pending.StateAbandoned {
		t.Fatalf("accept of an abandoned call: %v, %s", err, got.State)
	}
	if _, _, err := h.g.AcceptFound(context.Background(), 999, ""); !errors.Is(err, ErrBadInput) {
		t.Fatalf("accept of no call: %v", err)
	}
}
