package tui

import (
	"slices"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
)

// appKeys work on every screen (ctrl+c even in a dialog).
//
// Login is O, not L: L is the next late settle on the list. It is
// enabled only while a server waits for a login (login.go).
type appKeys struct{ Help, Quit, ForceQuit, Login key.Binding }

func defaultAppKeys() appKeys {
	login := key.NewBinding(key.WithKeys("O"), key.WithHelp("O", "log in"))
	login.SetEnabled(false)
	return appKeys{
		Help:      key.NewBinding(key.WithKeys("?"), key.WithHelp("?", "help")),
		Quit:      key.NewBinding(key.WithKeys("q"), key.WithHelp("q", "quit")),
		ForceQuit: key.NewBinding(key.WithKeys("ctrl+c"), key.WithHelp("ctrl+c", "quit")),
		Login:     login,
	}
}

// loginKeys drive the login screen: the browser does the rest.
type loginKeys struct{ Cancel key.Binding }

func defaultLoginKeys() loginKeys {
	return loginKeys{Cancel: key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "cancel the login"))}
}

// decisionKeys are the operator's decisions on the selected call (SPEC §4).
// They are enabled or disabled as the selection's state allows.
//
// Compensate is K, not k: k is up (vi) on the list, the detail and the
// dialogs, and a decision key is matched before a screen's own keys.
type decisionKeys struct{ Query, Retry, Abandon, Mark, Note, Ack, Compensate key.Binding }

func defaultDecisionKeys() decisionKeys {
	return decisionKeys{
		Query:   key.NewBinding(key.WithKeys("s"), key.WithHelp("s", "query status")),
		Retry:   key.NewBinding(key.WithKeys("r"), key.WithHelp("r", "retry same key")),
		Abandon: key.NewBinding(key.WithKeys("x"), key.WithHelp("x", "abandon")),
		Mark:    key.NewBinding(key.WithKeys("m"), key.WithHelp("m", "mark applied")),
		Note:    key.NewBinding(key.WithKeys("n"), key.WithHelp("n", "note")),
		Ack:     key.NewBinding(key.WithKeys("A"), key.WithHelp("A", "acknowledge late settle")),
		// issue 21: the policy's cancel_tool, a guarded write of its own.
		Compensate: key.NewBinding(key.WithKeys("K"), key.WithHelp("K", "compensate")),
	}
}

func (k decisionKeys) all() []key.Binding {
	return []key.Binding{k.Query, k.Retry, k.Abandon, k.Mark, k.Note, k.Ack, k.Compensate}
}

// listKeys drive the calls screen.
type listKeys struct {
	Up, Down, PageUp, PageDown, Top, Bottom key.Binding
	NextTab, PrevTab, Filter, Detail        key.Binding
	NewCall, Tools, Late                    key.Binding
	// Bulk reconciliation (issue 21): pick calls, then query them all.
	Pick, PickAll, Reconcile key.Binding
	decisionKeys
}

func defaultListKeys() listKeys {
	return listKeys{
		Up:           key.NewBinding(key.WithKeys("up", "k"), key.WithHelp("↑/k", "up")),
		Down:         key.NewBinding(key.WithKeys("down", "j"), key.WithHelp("↓/j", "down")),
		PageUp:       key.NewBinding(key.WithKeys("pgup", "b"), key.WithHelp("pgup", "page up")),
		PageDown:     key.NewBinding(key.WithKeys("pgdown", "f"), key.WithHelp("pgdn", "page down")), // space picks a call here
		Top:          key.NewBinding(key.WithKeys("home", "g"), key.WithHelp("g", "first row")),
		Bottom:       key.NewBinding(key.WithKeys("end", "G"), key.WithHelp("G", "last row")),
		NextTab:      key.NewBinding(key.WithKeys("tab"), key.WithHelp("tab", "next state")),
		PrevTab:      key.NewBinding(key.WithKeys("shift+tab"), key.WithHelp("shift+tab", "previous state")),
		Filter:       key.NewBinding(key.WithKeys("/"), key.WithHelp("/", "filter by tool")),
		Detail:       key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "details")),
		NewCall:      key.NewBinding(key.WithKeys("c"), key.WithHelp("c", "new call")),
		Tools:        key.NewBinding(key.WithKeys("t"), key.WithHelp("t", "tools")),
		Late:         key.NewBinding(key.WithKeys("L"), key.WithHelp("L", "next late settle")),
		Pick:         key.NewBinding(key.WithKeys(" "), key.WithHelp("space", "select")),
		PickAll:      key.NewBinding(key.WithKeys("*"), key.WithHelp("*", "select all")),
		Reconcile:    key.NewBinding(key.WithKeys("S"), key.WithHelp("S", "query selected")),
		decisionKeys: defaultDecisionKeys(),
	}
}

// bulkKeys drive the reconcile screen: a bulk query's progress, then its
// findings in groups.
type bulkKeys struct {
	Up, Down, PageUp, PageDown key.Binding
	// Accept marks the calls of the found group applied, after a dialog.
	Accept key.Binding
	// Retry resends, with their same keys, the calls of the group whose
	// retry is known safe, after a dialog that asks for their count.
	Retry key.Binding
	// Cancel stops a run (while it runs); Back leaves the screen (after).
	Cancel, Back key.Binding
}

func defaultBulkKeys() bulkKeys {
	return bulkKeys{
		Up:       key.NewBinding(key.WithKeys("up", "k"), key.WithHelp("↑/k", "previous group")),
		Down:     key.NewBinding(key.WithKeys("down", "j"), key.WithHelp("↓/j", "next group")),
		PageUp:   key.NewBinding(key.WithKeys("pgup", "b"), key.WithHelp("pgup", "scroll the group's calls up")),
		PageDown: key.NewBinding(key.WithKeys("pgdown", "f", " "), key.WithHelp("pgdn", "scroll the group's calls down")),
		Accept:   key.NewBinding(key.WithKeys("A"), key.WithHelp("A", "accept the group's proposals")),
		Retry:    key.NewBinding(key.WithKeys("R"), key.WithHelp("R", "retry the safe ones")),
		Cancel:   key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "cancel the run")),
		Back:     key.NewBinding(key.WithKeys("esc", "backspace", "h", "left"), key.WithHelp("esc", "back to list")),
	}
}

// detailKeys drive the detail screen.
type detailKeys struct {
	Up, Down, PageUp, PageDown, Back key.Binding
	// Result switches the results shown between their structured content
	// and their text; its help says what it switches to.
	Result key.Binding
	decisionKeys
}

func defaultDetailKeys() detailKeys {
	return detailKeys{
		Up:           key.NewBinding(key.WithKeys("up", "k"), key.WithHelp("↑/k", "scroll up")),
		Down:         key.NewBinding(key.WithKeys("down", "j"), key.WithHelp("↓/j", "scroll down")),
		PageUp:       key.NewBinding(key.WithKeys("pgup", "b"), key.WithHelp("pgup", "page up")),
		PageDown:     key.NewBinding(key.WithKeys("pgdown", "f", " "), key.WithHelp("pgdn", "page down")),
		Back:         key.NewBinding(key.WithKeys("esc", "backspace", "h", "left"), key.WithHelp("esc", "back to list")),
		Result:       key.NewBinding(key.WithKeys("v"), key.WithHelp("v", "results as text")),
		decisionKeys: defaultDecisionKeys(),
	}
}

// toolsKeys drive the tools screen.
type toolsKeys struct{ Up, Down, Select, Back key.Binding }

func defaultToolsKeys() toolsKeys {
	return toolsKeys{
		Up:     key.NewBinding(key.WithKeys("up", "k"), key.WithHelp("↑/k", "up")),
		Down:   key.NewBinding(key.WithKeys("down", "j"), key.WithHelp("↓/j", "down")),
		Select: key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "call it")),
		Back:   key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "back")),
	}
}

// formKeys drive the new-call form (a textarea has the other keys).
type formKeys struct{ Send, Back, Reset key.Binding }

func defaultFormKeys() formKeys {
	return formKeys{
		Send:  key.NewBinding(key.WithKeys("ctrl+s"), key.WithHelp("ctrl+s", "validate & send")),
		Back:  key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "back")),
		Reset: key.NewBinding(key.WithKeys("ctrl+r"), key.WithHelp("ctrl+r", "reset from schema")),
	}
}

// dialogKeys answer a dialog. Enter takes the highlighted choice, which
// starts on No.
type dialogKeys struct{ Yes, No, Toggle, Choose key.Binding }

func defaultDialogKeys() dialogKeys {
	return dialogKeys{
		Yes:    key.NewBinding(key.WithKeys("y", "Y"), key.WithHelp("y", "yes, proceed")),
		No:     key.NewBinding(key.WithKeys("n", "N", "esc", "q"), key.WithHelp("n/esc", "no, cancel")),
		Toggle: key.NewBinding(key.WithKeys("left", "right", "h", "l", "tab", "shift+tab"), key.WithHelp("←/→", "switch")),
		Choose: key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "choose highlighted")),
	}
}

// inputDialogKeys answer a dialog whose focus is a text field, where
// letters are text: only esc cancels and enter moves on.
type inputDialogKeys struct{ Next, Cancel, Toggle key.Binding }

func defaultInputDialogKeys() inputDialogKeys {
	return inputDialogKeys{
		Next:   key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "done with note")),
		Cancel: key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "cancel")),
		Toggle: key.NewBinding(key.WithKeys("tab", "shift+tab"), key.WithHelp("tab", "to the buttons")),
	}
}

// filterKeys drive the tool filter input.
type filterKeys struct{ Apply, Cancel key.Binding }

func defaultFilterKeys() filterKeys {
	return filterKeys{
		Apply:  key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "apply filter")),
		Cancel: key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "clear filter")),
	}
}

// pressedDisabled reports whether msg is one of b's keys while b is
// disabled: the operator pressed an action the selection does not allow,
// and deserves a one-line reason rather than silence.
func pressedDisabled(msg tea.KeyMsg, b key.Binding) bool {
	return !b.Enabled() && slices.Contains(b.Keys(), msg.String())
}

// KeyTable is the console's key reference as a Markdown table, generated
// from the same key maps the console uses (the README's table is this
// text; a test checks that they match).
func KeyTable() string {
	type row struct{ where, keys, does string }
	var rows []row
	add := func(where string, bs ...key.Binding) {
		for _, b := range bs {
			h := b.Help()
			rows = append(rows, row{where, "`" + h.Key + "`", h.Desc})
		}
	}
	l := defaultListKeys()
	// The selection keys' help is short for the footer; the reference
	// says what each does in full.
	l.Pick.SetHelp(l.Pick.Help().Key, "select / unselect the call for a bulk query, and move down")
	l.PickAll.SetHelp(l.PickAll.Help().Key, "select every call of the list as filtered (all selected: none)")
	l.Reconcile.SetHelp(l.Reconcile.Help().Key, "query the selected calls, 8 at a time, and group the findings")
	add("calls", l.Up, l.Down, l.PageUp, l.PageDown, l.Top, l.Bottom, l.NextTab, l.PrevTab, l.Filter, l.Detail, l.NewCall, l.Tools, l.Late,
		l.Pick, l.PickAll, l.Reconcile)
	// Compensate's help is one word in the footer; the reference says what
	// it sends.
	l.Compensate.SetHelp(l.Compensate.Help().Key, "compensate: send the policy's cancel_tool for the call, a new write with its own key, after a dialog")
	add("calls, detail", l.decisionKeys.all()...)
	d := defaultDetailKeys()
	// Result's help says what it switches to; the reference says both.
	d.Result.SetHelp(d.Result.Help().Key, "results: structured / text (when a result has both)")
	add("detail", d.Result, d.Back)
	bk := defaultBulkKeys()
	bk.Accept.SetHelp(bk.Accept.Help().Key, "accept the found group: mark its calls applied, after a dialog listing them")
	bk.Retry.SetHelp(bk.Retry.Help().Key, "retry the group's calls known safe to retry (a key argument), same keys, after typing their count")
	bk.Cancel.SetHelp(bk.Cancel.Help().Key, "cancel the run (while a query or retry runs)")
	add("reconcile", bk.Up, bk.Down, bk.PageUp, bk.PageDown, bk.Accept, bk.Retry, bk.Cancel, bk.Back)
	t := defaultToolsKeys()
	add("tools", t.Select, t.Back)
	f := defaultFormKeys()
	add("new call", f.Send, f.Reset, f.Back)
	dk := defaultDialogKeys()
	add("dialog", dk.Yes, dk.No, dk.Choose, dk.Toggle)
	a := defaultAppKeys()
	a.Login.SetHelp(a.Login.Help().Key, "log in with OAuth, as mcp-confirm login does, to the remote server whose start was refused for want of a login; then its tools are listed again")
	lk := defaultLoginKeys()
	lk.Cancel.SetHelp(lk.Cancel.Help().Key, "cancel the login (nothing is stored)")
	add("log in", lk.Cancel)
	add("anywhere", a.Help, a.Quit, a.ForceQuit, a.Login)
	out := "| where | key | does |\n| --- | --- | --- |\n"
	for _, r := range rows {
		out += "| " + r.where + " | " + r.keys + " | " + r.does + " |\n"
	}
	return out
}
