package tui

import (
	"io"
	"strings"
	"testing"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"
	"github.com/muesli/termenv"
)

// With no call to decide on, the help still shows the decision keys,
// dimmed and saying they need a call, and pressing one says why it did
// nothing. With a call selected they are the real, enabled bindings.
func TestEmptyListHelpShowsDecisionKeysDimmed(t *testing.T) {
	e := newEnv(t)
	o := e.options()
	r := lipgloss.NewRenderer(io.Discard)
	r.SetColorProfile(termenv.TrueColor)
	r.SetHasDarkBackground(true)
	o.Renderer = r
	m := New(o)
	m = step(t, m, tea.WindowSizeMsg{Width: 80, Height: 24})
	m = settle(t, m, m.Init())

	short := m.help.ShortHelpView(m.ShortHelp())
	if got := ansi.Strip(short); !strings.Contains(got, "s r x m n need a call") || !strings.Contains(got, "q quit") {
		t.Fatalf("short help %q lacks the dimmed decision keys, or is cut", got)
	}
	dim := m.sh.st.Faint.Render("s r x m n")
	if !strings.Contains(short, dim) {
		t.Errorf("decision keys are not dimmed in %q (want %q)", short, dim)
	}
	full := m.help.FullHelpView(m.FullHelp())
	for _, want := range []string{"query status", "retry same key", "abandon", "mark applied", "note"} {
		if !strings.Contains(full, m.sh.st.Faint.Render(want)) {
			t.Errorf("full help lacks dimmed %q:\n%s", want, ansi.Strip(full))
		}
	}
	m = press(t, m, m.list.keys.Abandon)
	if !strings.Contains(m.message, "no call selected") {
		t.Errorf("x with no call: message %q", m.message)
	}

	e.seed()
	m = step(t, m, journalChangedMsg{})
	if got := ansi.Strip(m.help.ShortHelpView(m.ShortHelp())); !strings.Contains(got, "s query status") || strings.Contains(got, "need a call") {
		t.Fatalf("with a call selected the help is %q", got)
	}
}
