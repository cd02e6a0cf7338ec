package tui

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/mcp-confirm/mcp-confirm/guard"
	"github.com/mcp-confirm/mcp-confirm/mcpclient"
	"github.com/mcp-confirm/mcp-confirm/pending"
)

// The views are rendered with no colour profile (init), so a correct
// screen holds no escape byte at all: any ESC, BEL, C1 control or bidi
// override in it came from the server.
func assertInert(t *testing.T, where, v string) {
	t.Helper()
	assertNoControls(t, where, v)
	for _, bad := range []string{"]52;", "]0;", "]8;", "[2J", "[31"} {
		// A name is shown with its escapes spelled out (\x1b]0;…), which
		// is inert text: only a sequence without that spelling came raw.
		if strings.Count(v, bad) > strings.Count(v, `\x1b`+bad) {
			t.Errorf("%s shows %q from the server:\n%q", where, bad, v)
		}
	}
}

// assertNoControls: no raw control byte or bidi override, though JSON may
// show an escape as text (\u001b), as the editor does for an argument name
// that really has one: that is the name the server will be sent.
func assertNoControls(t *testing.T, where, v string) {
	t.Helper()
	for _, bad := range []string{"\x1b", "\x07", "\u009b", "\u009d", "\u202e", "\u202c"} {
		if strings.Contains(v, bad) {
			t.Errorf("%s shows %q from the server:\n%q", where, bad, v)
		}
	}
}

// A real MCP server process whose name, descriptions, schema and results
// carry ANSI/OSC sequences: the console shows their text, inert.
func TestHostileServerIsShownInert(t *testing.T) {
	bin := buildBinary(t, "./testdata/hostile", "hostile")
	ctx := context.Background()
	j, err := pending.Open(ctx, filepath.Join(t.TempDir(), "journal.db"), pending.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	client := mcpclient.New(mcpclient.ServerSpec{Command: bin}, mcpclient.Options{StopGrace: 200 * time.Millisecond})
	defer client.Close()
	g := guard.New(j, client, guard.Options{Operator: "ops", WriteTimeout: 10 * time.Second})
	m := New(Options{Journal: j, Engine: g, Server: client, Tick: time.Millisecond})
	m = step(t, m, tea.WindowSizeMsg{Width: 100, Height: 30})
	m = settle(t, m, m.Init())
	if !m.sh.toolsLoaded {
		t.Fatalf("tools not listed: %v", m.sh.toolsErr)
	}

	m = press(t, m, m.list.keys.Tools)
	v := m.View()
	assertInert(t, "tools screen", v)
	for m.sh.tools[m.tools.sc.cur].Tool.Name != "write_evil" {
		m = press(t, m, m.tools.keys.Down)
	}
	v = m.View()
	assertInert(t, "tools screen", v)
	for _, want := range []string{"write_evil", `write_evil\x1b[8m`, "Writes things. Harmless text after.gnp.exe\n", "noteRED (string)", `hostile\x1b]0;pwned\x07-server`} {
		if !strings.Contains(v, want) {
			t.Errorf("tools screen lacks %q:\n%s", want, v)
		}
	}
	m = press(t, m, m.tools.keys.Select)
	assertNoControls(t, "new-call editor", m.View())
	if v := m.View(); !strings.Contains(v, `"note\u001b[31;1mRED\u001b[0m"`) {
		t.Errorf("the editor does not show the argument's real name as JSON text:\n%s", v)
	}
	m.form.ta.SetValue(`{"note": "hello"}`)
	m = press(t, m, m.form.keys.Send)
	v = m.View()
	assertInert(t, "call result", v)
	if !strings.Contains(v, "succeeded") || !strings.Contains(v, `"note": "structured"`) {
		t.Fatalf("result not shown:\n%s", v)
	}

	m = press(t, m, m.form.keys.Back)
	m = press(t, m, m.tools.keys.Back)
	for tabs[m.list.tab].State != pending.StateSucceeded {
		m = press(t, m, m.list.keys.NextTab)
	}
	assertInert(t, "calls list", m.View())
	m = press(t, m, m.list.keys.Detail)
	v = m.View()
	assertInert(t, "detail", v)
	for i := 0; i < 10 && !strings.Contains(v, `"note": "structured"`); i++ {
		m = press(t, m, m.detail.keys.PageDown)
		v += m.View()
	}
	assertInert(t, "detail, scrolled", v)
	if !strings.Contains(v, `"note": "structured"`) {
		t.Fatalf("detail does not show the structured result:\n%s", v)
	}
	m = press(t, m, m.detail.keys.Result) // the text part
	v = m.View()
	for i := 0; i < 10 && !strings.Contains(v, "RED click here"); i++ {
		m = press(t, m, m.detail.keys.PageDown)
		v += m.View()
	}
	assertInert(t, "detail, text result", v)
	if !strings.Contains(v, "result: RED click here") {
		t.Fatalf("detail does not show the result's text:\n%s", v)
	}
}

func TestCleanStripsControls(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"plain", "plain"},
		{"a\x1b]52;c;aGk=\x07b", "ab"},
		{"a\x1b]52;c;aGk=\x1b\\b", "ab"},
		{"\x1b[2J\x1b[Hclear", "clear"},
		{"\x1b[31mred\x1b[0m", "red"},
		{"\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\", "link"},
		{"left\u202eright\u202c", "leftright"},
		{"\u200fmark\u2066iso\u2069", "markiso"},
		{"c1\u009b2Jx", "c1x"},
		{"tab\tnew\nline", "tab new line"},
		{"bell\x07del\x7f", "belldel"},
	} {
		if got := clean(tc.in); got != tc.want {
			t.Errorf("clean(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	if got := cleanBlock("a\nb\x1b[2Jc\td"); got != "a\nbc    d" {
		t.Errorf("cleanBlock kept lines wrong: %q", got)
	}
}
