// The decision keys (s r x m n A K, and L), the reasons shown when one
// cannot act, and the confirmation dialogs they open.

package tui

import (
	"errors"
	"fmt"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/mcp-confirm/mcp-confirm/guard"
	"github.com/mcp-confirm/mcp-confirm/pending"
)

// lateKey (L) selects the next call that settled late and is not yet
// acknowledged, in its state's tab, after the selected one if that is one.
func (m *Model) lateKey(k tea.KeyMsg) (tea.Cmd, bool) {
	if !m.list.pressedLate(k) {
		return nil, false
	}
	late := m.sh.late
	if len(late) == 0 {
		if m.sh.lateKnown {
			m.whyNot("no call is waiting for an acknowledgement: none settled late after being reported unknown")
		} else {
			m.whyNot("still reading the journal for calls that settled late; try again in a moment")
		}
		return nil, true
	}
	i := 0
	if c, ok := m.list.Selected(); ok {
		for j := range late {
			if late[j].ID == c.ID {
				i = (j + 1) % len(late)
			}
		}
	}
	c := late[i]
	m.setMessage(fmt.Sprintf("late settle %d of %d: call %d (%s) %s late, %s ago; identical calls are held until you acknowledge it (A)",
		i+1, len(late), c.ID, displayName(c.Tool), stateWord(c.State), age(m.sh.now.Sub(*c.LateSettledAt))), false)
	m.messageWarn, m.messageMark = true, GlyphLate
	return m.list.jumpTo(c), true
}

// decisionKey opens the dialog for s, r, x, m, n, A or K on the active
// screen's selected call, or says in one line why that action is not
// possible. A screen without decision keys does not handle them.
func (m *Model) decisionKey(k tea.KeyMsg) (tea.Cmd, bool) {
	s := m.activeScreen()
	dk := s.decisions()
	if dk == nil {
		return nil, false
	}
	c, ok := s.Selected()
	for _, b := range []struct {
		b      key.Binding
		action pending.Action
	}{{dk.Query, pending.ActionQuery}, {dk.Retry, pending.ActionRetry}, {dk.Abandon, pending.ActionAbandon}, {dk.Mark, pending.ActionMark}, {dk.Note, pending.ActionNote}, {dk.Ack, pending.ActionAck},
		{dk.Compensate, pending.ActionCompensate}} {
		switch {
		case key.Matches(k, b.b) && ok:
			return m.openDecision(b.action, c), true
		case (pressedDisabled(k, b.b) || key.Matches(k, b.b)) && b.action == pending.ActionCompensate && ok:
			m.whyNot(m.sh.compensateReason(c))
			return nil, true
		case pressedDisabled(k, b.b) || key.Matches(k, b.b):
			m.whyNot(disabledReason(b.action, c, ok))
			return nil, true
		}
	}
	return nil, false
}

// syncBindings enables, on each screen with decision keys, the ones its
// selected call allows, so help hides what cannot be done.
func (m *Model) syncBindings() {
	for _, s := range m.screens() {
		dk := s.decisions()
		if dk == nil {
			continue
		}
		c, ok := s.Selected()
		dk.Query.SetEnabled(ok && c.Kind == pending.KindWrite)
		dk.Retry.SetEnabled(ok && c.State.Allows(pending.EventRetry))
		dk.Abandon.SetEnabled(ok && c.State.Allows(pending.EventAbandon))
		dk.Mark.SetEnabled(ok && c.State.Allows(pending.EventMark))
		dk.Note.SetEnabled(ok)
		dk.Ack.SetEnabled(ok && c.HoldsLate())
		dk.Compensate.SetEnabled(ok && m.sh.compensateReason(c) == "")
	}
	m.list.syncLate(len(m.sh.late))
}

// disabledReason is the one line shown when an action's key is pressed on
// a call that does not allow it.
func disabledReason(a pending.Action, c pending.Call, ok bool) string {
	if !ok {
		return "no call selected; pick one with ↑/↓ (tab changes the state shown)"
	}
	name := fmt.Sprintf("call %d (%s)", c.ID, displayName(c.Tool))
	switch a {
	case pending.ActionRetry:
		return fmt.Sprintf("%s is %s; only unknown or failed calls can be retried", name, stateWord(c.State))
	case pending.ActionAbandon, pending.ActionMark:
		return fmt.Sprintf("%s is %s; only unknown calls can be %s", name, stateWord(c.State), map[pending.Action]string{pending.ActionAbandon: "abandoned", pending.ActionMark: "marked applied"}[a])
	case pending.ActionQuery:
		return fmt.Sprintf("%s is a read; reads are never unknown, there is nothing to query", name)
	case pending.ActionAck:
		if c.LateSettledAt != nil && c.AckedAt != nil {
			return fmt.Sprintf("%s was acknowledged already (%s); it holds nothing", name, stamp(*c.AckedAt))
		}
		return fmt.Sprintf("%s did not settle late after being reported unknown; there is nothing to acknowledge", name)
	}
	return fmt.Sprintf("cannot %s %s", a, name)
}

// compensateReason is why c cannot be compensated (K), in one line, or ""
// when it can: undone already (a cancel of it succeeded), then the
// guard's preview of the cancel decides (a read, a state that may not be
// undone, no cancel_tool in the policy, cancel_args that need what the
// call lacks), then its server's tools, once listed (the cancel_tool
// missing, or a read).
func (sh *shared) compensateReason(c pending.Call) string {
	name := fmt.Sprintf("call %d (%s)", c.ID, displayName(c.Tool))
	e := sh.opts.Engine
	if e == nil {
		return name + " cannot be compensated: the console has no engine"
	}
	if c.UndoneBy != 0 {
		return fmt.Sprintf("%s was already undone by call %d; there is nothing more to compensate", name, c.UndoneBy)
	}
	tool, _, err := e.CompensationPreview(c)
	switch {
	case err == nil:
	case c.Kind == pending.KindRead:
		return name + " is a read; it changed nothing, there is nothing to compensate"
	case c.State == pending.StateFailed:
		return name + " failed: the server said it did nothing, there is nothing to compensate"
	case c.State == pending.StateInFlight:
		return name + " is in flight; wait for its outcome before compensating it"
	case !pending.Compensable(c.State):
		return fmt.Sprintf("%s is %s; it cannot be compensated", name, stateWord(c.State))
	case errors.Is(err, guard.ErrNotAllowed):
		return fmt.Sprintf("%s cannot be compensated: the policy names no cancel_tool for %s (set cancel_tool and cancel_args under [tools.%s])",
			name, displayName(c.Tool), displayName(c.Tool))
	default:
		return name + " cannot be compensated: " + errLine(err)
	}
	if !sh.listsToolsOf(c) {
		return ""
	}
	switch t, listed := sh.toolOf(c, tool); {
	case !listed:
		return fmt.Sprintf("%s cannot be compensated: its cancel_tool %s is not among the server's tools (see t)", name, displayName(tool))
	case t.Kind == pending.KindRead:
		return fmt.Sprintf("%s cannot be compensated: its cancel_tool %s is a read here; a compensation must be a write (set kind = \"write\" for it in the policy)",
			name, displayName(tool))
	}
	return ""
}

// onCompensateChecked opens the compensate dialog on the call as just
// read, or says in one line why not: it is undone already (a cancel of it
// succeeded), or a cancel of it is still in flight or unknown (the guard
// would hold an identical one). It opens nothing if the operator has
// moved on meanwhile (another call selected, a dialog open).
func (m *Model) onCompensateChecked(msg compensateCheckedMsg) tea.Cmd {
	if s, ok := m.activeScreen().Selected(); m.dialog != nil || !ok || s.ID != msg.ID || m.activeScreen().decisions() == nil {
		return nil
	}
	if msg.Err != nil {
		m.whyNot(fmt.Sprintf("cannot read call %d to compensate it: %s", msg.ID, errLine(msg.Err)))
		return nil
	}
	c := msg.Call
	if why := m.sh.compensateReason(c); why != "" {
		m.whyNot(why)
		return nil
	}
	name := fmt.Sprintf("call %d (%s)", c.ID, displayName(c.Tool))
	for _, k := range msg.Cancels {
		switch k.State {
		case pending.StateSucceeded, pending.StateApplied:
			m.whyNot(fmt.Sprintf("%s was already undone by call %d (%s %s); there is nothing more to compensate", name, k.ID, displayName(k.Tool), stateWord(k.State)))
			return nil
		case pending.StateUnknown, pending.StateInFlight:
			m.whyNot(fmt.Sprintf("%s: its cancel, call %d (%s), is %s; decide that one first (another cancel would be held until then)", name, k.ID, displayName(k.Tool), stateWord(k.State)))
			return nil
		}
	}
	e, ctx := m.sh.opts.Engine, m.sh.opts.Context
	cancel, args, err := e.CompensationPreview(c)
	if err != nil {
		m.whyNot(name + " cannot be compensated: " + errLine(err))
		return nil
	}
	id, tool, key := c.ID, c.Tool, c.Key
	m.message = ""
	m.dialog = newCompensateDialog(m.sh, m.nextDialogID(), c, msg.Cancels, cancel, args,
		func(note string) tea.Cmd { return compensateCmd(ctx, e, id, tool, key, cancel, note) })
	return nil
}

// awaitedDecision is a decision key pressed before the call's server had
// listed its tools.
type awaitedDecision struct {
	action   pending.Action
	id       int64
	identity string
}

// onCallTools keeps the tools a call's server listed, and opens the
// decision that waited for them, if the operator is still on that call
// with no dialog open. A listing that failed opens it all the same: the
// dialog then says the server's tools are not known, and asks for more.
func (m *Model) onCallTools(msg toolsLoadedMsg) tea.Cmd {
	if msg.Err == nil {
		m.sh.callTools[msg.Identity] = msg.Tools
	}
	m.syncBindings()
	aw := m.awaiting
	if aw == nil || aw.identity != msg.Identity {
		return nil
	}
	m.awaiting = nil
	m.message = ""
	c, ok := m.activeScreen().Selected()
	if !ok || c.ID != aw.id || m.dialog != nil || m.activeScreen().decisions() == nil {
		return nil
	}
	return m.openDecision(aw.action, c)
}

// openDecisionMsg asks the root to open a decision dialog (from a dialog).
type openDecisionMsg struct {
	Action pending.Action
	Call   pending.Call
}

// openDecision opens the dialog for an action on a call. Nothing is sent
// or written until the dialog's Yes.
func (m *Model) openDecision(a pending.Action, c pending.Call) tea.Cmd {
	if a == pending.ActionRetry || a == pending.ActionCompensate || a == pending.ActionQuery {
		// Over several servers, the call's own server lists its tools
		// first: whether a retry is safe, the cancel_tool a write, and
		// the reads to query with are its, not another's.
		if cmd := m.sh.callToolsCmd(c); cmd != nil {
			m.awaiting = &awaitedDecision{action: a, id: c.ID, identity: string(c.ServerIdentity)}
			m.setMessage(fmt.Sprintf("asking the server call %d was made on for its tools (starting it if need be)…", c.ID), false)
			return cmd
		}
	}
	if a == pending.ActionCompensate {
		// The call and its earlier cancels are read first: one that
		// succeeded means it is undone already, one in flight or unknown
		// would hold a new one. onCompensateChecked opens the dialog, with
		// what the guard will send (its preview).
		if why := m.sh.compensateReason(c); why != "" {
			m.whyNot(why)
			return nil
		}
		return compensateCheckCmd(m.sh.opts.Journal, c.ID)
	}
	ctx, e := m.sh.opts.Context, m.sh.opts.Engine
	id, tool, key := c.ID, c.Tool, c.Key
	did := m.nextDialogID()
	m.message = ""
	switch a {
	case pending.ActionQuery:
		m.dialog = newQueryDialog(m.sh, did, c, func(o guard.QueryOptions) tea.Cmd { return queryCmd(ctx, e, id, tool, key, o) })
	case pending.ActionRetry:
		// Past the key's retention the dialog asks for "retry" typed, and
		// the guard is told the operator accepted it.
		past := keyRetentionPast(m.sh, c)
		m.dialog = newRetryDialog(m.sh, did, c, func(note string) tea.Cmd { return retryCmd(ctx, e, id, tool, key, note, past) })
	case pending.ActionAbandon:
		m.dialog = newAbandonDialog(m.sh, did, c, func(note string) tea.Cmd { return decideCmd(ctx, e, a, id, tool, key, note) })
	case pending.ActionMark:
		m.dialog = newMarkDialog(m.sh, did, c, func(note string) tea.Cmd { return decideCmd(ctx, e, a, id, tool, key, note) })
	case pending.ActionNote:
		m.dialog = newNoteDialog(m.sh, did, c, func(note string) tea.Cmd { return decideCmd(ctx, e, a, id, tool, key, note) })
	case pending.ActionAck:
		m.dialog = newAckDialog(m.sh, did, c, func(note string) tea.Cmd { return decideCmd(ctx, e, a, id, tool, key, note) })
	}
	return nil
}

// decisionBusy is the status line while a decision on c runs.
func decisionBusy(sh *shared, a pending.Action, c pending.Call) string {
	who := displayName(c.Tool) + " key " + keyTail(c.Key)
	return map[pending.Action]string{
		pending.ActionQuery:   "querying " + who + "…",
		pending.ActionRetry:   fmt.Sprintf("retrying %s as attempt %d… (no answer and no progress for %s → unknown again; the outcome shows here)", who, c.AttemptCount+1, sh.writeClock(c.Tool)),
		pending.ActionAbandon: "abandoning " + who + "…",
		pending.ActionMark:    "marking " + who + " applied…",
		pending.ActionNote:    "saving the note on " + who + "…",
		pending.ActionAck:     "acknowledging the late settle of " + who + "…",
		// The compensate dialog's own says which cancel_tool it sends.
		pending.ActionCompensate: "compensating " + who + "…",
	}[a]
}

func (m *Model) nextDialogID() int {
	m.dialogSeq++
	return m.dialogSeq
}
