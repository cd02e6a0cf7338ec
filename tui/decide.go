// The decision keys (s r x m n A, and L), the reasons shown when one cannot
// act, and the confirmation dialogs they open.

package tui

import (
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

// decisionKey opens the dialog for s, r, x, m, n or A on the active
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
	}{{dk.Query, pending.ActionQuery}, {dk.Retry, pending.ActionRetry}, {dk.Abandon, pending.ActionAbandon}, {dk.Mark, pending.ActionMark}, {dk.Note, pending.ActionNote}, {dk.Ack, pending.ActionAck}} {
		switch {
		case key.Matches(k, b.b) && ok:
			return m.openDecision(b.action, c), true
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

// openDecisionMsg asks the root to open a decision dialog (from a dialog).
type openDecisionMsg struct {
	Action pending.Action
	Call   pending.Call
}

// openDecision opens the dialog for an action on a call. Nothing is sent
// or written until the dialog's Yes.
func (m *Model) openDecision(a pending.Action, c pending.Call) tea.Cmd {
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
	}[a]
}

func (m *Model) nextDialogID() int {
	m.dialogSeq++
	return m.dialogSeq
}
