package tui

import (
	"fmt"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/mcp-confirm/mcp-confirm/pending"
)

// newAbandonDialog: give up on an unknown call, with an optional note.
func newAbandonDialog(sh *shared, id int, c pending.Call, proceed func(note string) tea.Cmd) *confirmDialog {
	st := sh.st
	tool := displayName(c.Tool)
	body := []string{
		st.Dialog.Body.Render(fmt.Sprintf("Abandon %s key %s (call %d): nothing more will ever be sent for it, and it stays in the journal as abandoned.", tool, keyTail(c.Key), c.ID)),
		st.Dialog.Warning.Render("If the first attempt did take effect, it stays done; a late answer would flag the call as a conflict."),
	}
	d := newConfirm(sh, id, fmt.Sprintf("Abandon %s?", tool), body, "Yes, abandon", proceed).forDecision(pending.ActionAbandon, c)
	d.note = true
	return d.withInput("note (optional): ", "why you give up on it")
}

// newMarkDialog: record that an unknown call took effect, with a note.
func newMarkDialog(sh *shared, id int, c pending.Call, proceed func(note string) tea.Cmd) *confirmDialog {
	st := sh.st
	tool := displayName(c.Tool)
	body := []string{
		st.Dialog.Body.Render(fmt.Sprintf("Mark %s key %s (call %d) applied: you confirm it took effect. Nothing is sent.", tool, keyTail(c.Key), c.ID)),
	}
	if c.Proposal != "" {
		body = append(body, st.Info.Render("The last query says: "+clean(c.Proposal)))
	} else {
		body = append(body, st.Faint.Render("No query has been run on it; say in the note how you checked."))
	}
	d := newConfirm(sh, id, fmt.Sprintf("Mark %s applied?", tool), body, "Yes, mark applied", proceed).forDecision(pending.ActionMark, c)
	d.note = true
	return d.withInput("note (optional): ", "how you checked")
}

// newNoteDialog: append a note; nothing is sent, the state does not change.
func newNoteDialog(sh *shared, id int, c pending.Call, proceed func(note string) tea.Cmd) *confirmDialog {
	st := sh.st
	body := []string{st.Dialog.Body.Render(fmt.Sprintf("Add a note to %s key %s (call %d). Nothing is sent; the state stays %s.", displayName(c.Tool), keyTail(c.Key), c.ID, stateWord(c.State)))}
	d := newConfirm(sh, id, "Note on call "+fmt.Sprint(c.ID), body, "Save", proceed).forDecision(pending.ActionNote, c)
	d.note, d.needNote = true, true
	return d.withInput("note: ", "")
}
