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

// wrap breaks at spaces only: a key, a hyphenated word or a stamp (its
// parts joined by no-break spaces) is never split unless it is wider than
// the line on its own; then it starts a line and nothing of it is lost.
func TestWrapKeepsTokensWhole(t *testing.T) {
	st := stamp(t0)
	for _, tc := range []struct {
		name string
		in   string
		w    int
		want []string
	}{
		{"fits", "short line", 20, []string{"short line"}},
		{"at spaces", "aaa bbb ccc ddd", 10, []string{"aaa bbb", "ccc ddd"}},
		{"key whole", "key 01HF7YAT04JVKA5YR8VQSGZYWH-abc and more", 30,
			[]string{"key", "01HF7YAT04JVKA5YR8VQSGZYWH-abc", "and more"}},
		{"hyphens are not breaks", "created 2026-03-14 here", 15, []string{"created", "2026-03-14 here"}},
		{"stamp whole", "settled late " + st + " (2m ago)", 26, []string{"settled late", st, "(2m ago)"}},
		{"wider than the line: own lines, all kept", "see 0123456789abcdefghij0123 end", 10,
			[]string{"see", "0123456789", "abcdefghij", "0123 end"}},
		{"indentation kept", "    aaa bbb ccc", 11, []string{"    aaa bbb", "ccc"}},
		{"indentation given up for a whole token", "      0123456789", 10, []string{"0123456789"}},
		{"spaces at the break dropped", "aaaa     bbbb", 10, []string{"aaaa", "bbbb"}},
		{"lines kept", "a\n\nb", 10, []string{"a", "", "b"}},
		{"wide runes", "日本語の文字 テキスト", 12, []string{"日本語の文字", "テキスト"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := strings.Split(wrap(tc.in, tc.w), "\n")
			if strings.Join(got, "|") != strings.Join(tc.want, "|") {
				t.Errorf("wrap(%q, %d) = %q, want %q", tc.in, tc.w, got, tc.want)
			}
			for _, l := range got {
				if lipglossWidth(l) > tc.w {
					t.Errorf("line %q is wider than %d", l, tc.w)
				}
			}
		})
	}
	if strings.Contains(st, " ") {
		t.Errorf("stamp %q has a breaking space", st)
	}
}
