package tui

import (
	"encoding/json"
	"fmt"
	"strings"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/mcp-confirm/mcp-confirm/pending"
)

// compensateDialog confirms a compensation (issue 21, K): it says exactly
// what will be sent, the policy's cancel_tool with the arguments shown
// (the guard's preview, as they will be sent), as a new write of its own
// with its own key, linked to the call. It takes an optional note and
// proceeds only on y (or enter with Yes highlighted; the highlight starts
// on No). When the window is too short for the whole text it says the
// same in fewer lines, so that the note and the buttons always show.
type compensateDialog struct {
	*confirmDialog
	full, short []string
}

// earlier are the cancels made of c before, none of which took effect
// (they failed or were abandoned): the dialog says this is one more.
func newCompensateDialog(sh *shared, id int, c pending.Call, earlier []pending.Call, cancelTool string, args map[string]any, proceed func(note string) tea.Cmd) *compensateDialog {
	st := sh.st
	tool, cancel := displayName(c.Tool), displayName(cancelTool)
	raw, _ := json.Marshal(args)
	sent := spacedJSON(cleanJSON(raw, "")) // spaced, so it wraps between fields
	keyGoes := "in _meta: the server's tools are not listed yet"
	keyShort := ""
	if t, ok := sh.toolOf(c, cancelTool); ok && t.KeyArg != "" {
		keyGoes = "sent as " + clean(t.KeyArg) + " (and in _meta)"
		keyShort = " (as " + clean(t.KeyArg) + ")"
	} else if ok {
		keyGoes = "in _meta only: " + cancel + " declares no key argument"
	}
	call := fmt.Sprintf("%d %s key %s · %s", c.ID, tool, keyTail(c.Key), stateWord(c.State))
	again := ""
	if len(earlier) > 0 {
		was := make([]string, len(earlier))
		for i, k := range earlier {
			was[i] = fmt.Sprintf("%d %s", k.ID, stateWord(k.State))
		}
		again = fmt.Sprintf("Call %d has had %s, none of which took effect (call %s): this sends one more.", c.ID, plural(len(earlier), "cancel"), strings.Join(was, ", call "))
	}

	full := []string{
		st.Label.Render("call     ") + call + " · " + age(sh.now.Sub(c.CreatedAt)) + " old\n" +
			st.Label.Render("cancel   ") + cancel + "\n" +
			st.Label.Render("args     ") + sent + "\n" +
			st.Label.Render("its key  ") + fmt.Sprintf("a new one, not call %d's; %s", c.ID, keyGoes),
		st.Dialog.Body.Render(fmt.Sprintf("This sends a new write to the server: %s, with its own idempotency key, journaled before it is sent and linked to call %d. Call %d stays %s; the cancel's own outcome says whether it was undone. If its answer is lost, the cancel is unknown, never resent on its own.",
			cancel, c.ID, c.ID, stateWord(c.State))),
	}
	short := []string{
		st.Label.Render("call     ") + call + "\n" +
			st.Label.Render("cancel   ") + cancel + " " + sent,
		st.Dialog.Body.Render(fmt.Sprintf("A new write to the server with its own key%s, linked to call %d.", keyShort, c.ID)),
	}
	if again != "" {
		full = append(full, st.Dialog.Warning.Render(again))
		short[1] = st.Dialog.Warning.Render(again + " A new write, its own key.")
	}
	title := fmt.Sprintf("Compensate call %d (%s) with %s?", c.ID, tool, cancel)
	d := &compensateDialog{
		confirmDialog: newConfirm(sh, id, title, full, "Yes, send "+cancel, proceed).forDecision(pending.ActionCompensate, c),
		full:          full,
		short:         short,
	}
	d.busy = fmt.Sprintf("compensating call %d (%s key %s): sending %s… (no answer and no progress for %s → the cancel is unknown; the outcome shows here)",
		c.ID, tool, keyTail(c.Key), cancel, sh.writeClock(cancelTool))
	d.note = true
	d.withInput("note (optional): ", "why it is undone")
	return d
}

// View draws the whole text if it fits under the bars, else the short one.
func (d *compensateDialog) View(w int) string {
	d.body = d.full
	v := d.confirmDialog.View(w)
	if strings.Count(v, "\n")+1 > d.sh.bodyH {
		d.body = d.short
		v = d.confirmDialog.View(w)
	}
	return v
}

// callList is "call 12" or "call 12, 14".
func callList(ids []int64) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = fmt.Sprint(id)
	}
	return "call " + strings.Join(s, ", ")
}
