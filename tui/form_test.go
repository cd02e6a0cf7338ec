package tui

import (
	"strings"
	"testing"
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
