package tui

import (
	"fmt"
	"strings"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/mcp-confirm/mcp-confirm/pending"
)

// acceptListRows is how many of the calls the accept dialog shows at most
// at once (fewer when the window is short); ↑/↓ scroll the rest.
const acceptListRows = 8

// acceptChrome is the accept dialog's lines other than its list and its
// first paragraph: the border, title, gaps, the "calls a–b of n" line, the
// buttons, the footer and a warning.
const acceptChrome = 11

// acceptText is the accept dialog's first paragraph.
const acceptText = "Each call's query found it on the server. Each is marked applied, with that query's evidence, as m records it after s. Nothing is sent."

// acceptDialog confirms a bulk accept: it lists every call it will mark
// applied, each with its query's evidence in short, and proceeds only on y
// (enter takes the highlight, which starts on No).
type acceptDialog struct {
	*confirmDialog
	lines    []string // one per call, sanitised
	top      int
	inner    int // the box's width inside, as last drawn
	rows     int // the calls shown at once, as last drawn
	up, down key.Binding
}

// acceptLine is one call of the accept dialog.
type acceptLine struct {
	Call     pending.Call
	Evidence string // the query's answer in short (guard.EvidenceSummary), unsanitised
}

func newAcceptDialog(sh *shared, id int, calls []acceptLine, proceed func() tea.Cmd) *acceptDialog {
	lines := make([]string, len(calls))
	for i, l := range calls {
		c := l.Call
		server := ""
		if sh.multi() { // whose query found it
			server = pad(callServerName(c), 10) + " "
		}
		lines[i] = fmt.Sprintf("call %-5d %s%s %s  %s", c.ID, server, pad(displayName(c.Tool), 14), pad(keyTail(c.Key), 7), clean(l.Evidence))
	}
	title := fmt.Sprintf("Mark %s applied?", plural(len(calls), "found call"))
	d := &acceptDialog{
		confirmDialog: newConfirm(sh, id, title, nil, "Yes, mark them applied", func(string) tea.Cmd { return proceed() }),
		lines:         lines,
		inner:         68,
		rows:          acceptListRows,
		up:            key.NewBinding(key.WithKeys("up", "k"), key.WithHelp("↑/k", "scroll up")),
		down:          key.NewBinding(key.WithKeys("down", "j"), key.WithHelp("↓/j", "scroll down")),
	}
	d.busy = fmt.Sprintf("marking %s applied, each with its query's evidence…", plural(len(calls), "call"))
	d.sync()
	return d
}

func (d *acceptDialog) Update(k tea.KeyMsg) (tea.Cmd, bool) {
	if d.armed {
		switch {
		case key.Matches(k, d.down):
			d.top = max(0, min(d.top+1, len(d.lines)-d.rows))
			d.sync()
			return nil, false
		case key.Matches(k, d.up):
			d.top = max(0, d.top-1)
			d.sync()
			return nil, false
		}
	}
	return d.confirmDialog.Update(k)
}

// sync sets the body for the calls in view.
func (d *acceptDialog) sync() {
	st := d.sh.st
	d.top = max(0, min(d.top, len(d.lines)-d.rows))
	end := min(len(d.lines), d.top+d.rows)
	var list strings.Builder
	for _, l := range d.lines[d.top:end] {
		list.WriteString("  " + trunc(l, max(10, d.inner-2)) + "\n")
	}
	where := fmt.Sprintf("calls %d–%d of %d", d.top+1, end, len(d.lines))
	if len(d.lines) > d.rows {
		where += " · ↑/↓ scroll"
	}
	d.body = []string{
		st.Dialog.Body.Render(acceptText),
		strings.TrimSuffix(list.String(), "\n") + "\n" + st.Faint.Render(where),
	}
}

func (d *acceptDialog) View(w int) string {
	d.inner = max(20, w-d.sh.st.Dialog.Box.GetHorizontalFrameSize())
	para := strings.Count(wrap(acceptText, d.inner), "\n") + 1
	d.rows = max(1, min(acceptListRows, d.sh.bodyH-acceptChrome-para))
	d.sync()
	return d.confirmDialog.View(w)
}

func (d *acceptDialog) Hint() string {
	return "Read the calls and their evidence, then y marks them all applied (enter alone means No)."
}

func (d *acceptDialog) ShortHelp() []key.Binding {
	b := d.confirmDialog.ShortHelp()
	if len(d.lines) > d.rows {
		b = append(b, d.down, d.up)
	}
	return b
}
