// The root's handlers of app-level results: what a query, a retry, a
// decision, a new call or a journal change did, said on the message line
// and followed by the reloads it calls for.

package tui

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/mcp-confirm/mcp-confirm/guard"
	"github.com/mcp-confirm/mcp-confirm/pending"
)

func (m *Model) onTick(t tickMsg) tea.Cmd {
	m.sh.now, m.sh.server, m.sh.servers = t.Now, t.Server, t.Servers
	m.detail.refresh()
	if t.OutOfTurn {
		return nil // Init started the clock's own ticks; a second chain would double them
	}
	return tickCmd(m.sh.opts.Tick, m.sh.opts)
}

// onJournalChanged reloads what is on screen and waits for the next change.
func (m *Model) onJournalChanged() tea.Cmd {
	cmds := []tea.Cmd{m.list.refresh(), watchCmd(m.sh.opts.Watch), m.scanLate()}
	if id := m.detail.loadedID(); id != 0 {
		cmds = append(cmds, loadCallCmd(m.sh.opts.Journal, id))
	}
	return tea.Batch(cmds...)
}

// scanLate reads the calls that hold late again: now if no read is
// running (after a pause that keeps a whole-journal read rare), else once
// the running one ends.
func (m *Model) scanLate() tea.Cmd {
	if m.sh.opts.Journal == nil {
		return nil
	}
	if m.lateScanning {
		m.lateAgain = true
		return nil
	}
	m.lateScanning = true
	return loadLateCmd(m.sh.opts.Journal, latePause(m.lateTook))
}

func (m *Model) onLateLoaded(msg lateLoadedMsg) tea.Cmd {
	m.lateScanning = false
	m.lateTook = msg.Took
	if msg.Err != nil {
		m.setMessage("cannot read which calls settled late: "+errLine(msg.Err), true)
	} else {
		m.sh.late, m.sh.lateKnown = msg.Calls, true
		m.syncBindings()
	}
	if m.lateAgain {
		m.lateAgain = false
		return m.scanLate()
	}
	return nil
}

// onQueried reports a query's evidence and reloads the call.
func (m *Model) onQueried(msg queriedMsg) tea.Cmd {
	who := fmt.Sprintf("call %d %s key %s", msg.ID, displayName(msg.Tool), keyTail(msg.Key))
	var ser *guard.ServerMismatchError
	if errors.As(msg.Err, &ser) {
		m.setMessage(serverMismatchLine(ser, msg.ID, "query"), true)
		return m.reloadAfter(msg.ID)
	}
	if msg.Err != nil {
		m.queryErr[msg.ID] = errLine(msg.Err)
		m.setMessage("query of "+who+" failed: "+m.authLine(msg.Err, ""), true)
		return m.reloadAfter(msg.ID)
	}
	if msg.Result.State != pending.StateSucceeded {
		why := rpcErrorText(msg.Result.Error)
		if why == "" {
			why = "the read " + stateWord(msg.Result.State)
		}
		m.queryErr[msg.ID] = why
		m.setMessage("query of "+who+" got no usable answer: "+trunc(why, 80)+"; nothing was resent, s asks again", true)
		return m.reloadAfter(msg.ID)
	}
	delete(m.queryErr, msg.ID)
	m.queried[msg.ID] = true
	m.noteDemoCall(msg.Result.Call)
	p := msg.Result.Call.Proposal
	switch p {
	case guard.ProposalApplied:
		m.setMessage("queried "+who+": the server has it, so the first attempt took effect. m marks it applied; r resends with the same key (a keyed server replays it)", false)
	case guard.ProposalNotFound:
		m.setMessage("queried "+who+": the server has no trace of it. r resends it with the same key; x abandons it", false)
	default:
		m.setMessage("queried "+who+": evidence stored (see details, enter); "+trunc(clean(resultText(msg.Result.Result, partStructured)), 60), false)
	}
	return m.reloadAfter(msg.ID)
}

// onRetried reports a retry's outcome.
func (m *Model) onRetried(msg retriedMsg) tea.Cmd {
	delete(m.retrying, msg.ID)
	if m.quitting && !m.writeInFlight() {
		return tea.Quit
	}
	m.dropQuitDialog()
	if msg.Err == nil {
		m.noteDemoCall(msg.Result.Call)
	}
	who := fmt.Sprintf("retried %s key %s (call %d)", displayName(msg.Tool), keyTail(msg.Key), msg.ID)
	var ser *guard.ServerMismatchError
	switch {
	case errors.As(msg.Err, &ser):
		m.setMessage(serverMismatchLine(ser, msg.ID, "retry"), true)
	case msg.Err != nil:
		m.setMessage("retry of call "+fmt.Sprint(msg.ID)+" failed: "+m.authLine(msg.Err, ""), true)
	default:
		s := who + ": " + stateWord(msg.Result.State)
		if msg.Result.Replayed {
			s += ", replayed by the server: the first attempt's result, nothing done twice"
		}
		if msg.Result.State == pending.StateUnknown {
			s += " again (" + clean(msg.Result.Call.Reason) + "); nothing more was sent"
		}
		m.setMessage(s, msg.Result.State == pending.StateFailed)
		m.messageWarn = msg.Result.State == pending.StateUnknown
	}
	return tea.Batch(m.reloadAfter(msg.ID), m.readDemoOrders())
}

// onCompensated reports what the cancel of a call did: the cancel's own
// call and state, and so whether the call is compensated. A cancel that
// was not made says so, and that nothing was sent.
func (m *Model) onCompensated(msg compensatedMsg) tea.Cmd {
	delete(m.compensating, msg.ID)
	if m.quitting && !m.writeInFlight() {
		return tea.Quit
	}
	m.dropQuitDialog()
	res, cancel := msg.Result, displayName(msg.CancelTool)
	var (
		held        *guard.HeldError
		ser         *guard.ServerMismatchError
		notRecorded *guard.OutcomeNotRecordedError
	)
	switch {
	case errors.As(msg.Err, &ser):
		where := fmt.Sprintf("server %q", clean(ser.Recorded))
		if ser.RecordedIdentity != "" {
			where = trunc(clean(ser.RecordedIdentity), 48)
		}
		m.setMessage(fmt.Sprintf("not sent: call %d was made on %s; compensate it from a console on that server", msg.ID, where), true)
	case errors.As(msg.Err, &held):
		m.setMessage(fmt.Sprintf("held, nothing sent: an identical cancel (call %d) is %s; decide it first. Call %d is not compensated by this", held.CallID, stateWord(held.State), msg.ID), true)
	case errors.As(msg.Err, &notRecorded):
		// It went out: never say "not sent" of it.
		m.setMessage(fmt.Sprintf("call %d (%s) was sent to compensate call %d, but the journal could not record how it ended: outcome unknown, NOT resent; fix the journal, it shows as unknown after a restart",
			notRecorded.CallID, cancel, msg.ID), true)
	case msg.Err != nil && res.Call.ID == 0 || msg.Err != nil && res.Call.ID == msg.ID:
		m.setMessage(fmt.Sprintf("call %d was not compensated, nothing was sent: %s", msg.ID, m.authLine(msg.Err, "")), true)
	case msg.Err != nil:
		m.setMessage(fmt.Sprintf("call %d (%s) to compensate call %d: %s", res.Call.ID, cancel, msg.ID, errLine(msg.Err)), true)
	default:
		who := fmt.Sprintf("call %d (%s)", res.Call.ID, cancel)
		switch res.State {
		case pending.StateSucceeded:
			extra := ""
			if res.Replayed {
				extra = " (replayed: the server had done this cancel already)"
			}
			m.setMessage(fmt.Sprintf("%s succeeded: call %d is compensated%s", who, msg.ID, extra), false)
		case pending.StateUnknown:
			m.setMessage(fmt.Sprintf("%s unknown (%s): whether call %d is compensated is not known; the cancel is in the unknown list, NOT resent", who, clean(res.Call.Reason), msg.ID), false)
			m.messageWarn = true
		default:
			// The server's own words first: they say why (no such order,
			// already cancelled).
			why := trunc(clean(resultText(res.Result, partText)), 100)
			if why == "" {
				why = rpcErrorText(res.Error)
			}
			if why == "" {
				why = clean(res.Call.Reason)
			}
			m.setMessage(fmt.Sprintf("%s %s: %s; call %d is not compensated", who, stateWord(res.State), why, msg.ID), true)
		}
	}
	return tea.Batch(m.reloadAfter(msg.ID), m.readDemoOrders())
}

// serverMismatchLine says that a query or retry was refused because the
// call was made on another server, and what to run instead: the CLI goes
// to the call's own server when none is given.
func serverMismatchLine(e *guard.ServerMismatchError, id int64, command string) string {
	where := fmt.Sprintf("server %q", clean(e.Recorded))
	if e.RecordedIdentity != "" {
		where = trunc(clean(e.RecordedIdentity), 48)
	}
	return fmt.Sprintf("not sent: call %d was made on %s; run 'mcp-confirm %s %d' (it uses the call's own server)", id, where, command, id)
}

func (m *Model) onDecided(msg decidedMsg) tea.Cmd {
	if msg.Err != nil {
		m.setMessage(fmt.Sprintf("%s of call %d failed: %s", msg.Action, msg.ID, errLine(msg.Err)), true)
		return m.reloadAfter(msg.ID)
	}
	if msg.Action == pending.ActionAck {
		// Its hold is over now: the count and L drop it before the next
		// read of the journal confirms it.
		m.sh.late = slices.DeleteFunc(slices.Clone(m.sh.late), func(c pending.Call) bool { return c.ID == msg.ID })
		m.syncBindings()
		m.setMessage(fmt.Sprintf("acknowledged call %d (%s): identical calls will be sent again from now on", msg.ID, displayName(msg.Tool)), false)
		return m.reloadAfter(msg.ID)
	}
	done := map[pending.Action]string{pending.ActionAbandon: "abandoned", pending.ActionMark: "marked applied", pending.ActionNote: "noted"}[msg.Action]
	m.setMessage(fmt.Sprintf("%s %s key %s (call %d)", done, displayName(msg.Tool), keyTail(msg.Key), msg.ID), false)
	if m.demoCall.ID == msg.ID {
		switch msg.Action {
		case pending.ActionMark:
			m.demoCall.State = pending.StateApplied
		case pending.ActionAbandon:
			m.demoCall.State = pending.StateAbandoned
		}
	}
	return tea.Batch(m.reloadAfter(msg.ID), m.readDemoOrders())
}

// onCallDone: a call from the new-call form is over. An unknown outcome is
// put in front of the operator: the list switches to unknown with the call
// selected and a dialog (opened by an event, so it waits out the grace
// period before it takes keys) asks what to do.
func (m *Model) onCallDone(msg callDoneMsg) tea.Cmd {
	if !m.form.onDone(msg) {
		return nil
	}
	if m.quitting && !m.writeInFlight() {
		return tea.Quit
	}
	m.dropQuitDialog()
	res, err := msg.Result, msg.Err
	m.noteDemoCall(res.Call)
	var held *guard.HeldError
	var notRecorded *guard.OutcomeNotRecordedError
	switch {
	case errors.As(err, &held):
		m.setMessage(fmt.Sprintf("held, nothing sent: an identical call (%d) is %s; decide it first", held.CallID, stateWord(held.State)), true)
		return nil
	case errors.As(err, &notRecorded):
		// It went out: never say "not sent" of it.
		m.setMessage(fmt.Sprintf("%s (call %d) was sent, but the journal could not record how it ended: outcome unknown, NOT resent; fix the journal, it shows as unknown after a restart",
			displayName(msg.Tool), notRecorded.CallID), true)
		return nil
	case err != nil:
		m.setMessage(fmt.Sprintf("%s was not sent: %s", displayName(msg.Tool), errLine(err)), true)
		return nil
	}
	if res.Call.ID == 0 {
		m.setMessage(fmt.Sprintf("read %s: %s", displayName(msg.Tool), stateWord(res.State)), res.State != pending.StateSucceeded)
		return nil
	}
	who := fmt.Sprintf("%s key %s (call %d)", displayName(msg.Tool), keyTail(res.Key), res.Call.ID)
	switch res.State {
	case pending.StateUnknown:
		what := "no answer"
		if res.Refusal != nil {
			// The server did answer, with a status by which it says it did
			// not run it: its word, which the reason quotes, is no proof.
			what = "only the server's word"
		}
		m.setMessage(fmt.Sprintf("%s: %s (%s); outcome unknown, NOT resent", who, what, clean(res.Call.Reason)), false)
		m.messageWarn = true
		m.active = screenList
		cmd := m.list.showCall(pending.StateUnknown, res.Call)
		d := newUnknownDialog(m.sh, m.nextDialogID(), res.Call)
		m.dialog = d
		return tea.Batch(cmd, armCmd(d.ID(), m.sh.opts.Grace))
	case pending.StateSucceeded:
		extra := ""
		if res.Replayed {
			extra = " (replayed: the server had done it already)"
		}
		m.setMessage(fmt.Sprintf("%s: succeeded%s", who, extra), false)
	default:
		m.setMessage(fmt.Sprintf("%s: %s: %s", who, stateWord(res.State), clean(res.Call.Reason)), true)
	}
	return tea.Batch(m.list.refresh(), m.readDemoOrders())
}

// reloadAfter reloads the list, the calls that settled late and, if shown,
// the detail of a call.
func (m *Model) reloadAfter(id int64) tea.Cmd {
	cmds := []tea.Cmd{m.list.refresh(), m.scanLate()}
	if m.detail.loadedID() == id {
		cmds = append(cmds, loadCallCmd(m.sh.opts.Journal, id))
	}
	return tea.Batch(cmds...)
}

// errLine is an error as one line, without the guard's class prefix.
func errLine(err error) string {
	s := clean(err.Error()) + consoleHint(err)
	for _, p := range []string{"bad input: ", "not allowed: ", "unavailable: ", "held: "} {
		s = strings.TrimPrefix(s, p)
	}
	return s
}
