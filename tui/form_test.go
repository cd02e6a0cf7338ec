package tui

import (
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/mcp-confirm/mcp-confirm/guard"
)

// The editor's guide line, and the guided demo's, follow the validation
// of the text as it stands after every edit: "ready" only when it fits.
func TestEditorGuideFollowsTheValidation(t *testing.T) {
	m := demoModel(t, newEnv(t), &demoFake{commit: true})
	m = press(t, m, m.list.keys.NewCall)
	m = press(t, m, m.tools.keys.Select)
	line := func(m Model) string { // the line under the editor
		ls := strings.Split(m.form.View(), "\n")
		return ls[len(ls)-1]
	}
	if l := line(m); !strings.HasPrefix(l, "✓ ready: the arguments fit the schema") {
		t.Fatalf("prefilled editor: %q", l)
	}
	wantGuide(t, m, "The arguments are filled in from the schema", "do not fit")

	m = typeText(t, m, "{{") // after the prefilled object: not JSON any more
	if l := line(m); !strings.HasPrefix(l, "not ready: not valid JSON") {
		t.Fatalf("invalid JSON: %q", l)
	}
	wantGuide(t, m, "The arguments do not fit the schema yet", "ready", "filled in")

	m = step(t, m, keyMsg("backspace"))
	m = step(t, m, keyMsg("backspace"))
	if l := line(m); !strings.HasPrefix(l, "✓ ready") {
		t.Fatalf("fixed JSON: %q\n%s", l, m.form.ta.Value())
	}
	wantGuide(t, m, "The arguments are filled in from the schema")

	// A schema problem, refused by ctrl+s: the list follows the fix.
	m.form.ta.SetValue(`{"item": "widget", "quantity": 0, "buyer": "alice"}`)
	m = press(t, m, m.form.keys.Send)
	if v := m.form.View(); !strings.Contains(v, "Not sent; fix the arguments:") || !strings.Contains(v, "quantity must be at least 1") {
		t.Fatalf("refused send:\n%s", v)
	}
	wantGuide(t, m, "The arguments do not fit the schema yet")
	m.form.ta.SetValue(`{"item": "widget", "quantity": 1, "buyer": "alice"`)
	m = typeText(t, m, "}")
	if l := line(m); !strings.HasPrefix(l, "✓ fixed: the arguments fit the schema now") {
		t.Fatalf("after the fix: %q\n%s", l, m.form.View())
	}
	wantGuide(t, m, "The arguments are filled in from the schema")
}

// The in-flight line shows the idle clock the guard runs on that write:
// --timeout when given, else the policy's for the tool, else its
// [defaults], else guard's default; not one number for every tool.
func TestInFlightLineShowsTheToolsClock(t *testing.T) {
	pol, err := guard.ParsePolicy(`
[defaults]
write_timeout = "7s"
[tools.create_order]
timeout = "3s"
`, "test policy")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		policy   *guard.Policy
		override time.Duration
		tool     string
		want     string
	}{
		{"the tool's timeout", pol, 0, "create_order", "for 3s → unknown"},
		{"the policy's default", pol, 0, "send_email", "for 7s → unknown"},
		{"--timeout wins", pol, 2 * time.Second, "create_order", "for 2s → unknown"},
		{"no policy", nil, 0, "create_order", "for 30s → unknown"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			o := e.options()
			o.Policy, o.WriteTimeout = tc.policy, tc.override
			m := New(o)
			m = step(t, m, tea.WindowSizeMsg{Width: 120, Height: 30})
			m = settle(t, m, m.Init())
			m = step(t, m, showScreenMsg{Screen: screenForm, Tool: tc.tool})
			nm, _ := m.Update(keyMsg("ctrl+s")) // in flight: its command is not run
			m = nm.(Model)
			if v := m.View(); !m.form.sending || !strings.Contains(v, tc.want) {
				t.Fatalf("in-flight line lacks %q:\n%s", tc.want, v)
			}
		})
	}
}
