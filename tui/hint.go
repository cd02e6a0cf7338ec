package tui

import (
	"fmt"

	"github.com/mcp-confirm/mcp-confirm/pending"
)

// demoHint is the guided demo's next step, read from what the journal and
// the screen show now: create an order, watch it become unknown, query it,
// retry it with the same key, and see one order in the end.
func (m Model) demoHint() string {
	c := m.sh.counts
	to := m.sh.opts.WriteTimeout
	switch {
	case m.form.sending:
		return fmt.Sprintf("The demo server commits the order but never answers. Watch: after %s with no answer the call becomes unknown, and is NOT resent.", to)
	case m.active == screenTools:
		return "Pick create_order (a write: it gets an idempotency key) and press enter."
	case m.active == screenForm:
		return "The arguments are ready: press ctrl+s to check them and send the order."
	}
	sel, ok := m.list.selected()
	if ok && sel.State == pending.StateUnknown && m.active != screenDetail {
		switch {
		case sel.Proposal == "":
			return "This order's outcome is unknown. Press s to ask the server (find_orders by key) whether it exists."
		default:
			return "The query found the order. Press r to retry with the same key: the server replays it, so there is still one order. (m would mark it applied.)"
		}
	}
	switch {
	case c[pending.StateUnknown] == 0 && c[pending.StateSucceeded] > 0:
		return "Done: one order, one key, no duplicate. tab shows succeeded calls; enter shows a call's attempts; t lists the tools (find_orders, get_budget)."
	case c[pending.StateUnknown] == 0:
		return fmt.Sprintf("Welcome! Press c, pick create_order and send it. The demo server will lose its answer; in %s you decide what to do.", to)
	case m.active == screenDetail:
		return "Every attempt and decision of this call, from the journal. esc goes back; s, r, x, m, n decide here too."
	}
	return "Unknown calls are waiting: pick one with ↑/↓, then s queries it."
}
