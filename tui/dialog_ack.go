package tui

import (
	"fmt"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/mcp-confirm/mcp-confirm/pending"
)

// newAckDialog: acknowledge a call that settled late after its caller was
// told it was unknown (SPEC §9). Until then identical calls are held and
// get its outcome; after it they are sent again. Nothing is sent now, and
// the call's state does not change.
func newAckDialog(sh *shared, id int, c pending.Call, proceed func(note string) tea.Cmd) *confirmDialog {
	st := sh.st
	tool := displayName(c.Tool)
	when := "late"
	if c.LateSettledAt != nil {
		when = fmt.Sprintf("late, at %s (%s ago)", stamp(*c.LateSettledAt), age(sh.now.Sub(*c.LateSettledAt)))
	}
	body := []string{
		st.Dialog.Body.Render(fmt.Sprintf("%s key %s (call %d) was reported unknown to its caller, then %s %s. Until it is acknowledged, or the policy's late_hold passes, identical calls are not sent: they get this call's outcome.",
			tool, keyTail(c.Key), c.ID, stateWord(c.State), when)),
		st.Dialog.Warning.Render("Acknowledge it: identical calls will be sent again from now on."),
		st.Faint.Render("Nothing is sent now; the call stays " + stateWord(c.State) + "."),
	}
	return newConfirm(sh, id, fmt.Sprintf("Acknowledge the late settle of %s?", tool), body, "Yes, acknowledge", proceed).forDecision(pending.ActionAck, c)
}
