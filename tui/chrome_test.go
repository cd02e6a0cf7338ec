package tui

import (
	"strings"
	"testing"
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
