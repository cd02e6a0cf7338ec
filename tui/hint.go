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
		return fmt.Sprintf("The server commits the order but never answers: in %s it becomes unknown.", to)
	case m.active == screenTools:
		return "Pick create_order (a write: it gets an idempotency key) and press enter."
	case m.active == screenForm:
		return "The arguments are ready: ctrl+s checks them and sends the order."
	}
	if _, ok := m.dialog.(*unknownDialog); ok {
		return "Press s: ask the server whether the order exists (esc: decide later)."
	}
	if m.dialog != nil {
		return "Read what will happen, then y to go ahead (enter alone means No)."
	}
	sel, ok := m.list.selected()
	if ok && sel.State == pending.StateUnknown && m.active != screenDetail {
		if !m.queried[sel.ID] {
			return "Outcome unknown. Press s then y: ask the server (find_orders by its key)."
		}
		return "The order exists. Press r then y: resend with the same key; it is replayed."
	}
	switch {
	case c[pending.StateUnknown] == 0 && c[pending.StateSucceeded] > 0:
		return "Done: one order, one key. tab: other states · enter: a call's history."
	case c[pending.StateUnknown] == 0:
		return "Press c, then enter on create_order, then ctrl+s. Its answer will be lost."
	case m.active == screenDetail:
		return "Every attempt and decision of this call. esc goes back; s r x m n work here."
	}
	return "Unknown calls are waiting: pick one with ↑/↓, then s queries it."
}
