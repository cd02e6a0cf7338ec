package termtext

import "testing"

func TestStrip(t *testing.T) {
	cases := []struct{ name, in, want string }{
		{"plain", "create_order", "create_order"},
		{"sgr colour", "\x1b[31mred\x1b[0m", "red"},
		{"cursor moves", "a\x1b[2J\x1b[1;1Hb", "ab"},
		{"osc title bel", "\x1b]0;pwned\x07tool", "tool"},
		{"osc 52 clipboard st", "x\x1b]52;c;ZWNobyBoaQ==\x1b\\y", "xy"},
		{"osc 8 hyperlink", "\x1b]8;;http://evil\x1b\\click\x1b]8;;\x1b\\", "click"},
		{"dcs", "\x1bPq#0;2;0;0;0\x1b\\ok", "ok"},
		{"8-bit csi", "a\u009b31mb", "ab"},
		{"8-bit osc", "a\u009d0;t\u009cb", "ab"},
		{"charset escape", "\x1b(Bok", "ok"},
		{"c0 controls", "a\rb\bc\x00d\x07e", "abcde"},
		{"keeps newline tab", "a\n\tb", "a\n\tb"},
		{"unterminated osc", "ok\x1b]0;never ends", "ok"},
		{"invalid utf8", "a\xffb", "a\uFFFDb"},
		{"unicode kept", "Zürich — 東京", "Zürich — 東京"},
		{"bidi override", "invoice\u202Efdp.exe", "invoicefdp.exe"},
		{"bidi isolates and marks", "a\u2066b\u2069c\u200ed\u200fe\u061cf", "abcdef"},
	}
	for _, c := range cases {
		if got := Strip(c.in); got != c.want {
			t.Errorf("%s: Strip(%q) = %q, want %q", c.name, c.in, got, c.want)
		}
	}
}

func TestLine(t *testing.T) {
	if got := Line("a\nb\tc\x1b[1m"); got != "a b c" {
		t.Fatalf("Line = %q", got)
	}
}

func FuzzStripLeavesNoControls(f *testing.F) {
	f.Add("\x1b]0;x\x07\x1b[1mhi")
	f.Fuzz(func(t *testing.T, s string) {
		for _, r := range Strip(s) {
			if (r < 0x20 && r != '\n' && r != '\t') || r == 0x7f || (r >= 0x80 && r < 0xa0) || isBidi(r) {
				t.Fatalf("Strip(%q) kept control %U", s, r)
			}
		}
	})
}

func TestName(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"create_order", "create_order"},
		{"get-order.v2 (beta)", "get-order.v2 (beta)"},
		{"évènement", "évènement"},
		{"evil\x1b]0;pwned\x07", `evil\x1b]0;pwned\x07`},
		{"create_order\x1b[8m", `create_order\x1b[8m`},
		{"create\u200border", `create\u200border`},
		{"order\u202esll", `order\u202esll`},
		{"a\tb\nc", `a\x09b\x0ac`},
		{"c1\u009bx", `c1\x9bx`},
		{"bad\xffbyte", `bad\xffbyte`},
		{`back\slash`, `back\\slash`},
		{`create_order\x1b`, `create_order\\x1b`},
		{"nbsp\u00a0x", `nbsp\u00a0x`},
		{"bom\ufeff", `bom\ufeff`},
	} {
		if got := Name(c.in); got != c.want {
			t.Errorf("Name(%q) = %q, want %q", c.in, got, c.want)
		}
		if got := Name(c.in); Strip(got) != got {
			t.Errorf("Name(%q) = %q still holds controls", c.in, got)
		}
	}
	// Two names that differ only in what Strip drops must not look alike.
	honest, evil := "create_order", "create_order\x1b[8m"
	if Line(honest) != Line(evil) {
		t.Fatal("the premise: Strip makes them alike")
	}
	if Name(honest) == Name(evil) {
		t.Errorf("Name shows %q and %q alike", honest, evil)
	}
}
