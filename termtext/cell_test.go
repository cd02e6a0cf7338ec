package termtext

import "testing"

func TestCell(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"", ""},
		{"succeeded", "succeeded"},
		{`{"order_id":"o-1"}`, `{"order_id":"o-1"}`},
		{"=HYPERLINK(\"http://evil.example\",\"click\")", "'=HYPERLINK(\"http://evil.example\",\"click\")"},
		{"+1+cmd|' /C calc'!A0", "'+1+cmd|' /C calc'!A0"},
		{"-2+3", "'-2+3"},
		{"@SUM(A1:A2)", "'@SUM(A1:A2)"},
		{"\t=1", "'\t=1"},
		{"note: =1 inside", "note: =1 inside"},
		{"two\nlines\tand a tab", "two\nlines\tand a tab"},
		{"evil\x1b]0;title\x07", `evil\x1b]0;title\x07`},
		{"\x1b[2J=clear", `\x1b[2J=clear`},
		{"cr\rhere", `cr\x0dhere`},
		{"c1\u009bx", `c1\x9bx`},
		{"bad\xffbyte", `bad\xffbyte`},
		{"café", "café"},
		{"invoice\u202efdp.exe", `invoice\u202efdp.exe`},
		{"\u2066=1\u2069", `\u2066=1\u2069`},
	} {
		if got := Cell(c.in); got != c.want {
			t.Errorf("Cell(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
