package termtext

import (
	"fmt"
	"unicode/utf8"
)

// JSON makes JSON text safe to print on a terminal without changing what it
// decodes to. encoding/json escapes the C0 controls (ESC among them) but
// leaves DEL, the C1 controls (U+009B is an 8-bit CSI, U+009D an OSC) and
// the bidirectional controls raw, and passes a json.RawMessage (a server's
// result, kept as the bytes it sent) through as it is. JSON spells each of
// those as \uNNNN and each run of invalid UTF-8 as one U+FFFD, as
// bytes.ToValidUTF8 does (a decoder reads such bytes as U+FFFD anyway).
// In valid JSON a non-ASCII rune or DEL can only stand inside a string,
// where \uNNNN means the same rune, so the text stays valid and its values
// exact.
func JSON(p []byte) []byte {
	if isPlainJSON(p) {
		return p
	}
	out := make([]byte, 0, len(p)+16)
	invalid := false // the last byte was invalid UTF-8: its run has its U+FFFD
	for i := 0; i < len(p); {
		r, size := utf8.DecodeRune(p[i:])
		bad := r == utf8.RuneError && size <= 1
		switch {
		case bad && invalid:
		case bad:
			out = utf8.AppendRune(out, utf8.RuneError)
		// C0 stays as it is: encoding/json escapes it inside strings,
		// and outside them it can only be JSON's whitespace.
		case (r >= 0x7f && isControl(r)) || isBidi(r):
			out = fmt.Appendf(out, `\u%04x`, r)
		default:
			out = append(out, p[i:i+size]...)
		}
		invalid = bad
		i += size
	}
	return out
}

// isPlainJSON reports whether p is ASCII without DEL: nothing to spell.
func isPlainJSON(p []byte) bool {
	for _, c := range p {
		if c >= 0x7f {
			return false
		}
	}
	return true
}
