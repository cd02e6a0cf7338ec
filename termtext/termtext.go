// Package termtext makes text from an untrusted MCP server safe to print on
// a terminal: tool names, descriptions, results and errors may carry escape
// sequences that move the cursor, rewrite the title, set the clipboard
// (OSC 52) or hide text. Strip removes them so they show inert.
package termtext

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Strip removes ANSI/VT escape sequences (CSI, OSC, DCS, SOS, PM, APC, and
// two-byte escapes, in their 7-bit and 8-bit forms), every control
// character except newline and tab, and the Unicode bidirectional controls
// (LRM, RLM, ALM, embeddings, overrides, isolates) that could make a line
// read other than it is stored. Invalid UTF-8 becomes U+FFFD.
func Strip(s string) string {
	if isPlain(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			b.WriteRune(utf8.RuneError)
			i++
		case r == 0x1b: // ESC
			i = skipEscape(s, i+1)
		case r == 0x9b: // 8-bit CSI
			i = skipCSI(s, i+size)
		case r == 0x9d || r == 0x90 || r == 0x98 || r == 0x9e || r == 0x9f: // 8-bit OSC, DCS, SOS, PM, APC
			i = skipString(s, i+size)
		case r == '\n' || r == '\t':
			b.WriteRune(r)
			i += size
		case isControl(r) || isBidi(r):
			i += size // other C0 and C1 controls, bidi controls: dropped
		default:
			b.WriteString(s[i : i+size])
			i += size
		}
	}
	return b.String()
}

// Line is Strip for one-line contexts (a list row): newlines and tabs
// become spaces too.
func Line(s string) string {
	s = Strip(s)
	if strings.ContainsAny(s, "\n\t") {
		s = strings.NewReplacer("\r\n", " ", "\n", " ", "\t", " ").Replace(s)
	}
	return s
}

func isPlain(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 && c != '\n' && c != '\t' || c == 0x7f || c >= 0x80 {
			return false
		}
	}
	return true
}

// skipEscape skips what follows an ESC at s[i:].
func skipEscape(s string, i int) int {
	if i >= len(s) {
		return i
	}
	switch s[i] {
	case '[':
		return skipCSI(s, i+1)
	case ']', 'P', 'X', '^', '_':
		return skipString(s, i+1)
	}
	// Two-byte escape (ESC c, ESC 7, ...), possibly with intermediates
	// (ESC ( B): skip intermediates 0x20-0x2f, then one final byte.
	for i < len(s) && s[i] >= 0x20 && s[i] <= 0x2f {
		i++
	}
	if i < len(s) {
		i++
	}
	return i
}

// skipCSI skips parameters and intermediates up to the final byte.
func skipCSI(s string, i int) int {
	for i < len(s) {
		c := s[i]
		i++
		if c >= 0x40 && c <= 0x7e {
			return i
		}
		if c < 0x20 && c != 0x1b { // malformed: stop at a control
			return i
		}
	}
	return i
}

// skipString skips an OSC/DCS-style string up to BEL, ST (ESC \) or 8-bit ST.
func skipString(s string, i int) int {
	for i < len(s) {
		switch {
		case s[i] == 0x07:
			return i + 1
		case s[i] == 0x1b && i+1 < len(s) && s[i+1] == '\\':
			return i + 2
		case s[i] == 0xc2 && i+1 < len(s) && s[i+1] == 0x9c: // U+009C ST
			return i + 2
		}
		i++
	}
	return i
}

func isBidi(r rune) bool {
	return r == 0x200e || r == 0x200f || r == 0x061c || (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069)
}

// Name shows a name from a server (a tool's, a server's) with everything
// that is not plainly visible escaped where it stands: controls and escape
// sequences as \xNN, bidirectional, zero-width and other format characters
// as \uNNNN, invalid UTF-8 bytes as \xNN, and the backslash itself as \\ so
// that no honest name can spell an escaped one. Strip would drop those
// characters, and "create_order\x1b[8m" would then read exactly as the
// honest "create_order"; escaped, the two names look different.
func Name(s string) string {
	if isPlainName(s) {
		return s
	}
	return spell(s, func(r rune) string {
		switch {
		case r == '\\':
			return `\\`
		case isControl(r):
			return fmt.Sprintf(`\x%02x`, r)
		case unicode.Is(unicode.Cf, r) || unicode.IsSpace(r) && r != ' ' || r == utf8.RuneError:
			return fmt.Sprintf(`\u%04x`, r)
		}
		return ""
	})
}

// spell rewrites s rune by rune: an invalid UTF-8 byte becomes \xNN, and
// a rune for which as returns a spelling becomes that spelling ("" keeps
// the rune). Name and Cell differ only in their as.
func spell(s string, as func(r rune) string) string {
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size <= 1 {
			fmt.Fprintf(&b, `\x%02x`, s[i])
		} else if w := as(r); w != "" {
			b.WriteString(w)
		} else {
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// isControl: a C0 or C1 control, or DEL.
func isControl(r rune) bool { return r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) }

// isPlainName reports whether s is printable ASCII without a backslash:
// the usual tool name, shown as it is.
func isPlainName(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '\\' {
			return false
		}
	}
	return true
}
