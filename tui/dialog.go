package tui

import (
	"strings"

	"github.com/charmbracelet/bubbles/cursor"
	"github.com/charmbracelet/bubbles/help"
	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/bubbles/textinput"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"

	"github.com/mcp-confirm/mcp-confirm/pending"
)

// dialog is a small model over the active screen that ends in a decision.
// Update gets keys only and reports when the dialog is done. What the root
// needs of a dialog it asks through these methods, never by its type.
type dialog interface {
	ID() int
	// Arm lets a dialog opened by an event take keys.
	Arm()
	Update(tea.KeyMsg) (cmd tea.Cmd, closed bool)
	View(width int) string
	help.KeyMap
	// Busy is the status line while what the dialog started runs ("" for
	// none).
	Busy() string
	// Decision is the decision the dialog confirms, and on which call (""
	// for a dialog that confirms none).
	Decision() (pending.Action, pending.Call)
	// Hint is the guided demo's guide line while the dialog is open.
	Hint() string
}

// confirmDialog says exactly what will happen and proceeds only on y (or
// enter with Yes highlighted; the highlight starts on No). It may ask for a
// note (abandon, mark: optional; note: required) or for a typed word
// (retry of a tool with no key argument: "retry").
type confirmDialog struct {
	sh    *shared
	id    int
	armed bool

	title    string
	body     []string // paragraphs, styled; wrapped at View
	yes      string   // the Yes button's label
	typed    string   // a word to type instead of y; "" none
	note     bool     // has a note field
	needNote bool     // the note may not be empty (and enter sends it)
	input    textinput.Model
	inInput  bool
	choice   int // 0 No, 1 Yes
	proceed  func(note string) tea.Cmd
	warn     string         // one line shown after a key that did nothing
	busy     string         // the status line while what Yes started runs
	action   pending.Action // the decision it confirms, and on which call
	call     pending.Call

	keys  dialogKeys
	ikeys inputDialogKeys
}

func newConfirm(sh *shared, id int, title string, body []string, yes string, proceed func(string) tea.Cmd) *confirmDialog {
	return &confirmDialog{sh: sh, id: id, armed: true, title: title, body: body, yes: yes, proceed: proceed,
		keys: defaultDialogKeys(), ikeys: defaultInputDialogKeys()}
}

// withInput adds a text field (a note, or the word to type).
func (d *confirmDialog) withInput(prompt, placeholder string) *confirmDialog {
	ti := textinput.New()
	ti.Prompt = prompt
	ti.Placeholder = placeholder
	ti.CharLimit = 2000
	ti.Cursor.SetMode(cursor.CursorStatic)
	ti.Focus()
	d.input, d.inInput = ti, true
	return d
}

func (d *confirmDialog) ID() int { return d.id }
func (d *confirmDialog) Arm()    { d.armed = true }

// forDecision makes the dialog the confirmation of action a on call c:
// its status line while that runs, and what the root records of it.
func (d *confirmDialog) forDecision(a pending.Action, c pending.Call) *confirmDialog {
	d.action, d.call, d.busy = a, c, decisionBusy(d.sh, a, c)
	return d
}

func (d *confirmDialog) Busy() string                             { return d.busy }
func (d *confirmDialog) Decision() (pending.Action, pending.Call) { return d.action, d.call }
func (d *confirmDialog) Hint() string {
	return "Read what will happen, then y to go ahead (enter alone means No)."
}

func (d *confirmDialog) Update(k tea.KeyMsg) (tea.Cmd, bool) {
	d.warn = ""
	if !d.armed {
		d.warn = "(ignoring keys for a moment, so a stray keystroke cannot answer)"
		return nil, false
	}
	if d.inInput {
		return d.updateInput(k)
	}
	switch {
	case key.Matches(k, d.keys.Yes) && d.typed == "":
		return d.proceed(d.noteValue()), true
	case key.Matches(k, d.keys.Yes):
		d.warn = "type " + d.typed + " in the field to confirm"
		return nil, false
	case key.Matches(k, d.keys.No):
		return nil, true
	case (k.String() == "tab" || k.String() == "shift+tab") && (d.note || d.typed != ""):
		d.inInput = true
		return d.input.Focus(), false
	case key.Matches(k, d.keys.Toggle):
		if d.typed == "" {
			d.choice = 1 - d.choice
		}
	case key.Matches(k, d.keys.Choose):
		if d.choice == 1 {
			return d.proceed(d.noteValue()), true
		}
		return nil, true
	}
	return nil, false
}

func (d *confirmDialog) updateInput(k tea.KeyMsg) (tea.Cmd, bool) {
	switch {
	case key.Matches(k, d.ikeys.Cancel):
		return nil, true
	case key.Matches(k, d.ikeys.Next):
		v := strings.TrimSpace(d.input.Value())
		switch {
		case d.typed != "" && v == d.typed:
			return d.proceed(""), true
		case d.typed != "":
			d.warn = "type " + d.typed + " exactly to confirm, or esc to cancel"
			return nil, false
		case d.needNote && v == "":
			d.warn = "the note is empty; type it, or esc to cancel"
			return nil, false
		case d.needNote:
			return d.proceed(v), true
		}
		d.inInput = false // an optional note is done: on to the buttons, No highlighted
		d.input.Blur()
		return nil, false
	case key.Matches(k, d.ikeys.Toggle) && d.typed == "" && !d.needNote:
		d.inInput = false
		d.input.Blur()
		return nil, false
	}
	var cmd tea.Cmd
	d.input, cmd = d.input.Update(k)
	return cmd, false
}

func (d *confirmDialog) noteValue() string {
	if !d.note {
		return ""
	}
	return strings.TrimSpace(d.input.Value())
}

func (d *confirmDialog) View(w int) string {
	st := d.sh.st
	inner := max(20, w-st.Dialog.Box.GetHorizontalFrameSize())
	var b strings.Builder
	b.WriteString(st.Dialog.Title.Render(trunc(d.title, inner)))
	b.WriteString("\n")
	for _, p := range d.body {
		b.WriteString("\n")
		b.WriteString(wrap(p, inner))
		b.WriteString("\n")
	}
	b.WriteString("\n")
	if d.note || d.typed != "" {
		d.input.Width = max(5, inner-ansi.StringWidth(d.input.Prompt)-1)
		b.WriteString(trunc(d.input.View(), inner))
		b.WriteString("\n\n")
	}
	if d.typed == "" && !d.needNote {
		no, yes := st.Dialog.Button, st.Dialog.Button
		if d.choice == 0 {
			no = st.Dialog.ButtonActive
		} else {
			yes = st.Dialog.ButtonActive
		}
		mark := func(on bool, s string) string {
			if on && !d.inInput {
				return "▸" + s
			}
			return " " + s
		}
		b.WriteString(no.Render(mark(d.choice == 0, "No")) + "  " + yes.Render(mark(d.choice == 1, d.yes)))
		b.WriteString("\n")
		b.WriteString(st.Faint.Render(trunc(d.footer(), inner)))
	} else {
		b.WriteString(st.Faint.Render(trunc(d.footer(), inner)))
	}
	if d.warn != "" {
		b.WriteString("\n" + st.Dialog.Warning.Render(trunc(d.warn, inner)))
	}
	return st.Dialog.Box.Width(inner + st.Dialog.Box.GetHorizontalPadding()).Render(b.String())
}

func (d *confirmDialog) footer() string {
	switch {
	case d.typed != "":
		return "type " + d.typed + " and enter to proceed · esc cancels"
	case d.needNote:
		return "enter saves the note · esc cancels"
	case d.inInput:
		return "enter: done with the note (then y proceeds) · esc cancels"
	}
	return "y proceeds · n/esc cancels · enter takes the highlighted choice"
}

func (d *confirmDialog) ShortHelp() []key.Binding {
	switch {
	case d.typed != "":
		return []key.Binding{key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "confirm once "+d.typed+" is typed")), d.ikeys.Cancel}
	case d.needNote:
		return []key.Binding{key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "save the note")), d.ikeys.Cancel}
	case d.inInput:
		return []key.Binding{d.ikeys.Next, d.ikeys.Toggle, d.ikeys.Cancel}
	}
	return []key.Binding{d.keys.Yes, d.keys.No, d.keys.Choose, d.keys.Toggle}
}

func (d *confirmDialog) FullHelp() [][]key.Binding { return [][]key.Binding{d.ShortHelp()} }
