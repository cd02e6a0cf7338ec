package tui

import (
	"strings"
	"testing"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/exp/golden"
)

// A reason why a key did nothing answers that key only: the next key, or
// another screen, takes it away; what an action did stays.
func TestOneShotReasonGoesAtTheNextKeyOrScreen(t *testing.T) {
	e := newEnv(t)
	m := e.model(80, 24) // an empty journal: no call selected
	for _, tc := range []struct {
		name string
		then func(Model) Model
	}{
		{"next key", func(m Model) Model { return press(t, m, m.list.keys.NextTab) }},
		{"a key that does nothing", func(m Model) Model { return typeText(t, m, "z") }},
		{"another screen", func(m Model) Model { return step(t, m, showScreenMsg{Screen: screenTools}) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := press(t, m, m.list.keys.Retry)
			if !strings.Contains(m.View(), "! no call selected") {
				t.Fatalf("no reason shown for r with no call:\n%s", m.View())
			}
			m = tc.then(m)
			if v := m.View(); strings.Contains(v, "! no call selected") || m.message != "" {
				t.Fatalf("the reason stayed after the %s (%q):\n%s", tc.name, m.message, v)
			}
		})
	}
	t.Run("pressed again", func(t *testing.T) {
		m := press(t, m, m.list.keys.Retry)
		m = press(t, m, m.list.keys.Retry)
		if !strings.Contains(m.View(), "! no call selected") {
			t.Fatalf("the second r has no reason:\n%s", m.View())
		}
	})
	t.Run("an outcome stays", func(t *testing.T) {
		m := m
		m.setMessage("retried create_order key …abcdef (call 1): succeeded", false)
		m = press(t, m, m.list.keys.NextTab)
		m = step(t, m, showScreenMsg{Screen: screenTools})
		if !strings.Contains(m.View(), "retried create_order") {
			t.Fatalf("an action's outcome went with a key:\n%s", m.View())
		}
	})
}

// In the guided demo a long outcome wraps into the message lines, as it
// does outside the demo, with the guide line still under it; it is not
// cut at the window's width.
func TestGoldenGuidedMessageWraps(t *testing.T) {
	m := toUnknown(t, demoModel(t, newEnv(t), &demoFake{commit: true}))
	m = step(t, m, keyMsg("esc")) // decide later
	m = step(t, m, tea.WindowSizeMsg{Width: 120, Height: 30})
	m = press(t, m, m.list.keys.Query)
	m = press(t, m, defaultDialogKeys().Yes)
	want := "the server has it, so the first attempt took effect. m marks it applied; r resends with the same key (a keyed server replays it)"
	if len("✓ queried call 1 create_order key …EBTX9G: "+want) <= 120 {
		t.Fatal("the message fits one line: this test checks nothing")
	}
	v := m.View()
	checkFits(t, v, 120, 30)
	if g := guide(m); !strings.Contains(g, want) || !strings.Contains(g, "→ find_orders found the order") {
		t.Fatalf("message lines %q do not hold the whole outcome and the guide:\n%s", g, v)
	}
	golden.RequireEqual(t, v)
}

// At 80 columns the guided demo's last step keeps both its outcome and its
// guide whole: the message area has a fourth line below guideWide columns,
// so neither is cut with "…".
func TestGoldenGuidedDemoDone80x24(t *testing.T) {
	e := newEnv(t)
	m := demoModel(t, e, &demoFake{commit: true})
	m = step(t, m, tea.WindowSizeMsg{Width: 80, Height: 24})
	m = press(t, m, m.list.keys.NewCall)
	m = press(t, m, m.tools.keys.Select)
	m = press(t, m, m.form.keys.Send) // the answer is lost; the unknown dialog opens
	m = step(t, m, keyMsg("enter"))   // its highlighted step: retry, same key
	m = press(t, m, defaultDialogKeys().Yes)
	v := m.View()
	checkFits(t, v, 80, 24)
	g := guide(m)
	for _, want := range []string{
		"replayed by the server: the first attempt's result, nothing done twice",
		"→ Done: the demo server has one order under key …EBTX9G, sent 2 times: nothing done twice. enter: its history.",
	} {
		if !strings.Contains(g, want) {
			t.Errorf("message lines %q lack %q:\n%s", g, want, v)
		}
	}
	lines := strings.Split(v, "\n")
	for _, l := range lines[len(lines)-2-m.messageLines() : len(lines)-2] {
		if strings.HasSuffix(strings.TrimRight(l, " "), "…") {
			t.Errorf("a message line is cut: %q", l)
		}
	}
	golden.RequireEqual(t, v)
}
