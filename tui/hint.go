package tui

import (
	"context"
	"encoding/json"
	"fmt"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/mcp-confirm/mcp-confirm/guard"
	"github.com/mcp-confirm/mcp-confirm/pending"
)

// demoHint is the guided demo's next step, read only from evidence the
// console holds: the call in flight, the query's answer (found, not found,
// failed, or none yet), and the demo server's own orders (its find_orders
// read). It never proposes a new write while one is in flight.
func (m Model) demoHint() string {
	c := m.sh.counts
	if m.quitAsked() {
		return m.dialog.Hint()
	}
	inFlight, sending := m.form.inFlight()
	switch {
	case m.quitting:
		return "Quitting: the write in flight is being recorded as unknown, so the next launch shows it."
	case sending && inFlight.Kind == pending.KindWrite:
		return fmt.Sprintf("The server commits the order but never answers: in %s it becomes unknown. Wait for it.", m.sh.writeClock(inFlight.Tool.Name))
	case len(m.retrying) > 0:
		return "The retry is in flight with the same key: wait for its answer here; nothing else is sent meanwhile."
	case m.active == screenTools:
		return "Pick create_order (a write: it gets an idempotency key) and press enter."
	case m.active == screenForm && m.form.Capturing() && !m.form.valid():
		return "The arguments do not fit the schema yet (ctrl+s lists why and sends nothing): fix them first."
	case m.active == screenForm && m.form.Capturing():
		return "The arguments are filled in from the schema: ctrl+s checks them and sends the order."
	case m.dialog != nil:
		return m.dialog.Hint()
	}
	sel, ok := m.list.Selected()
	if ok && sel.State == pending.StateUnknown && m.active != screenDetail {
		switch ev, _ := m.evidence(sel); ev {
		case evidenceFound:
			return "find_orders found the order: it was made. Press r then y: same key, so the server replays it (no second order)."
		case evidenceNotFound:
			return "find_orders found no order under its key. Press r then y: sent again with the same key, it cannot be made twice."
		case evidenceFailed:
			return "The query got no answer (see above): press s then y to ask again; nothing is resent meanwhile."
		case evidenceUnclear:
			return "The query's answer proves nothing either way: read it in the details (enter), then decide."
		}
		return "Outcome unknown. Press s then y: ask the server (find_orders by its key)."
	}
	if m.active == screenDetail {
		return "Every attempt and decision of this call. esc goes back; s r x m n work here."
	}
	if c[pending.StateUnknown] > 0 {
		return "Unknown calls are waiting: pick one with ↑/↓, then s queries it."
	}
	return m.doneHint()
}

// doneHint: nothing is unknown and nothing in flight. What the demo
// server holds says whether the story is over.
func (m Model) doneHint() string {
	o, call := m.demoOrders, m.demoCall
	start := "Press c, then enter on create_order, then ctrl+s. Its answer will be lost."
	settled := call.ID != 0 && (call.State == pending.StateSucceeded || call.State == pending.StateApplied)
	switch {
	case !o.known && o.err != "":
		return "Cannot read the demo server's orders (" + o.err + "); tab: other states · enter: a call's history."
	case !o.known && m.list.empty() && m.sh.counts[pending.StateSucceeded]+m.sh.counts[pending.StateApplied] == 0:
		return start
	case !o.known:
		return "Reading the demo server's orders (find_orders)…"
	case settled && o.byKey[call.Key] == 1:
		return fmt.Sprintf("Done: the demo server has one order under key %s, sent %s: nothing done twice. enter: its history.",
			keyTail(call.Key), plural(call.AttemptCount, "time"))
	case settled:
		return fmt.Sprintf("The demo server has %s under key %s (its find_orders). enter: the call's history.", plural(o.byKey[call.Key], "order"), keyTail(call.Key))
	case o.total == 0:
		return start
	}
	return fmt.Sprintf("The demo server holds %s (its find_orders). c places another; tab: other states.", plural(o.total, "order"))
}

// Evidence a query left on an unknown call.
type evidence int

const (
	evidenceNone     evidence = iota
	evidenceFound             // the read found it: it took effect
	evidenceNotFound          // the read found nothing under its key
	evidenceFailed            // the last query this session got no answer
	evidenceUnclear           // answered, but it proves nothing either way
)

// evidence is what the queries of a call say, from the journal (its
// proposal, kept by every query, the automatic one included) and this
// session (a query that failed leaves nothing in the journal).
func (m Model) evidence(c pending.Call) (evidence, string) {
	if e, ok := m.queryErr[c.ID]; ok {
		return evidenceFailed, e
	}
	switch c.Proposal {
	case guard.ProposalApplied:
		return evidenceFound, ""
	case guard.ProposalNotFound:
		return evidenceNotFound, ""
	}
	if m.queried[c.ID] {
		return evidenceUnclear, ""
	}
	return evidenceNone, ""
}

// demoOrders is what the demo server's find_orders says it holds.
type demoOrders struct {
	known bool
	err   string
	total int
	byKey map[string]int
}

// demoOrdersMsg is the demo server's answer to find_orders (all orders).
type demoOrdersMsg struct {
	Total int
	ByKey map[string]int
	Err   error
}

// readDemoOrders asks the demo server for its orders: a read, never
// journaled. Only in the guided demo, and only when it lists find_orders.
func (m *Model) readDemoOrders() tea.Cmd {
	if !m.sh.opts.Demo {
		return nil
	}
	if _, ok := m.sh.tool("find_orders"); !ok {
		return nil
	}
	ctx, e := m.sh.opts.Context, m.sh.opts.Engine
	return func() tea.Msg {
		ctx, cancel := context.WithTimeout(ctx, 10*guard.DefaultReadTimeout)
		defer cancel()
		res, err := e.Call(ctx, guard.Request{Tool: "find_orders", Args: map[string]any{}})
		if err != nil {
			return demoOrdersMsg{Err: err}
		}
		var v struct {
			StructuredContent struct {
				Orders []struct {
					Key string `json:"idempotency_key"`
				} `json:"orders"`
			} `json:"structuredContent"`
		}
		if res.State != pending.StateSucceeded || json.Unmarshal(res.Result, &v) != nil {
			return demoOrdersMsg{Err: fmt.Errorf("find_orders answered %s", stateWord(res.State))}
		}
		out := demoOrdersMsg{Total: len(v.StructuredContent.Orders), ByKey: map[string]int{}}
		for _, o := range v.StructuredContent.Orders {
			out.ByKey[o.Key]++
		}
		return out
	}
}

func (m *Model) onDemoOrders(msg demoOrdersMsg) {
	if msg.Err != nil {
		m.demoOrders = demoOrders{err: errLine(msg.Err)}
		return
	}
	m.demoOrders = demoOrders{known: true, total: msg.Total, byKey: msg.ByKey}
}

// noteDemoCall keeps the demo's create_order call as last seen.
func (m *Model) noteDemoCall(c pending.Call) {
	if m.sh.opts.Demo && c.ID != 0 && c.Tool == "create_order" {
		if c.AttemptCount == 0 {
			c.AttemptCount = len(c.Attempts)
		}
		m.demoCall = c
	}
}
