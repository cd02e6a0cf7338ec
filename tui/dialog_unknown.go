package tui

import (
	"encoding/json"
	"strings"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/mcp-confirm/mcp-confirm/guard"
	"github.com/mcp-confirm/mcp-confirm/pending"
)

// unknownDialog is opened by an event: a call the operator started has
// just become unknown. It shows what the automatic query (run by the guard
// as the call became unknown) found, highlights the next step that
// evidence calls for, and opens that decision's own confirmation on enter.
// It waits out the grace period first; esc leaves the call for later.
type unknownDialog struct {
	sh     *shared
	id     int
	armed  bool
	call   pending.Call
	keys   decisionKeys
	later  key.Binding
	up     key.Binding
	down   key.Binding
	choose key.Binding
	opts   []unknownOption
	pick   int
	ev     evidence
	warn   string
}

// unknownOption is one line of the dialog: a key and what it does. A
// zero action is "decide later".
type unknownOption struct {
	key    key.Binding
	action pending.Action
	text   string
	short  string // for the guide line
}

func newUnknownDialog(sh *shared, id int, c pending.Call) *unknownDialog {
	d := &unknownDialog{sh: sh, id: id, call: c, keys: defaultDecisionKeys(),
		later:  key.NewBinding(key.WithKeys("esc", "q"), key.WithHelp("esc", "decide later")),
		up:     key.NewBinding(key.WithKeys("up", "k"), key.WithHelp("↑/k", "previous")),
		down:   key.NewBinding(key.WithKeys("down", "j"), key.WithHelp("↓/j", "next")),
		choose: key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "highlighted step"))}
	d.ev = autoEvidence(sh.opts.Policy, c)
	tool, _ := queryPlan(sh.opts.Policy, c)
	q := "query: ask the server whether it happened (a read, safe)"
	if tool != "" {
		q = "query: run " + displayName(tool) + " to see whether it happened (a read, safe)"
	}
	if d.ev != evidenceNone {
		q = "query again: run " + displayName(tool) + " once more (a read, safe)"
	}
	d.opts = []unknownOption{
		{d.keys.Query, pending.ActionQuery, q, "query"},
		{d.keys.Retry, pending.ActionRetry, "retry with the same key " + keyTail(c.Key), "retry, same key"},
		{d.keys.Mark, pending.ActionMark, "mark applied (the evidence, or you, say it took effect)", "mark applied"},
		{d.keys.Abandon, pending.ActionAbandon, "abandon: send nothing more", "abandon"},
	}
	if sh.compensateReason(c) == "" {
		// Offered only where the policy names a cancel_tool for it: the
		// compensate dialog that opens says exactly what it sends.
		cancel, _, _ := sh.opts.Engine.CompensationPreview(c)
		d.opts = append(d.opts, unknownOption{d.keys.Compensate, pending.ActionCompensate,
			"compensate: send " + displayName(cancel) + " to undo it, a new write with its own key", "compensate"})
	}
	d.opts = append(d.opts, unknownOption{d.later, "", "decide later: it stays in the unknown list", "later"})
	next := pending.ActionQuery
	t, _ := sh.toolOf(c, c.Tool)
	switch d.ev {
	case evidenceFound:
		next = pending.ActionMark
		if t.KeyArg != "" { // the server dedupes by key: a retry returns the first result
			next = pending.ActionRetry
		}
	case evidenceNotFound:
		next = pending.ActionRetry
	}
	for i, o := range d.opts {
		if o.action == next {
			d.pick = i
		}
	}
	return d
}

// autoEvidence is what the automatic query left on a call that has just
// become unknown: its proposal, or, when the policy names a query and the
// journal holds no query decision, a query that got no answer.
func autoEvidence(p *guard.Policy, c pending.Call) evidence {
	switch c.Proposal {
	case guard.ProposalApplied:
		return evidenceFound
	case guard.ProposalNotFound:
		return evidenceNotFound
	}
	if tool, _ := queryPlan(p, c); tool == "" {
		return evidenceNone
	}
	ev := evidenceFailed
	for _, dc := range c.Decisions {
		if dc.Action != pending.ActionQuery {
			continue
		}
		var e struct {
			Result json.RawMessage `json:"result"`
			Error  json.RawMessage `json:"error"`
		}
		_ = json.Unmarshal(dc.Evidence, &e)
		ev = evidenceUnclear
		if len(e.Result) == 0 || string(e.Result) == "null" || len(e.Error) > 0 && string(e.Error) != "null" {
			ev = evidenceFailed
		}
	}
	return ev
}

func (d *unknownDialog) ID() int { return d.id }
func (d *unknownDialog) Arm()    { d.armed = true }

func (d *unknownDialog) Update(k tea.KeyMsg) (tea.Cmd, bool) {
	if !d.armed {
		d.warn = "(ignoring keys for a moment, so a stray keystroke cannot answer)"
		return nil, false
	}
	d.warn = ""
	open := func(a pending.Action) (tea.Cmd, bool) {
		if a == "" {
			return nil, true
		}
		c := d.call
		return func() tea.Msg { return openDecisionMsg{Action: a, Call: c} }, true
	}
	switch {
	case key.Matches(k, d.down):
		d.pick = (d.pick + 1) % len(d.opts)
		return nil, false
	case key.Matches(k, d.up):
		d.pick = (d.pick + len(d.opts) - 1) % len(d.opts)
		return nil, false
	case key.Matches(k, d.choose):
		return open(d.opts[d.pick].action)
	}
	for _, o := range d.opts {
		if key.Matches(k, o.key) {
			return open(o.action)
		}
	}
	return nil, false
}

// found is one sentence on what the automatic query found.
func (d *unknownDialog) found() string {
	tool, _ := queryPlan(d.sh.opts.Policy, d.call)
	name := displayName(tool)
	switch d.ev {
	case evidenceFound:
		return name + " ran on its own as the call became unknown, and found it under this key: the first attempt took effect."
	case evidenceNotFound:
		return name + " ran on its own as the call became unknown, and found nothing under this key: no sign it took effect."
	case evidenceUnclear:
		return name + " ran on its own as the call became unknown; its answer proves nothing either way (enter on the call shows it)."
	case evidenceFailed:
		return name + " was to run on its own as the call became unknown, but got no answer."
	}
	return ""
}

// Busy: the dialog starts nothing itself; the decision it opens does.
func (d *unknownDialog) Busy() string { return "" }

// Decision: none; it opens another dialog that confirms one.
func (d *unknownDialog) Decision() (pending.Action, pending.Call) { return "", pending.Call{} }

// Hint is the guided demo's guide line while the dialog is open.
func (d *unknownDialog) Hint() string {
	switch d.ev {
	case evidenceFound:
		return "The query found the order: enter takes the highlighted step (" + d.opts[d.pick].short + ")."
	case evidenceNotFound:
		return "The query found no order: enter takes the highlighted step (" + d.opts[d.pick].short + ")."
	}
	return "Press s (or enter): ask the server whether the order exists (esc: decide later)."
}

func (d *unknownDialog) View(w int) string {
	st := d.sh.st
	inner := max(20, w-st.Dialog.Box.GetHorizontalFrameSize())
	c := d.call
	why := clean(c.Reason)
	var b strings.Builder
	b.WriteString(st.State[pending.StateUnknown].Render(GlyphUnknown+" ") + st.Dialog.Title.Render(trunc(displayName(c.Tool)+" key "+keyTail(c.Key)+": outcome unknown", inner-2)))
	b.WriteString("\n\n")
	b.WriteString(wrap("No answer came ("+why+"). mcp-confirm did NOT resend it, and never will on its own: it waits in the unknown list for your decision.", inner))
	b.WriteString("\n")
	if f := d.found(); f != "" {
		style := st.Dialog.Body
		if d.ev == evidenceFailed {
			style = st.Dialog.Warning
		}
		b.WriteString("\n" + style.Render(wrap(f, inner)) + "\n")
	}
	b.WriteString("\n")
	for i, o := range d.opts {
		mark := "  "
		if i == d.pick {
			mark = GlyphSelected + " "
		}
		line := mark + st.Key.Render(pad(o.key.Help().Key, 4)) + trunc(o.text, inner-6)
		if i == d.pick {
			line = st.Row.Selected.Render(pad(line, inner))
		}
		b.WriteString(line + "\n")
	}
	b.WriteString(st.Faint.Render(trunc("↑/↓ moves · enter takes it (each step asks first) · esc: later", inner)) + "\n")
	if d.warn != "" {
		b.WriteString(st.Dialog.Warning.Render(trunc(d.warn, inner)))
	}
	return st.Dialog.Box.Width(inner + st.Dialog.Box.GetHorizontalPadding()).Render(strings.TrimSuffix(b.String(), "\n"))
}

func (d *unknownDialog) ShortHelp() []key.Binding {
	return append([]key.Binding{d.choose}, d.optionKeys()...)
}

func (d *unknownDialog) FullHelp() [][]key.Binding {
	return [][]key.Binding{{d.up, d.down, d.choose}, d.optionKeys()}
}

// optionKeys are the keys of the dialog's lines, in their order: the help
// shows K only where the dialog offers it.
func (d *unknownDialog) optionKeys() []key.Binding {
	out := make([]key.Binding, len(d.opts))
	for i, o := range d.opts {
		out[i] = o.key
	}
	return out
}
