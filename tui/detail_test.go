package tui

import (
	"strings"
	"testing"

	"github.com/charmbracelet/x/exp/golden"

	"github.com/mcp-confirm/mcp-confirm/pending"
)

// A result that carries its data twice (structured content, and the same
// as text) is shown once: the structured part, until v shows the text.
// The help says what v switches to.
func TestDetailShowsOneResultPartAndVSwitches(t *testing.T) {
	e := newEnv(t)
	e.seed()
	m := e.model(80, 44)
	for tabs[m.list.tab].State != pending.StateSucceeded {
		m = press(t, m, m.list.keys.NextTab)
	}
	m = press(t, m, m.list.keys.Detail)
	v := m.View()
	checkFits(t, v, 80, 44)
	golden.RequireEqual(t, v)
	if !strings.Contains(v, `result (structured; v: text): {"order_id": 9}`) || strings.Contains(v, "order 9") {
		t.Fatalf("want the structured part only:\n%s", v)
	}
	if m = press(t, m, m.keys.Help); !strings.Contains(m.View(), "v results as text") {
		t.Fatalf("full help does not show v:\n%s", m.View())
	}
	m = press(t, m, m.keys.Help)

	m = press(t, m, m.detail.keys.Result)
	v = m.View()
	if !strings.Contains(v, "result (text; v: structured): order 9") || strings.Contains(v, "order_id") {
		t.Fatalf("v did not switch to the text part only:\n%s", v)
	}
	if m = press(t, m, m.keys.Help); !strings.Contains(m.View(), "v results as structured") {
		t.Fatalf("full help does not say v goes back:\n%s", m.View())
	}
	m = press(t, m, m.keys.Help)
	m = press(t, m, m.detail.keys.Result)
	if v := m.View(); !strings.Contains(v, `{"order_id": 9}`) {
		t.Fatalf("v again did not go back to the structured part:\n%s", v)
	}
}

func TestResultText(t *testing.T) {
	both := `{"content":[{"type":"text","text":"{\"b\":1,\"a\":\"x, y: z\"}"}],"structuredContent":{"b":1,"a":"x, y: z"}}`
	for _, tc := range []struct {
		name, raw        string
		structured, text string
	}{
		{"both", both, `{"a": "x, y: z", "b": 1}`, `{"b":1,"a":"x, y: z"}`},
		{"text only", `{"content":[{"type":"text","text":"done"},{"type":"image","data":"…"}]}`, "done\n[image content]", "done\n[image content]"},
		{"structured only", `{"content":[],"structuredContent":{"n":[1,2]}}`, `{"n": [1, 2]}`, `{"n": [1, 2]}`},
		{"structured null", `{"content":[{"type":"text","text":"t"}],"structuredContent":null}`, "t", "t"},
		{"escaped quote in a string", `{"structuredContent":{"q":"a\",b"}}`, `{"q": "a\",b"}`, `{"q": "a\",b"}`},
		{"hostile", `{"content":[{"type":"text","text":"\u001b]52;c;aGk=\u0007hi"}],"structuredContent":{"k\u001b[2J":"v\u202e"}}`, `{"k": "v"}`, "hi"},
		{"not a result", `[1,2]`, `[1,2]`, `[1,2]`},
		{"empty", ``, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := resultText([]byte(tc.raw), partStructured); got != tc.structured {
				t.Errorf("structured part = %q, want %q", got, tc.structured)
			}
			if got := resultText([]byte(tc.raw), partText); got != tc.text {
				t.Errorf("text part = %q, want %q", got, tc.text)
			}
		})
	}
}
