package termtext

import (
	"fmt"
)

// Cell makes one CSV cell inert for a spreadsheet and a terminal: C0 and C1
// controls other than newline and tab, and invalid UTF-8 bytes, are spelled
// \xNN, the bidirectional controls (which reorder what a terminal shows)
// \uNNNN; a cell that begins with '=', '+', '-', '@', a tab or a carriage
// return (what spreadsheets read as a formula) gets a leading "'", which
// they show as text (the OWASP "CSV injection" rule). The escaping is one
// way: the JSONL export keeps every value exactly.
func Cell(s string) string {
	if s == "" {
		return s
	}
	if !isPlainCell(s) {
		s = spell(s, func(r rune) string {
			switch {
			case isControl(r) && r != '\n' && r != '\t':
				return fmt.Sprintf(`\x%02x`, r)
			case isBidi(r):
				return fmt.Sprintf(`\u%04x`, r)
			}
			return ""
		})
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
