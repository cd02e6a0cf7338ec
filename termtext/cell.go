package termtext

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Cell makes one CSV cell inert for a spreadsheet and a terminal: C0 and C1
// controls other than newline and tab, and invalid UTF-8 bytes, are spelled
// \xNN; a cell that begins with '=', '+', '-', '@', a tab or a carriage
// return (what spreadsheets read as a formula) gets a leading "'", which
// they show as text (the OWASP "CSV injection" rule). The escaping is one
// way: the JSONL export keeps every value exactly.
func Cell(s string) string {
	if s == "" {
		return s
	}
	if !isPlainCell(s) {
		var b strings.Builder
		b.Grow(len(s) + 8)
		for i := 0; i < len(s); {
			r, size := utf8.DecodeRuneInString(s[i:])
			switch {
			case r == utf8.RuneError && size <= 1:
				fmt.Fprintf(&b, `\x%02x`, s[i])
			case r == '\n' || r == '\t':
				b.WriteRune(r)
			case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0):
				fmt.Fprintf(&b, `\x%02x`, r)
			default:
				b.WriteString(s[i : i+size])
			}
			i += size
		}
		s = b.String()
	}
	switch s[0] {
	case '=', '+', '-', '@', '\t', '\r':
		return "'" + s
	}
	return s
}

// isPlainCell reports whether s is printable ASCII (newlines and tabs
// allowed): nothing to escape.
func isPlainCell(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < 0x20 && c != '\n' && c != '\t') || c >= 0x7f {
			return false
		}
	}
	return true
}
