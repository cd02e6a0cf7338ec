package tui

import (
	"fmt"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/mcp-confirm/mcp-confirm/guard"
	"github.com/mcp-confirm/mcp-confirm/pending"
)

// quitDialog asks before q quits with a write in flight: quitting cancels
// it, so its outcome becomes unknown (the journal's reason says the
// operator quit). No is highlighted; only y or enter on Yes quits.
type quitDialog struct{ *confirmDialog }

// quitConfirmedMsg: the operator chose to quit with a write in flight.
type quitConfirmedMsg struct{}

// quitNowMsg: the wait for the write in flight to be recorded is over.
type quitNowMsg struct{}

func newQuitDialog(sh *shared, id int, what string) *quitDialog {
	body := []string{
		sh.st.Dialog.Warning.Render("A write is in flight; quitting leaves it unknown."),
		sh.st.Dialog.Body.Render(fmt.Sprintf("%s has been sent and has not answered. Quitting cancels the wait: the server may still do it, so the call is recorded as unknown (\"cancelled: the operator quit the console\"), never resent on its own, and shown in the unknown list next time.", what)),
		sh.st.Faint.Render("No keeps the console open and waits for its answer."),
	}
	return &quitDialog{newConfirm(sh, id, "Quit with a write in flight?", body, "Yes, quit",
		func(string) tea.Cmd { return func() tea.Msg { return quitConfirmedMsg{} } })}
}

func (d *quitDialog) Hint() string {
	return "y quits now and leaves the order unknown (never resent on its own); n keeps waiting for its answer."
}

// quitCause is the reason the journal records for a write the operator
// quit while it was in flight.
var quitCause = guard.CancelCause("the operator quit the console")

// writeInFlight: a write this console started has no outcome yet.
func (m *Model) writeInFlight() bool {
	t, sending := m.form.inFlight()
	return sending && t.Kind == pending.KindWrite || len(m.retrying) > 0 || len(m.compensating) > 0
}

// quit quits at once, unless a write is in flight: then it asks first.
func (m *Model) quit() tea.Cmd {
	if !m.writeInFlight() {
		return tea.Quit
	}
	what := "A retry"
	if len(m.retrying) == 0 && len(m.compensating) > 0 {
		what = "A compensation (the cancel of a call)"
	}
	if t, sending := m.form.inFlight(); sending {
		what = "The new " + t.Name + " call"
	}
	d := newQuitDialog(m.sh, m.nextDialogID(), what)
	m.dialog, m.quitDialog = d, d.ID()
	return nil
}

// beginQuit cancels the writes in flight, with the operator's quit as the
// cause, and quits once their outcome (unknown) is recorded, or after a
// few seconds in any case.
func (m *Model) beginQuit() tea.Cmd {
	m.quitting = true
	m.sh.cancel(quitCause)
	m.setMessage("quitting: recording the write in flight as unknown (the operator quit)…", false)
	m.busy = true
	return tea.Tick(quitWait, func(time.Time) tea.Msg { return quitNowMsg{} })
}

// quitWait bounds the wait for a cancelled write to be recorded.
const quitWait = 5 * time.Second

// dropQuitDialog closes the quit question once no write is in flight any
// more: it asked about something that is over. q now quits at once.
func (m *Model) dropQuitDialog() {
	if m.quitAsked() && !m.writeInFlight() {
		m.dialog = nil
	}
}

// quitAsked: the open dialog is the quit question.
func (m *Model) quitAsked() bool {
	return m.dialog != nil && m.dialog.ID() == m.quitDialog
}
