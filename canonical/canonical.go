// Package canonical writes a JSON value in one canonical form, so that two
// texts meaning the same value are equal byte for byte. It is what "the same
// arguments" means (SPEC §9): the guard's fingerprint and the idempotency
// middleware both compare arguments in this form.
//
// The form is the JSON Canonicalization Scheme of RFC 8785:
//
//   - No insignificant whitespace.
//   - Object members sorted by name, names compared as UTF-16 code units
//     (RFC 8785 §3.2.3). This differs from Go's byte order where a character
//     above U+FFFF meets one in U+E000–U+FFFF: "\U0001F600" sorts before
//     "\uFB33". A name that occurs twice keeps its last member, as
//     encoding/json does.
//   - Strings escape only '"', '\' and the C0 controls: \b \t \n \f \r as
//     those short escapes, the others as \u00xx in lower-case hex. Everything
//     else is written as UTF-8, so "\u00e9" and "é" are one string, '<' '>'
//     '&' are not escaped and U+2028 and U+2029 are literal. Each byte of
//     invalid UTF-8, and each unpaired surrogate escape such as "\ud800",
//     becomes U+FFFD (as encoding/json decodes them), so strings that differ
//     only in their invalid bytes share a form.
//   - Numbers as ECMAScript's Number::toString writes a double: the fewest
//     significant digits, fixed notation for 1e-6 <= |x| < 1e21 and
//     exponential notation outside it ("1e+21", "1e-7", "1.5e-7"), "-0" as
//     "0". So "3", "3.0", "3e0", "30e-1" and "0.3e1" are all "3".
//
// One extension, for numbers. RFC 8785 first reads every number as an
// IEEE-754 double, so 9007199254740993 and 9007199254740992 would share a
// form, as would 0.1 and 0.1000000000000000000001. Here a number keeps its
// exact value instead: its form is its exact decimal value written by the
// same ECMAScript rules (sign, the significant digits without leading or
// trailing zeros, then fixed notation for 1e-6 <= |x| < 1e21 and
// exponential notation outside it). For a number written as the shortest
// digits that round trip to its double, which is what JavaScript, Go and
// Python write for a float, this is byte for byte RFC 8785's form. It
// differs only for a number whose value is not that of its double's shortest
// digits:
//
//	12345678901234567890        stays (RFC 8785: 12345678901234567000)
//	1152921504606846976 (2^60)  stays (RFC 8785: 1152921504606847000)
//	0.1000000000000000000001    stays (RFC 8785: 0.1)
//	333333333.33333329          stays (RFC 8785: 333333333.3333333)
//	1e400                       is 1e+400 (RFC 8785: refused, not a double)
//
// So two numbers share a form exactly when they are the same quantity, and
// integers of any size are kept exact ("12345678901234567890.0",
// "1.234567890123456789e19" and "12345678901234567890" are one form).
package canonical

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"slices"
	"strconv"
	"unicode/utf8"
)

// maxDepth is how deeply arrays and objects may nest: encoding/json's own
// limit, so Marshal accepts whatever Transform's decoder does.
const maxDepth = 10000

// Transform reads one JSON value (any JSON text, with whitespace around it)
// and returns its canonical form. It fails on invalid JSON and on anything
// but whitespace after the value.
func Transform(data []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF // no value at all
		}
		return nil, fmt.Errorf("read JSON: %w", err)
	}
	end := dec.InputOffset()
	if rest := bytes.TrimLeft(data[end:], " \t\r\n"); len(rest) > 0 {
		return nil, fmt.Errorf("read JSON: data after the value at byte %d", len(data)-len(rest))
	}
	return Marshal(v)
}

// Marshal writes v in canonical form. v is what encoding/json decodes into
// an any with UseNumber (map[string]any, []any, string, bool, nil,
// json.Number), and also float64, int, int64 and json.RawMessage (which is
// read as by Transform; nil is null). Any other value is encoded with
// encoding/json first.
//
// A float64 stands for the shortest decimal that round trips to it (the text
// encoding/json writes for it), so Marshal(0.1) is "0.1" and
// Marshal(float64(1<<60)) is "1152921504606847000", both as RFC 8785; an int
// or int64 stands for itself, so Marshal(int64(1<<60)) is
// "1152921504606846976". NaN and infinities are refused. A map whose names
// become equal once invalid UTF-8 is replaced is refused.
func Marshal(v any) ([]byte, error) {
	var e encoder
	if err := e.value(v, 0); err != nil {
		return nil, err
	}
	return e.buf, nil
}

type encoder struct {
	buf []byte
}

func (e *encoder) value(v any, depth int) error {
	switch x := v.(type) {
	case nil:
		e.buf = append(e.buf, "null"...)
	case bool:
		e.buf = strconv.AppendBool(e.buf, x)
	case string:
		e.buf = appendString(e.buf, x)
	case json.Number:
		return e.number(string(x))
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return fmt.Errorf("%v is not a JSON number", x)
		}
		// The shortest digits that round trip; the ECMAScript notation is
		// chosen by the same code that writes every other number.
		var scratch [32]byte
		return e.number(string(strconv.AppendFloat(scratch[:0], x, 'e', -1, 64)))
	case int: // its decimal digits are canonical: below 1e21, no leading zeros
		e.buf = strconv.AppendInt(e.buf, int64(x), 10)
	case int64:
		e.buf = strconv.AppendInt(e.buf, x, 10)
	case json.RawMessage:
		if x == nil {
			e.buf = append(e.buf, "null"...)
			return nil
		}
		b, err := Transform(x)
		if err != nil {
			return err
		}
		e.buf = append(e.buf, b...)
	case map[string]any:
		return e.object(x, depth+1)
	case []any:
		return e.array(x, depth+1)
	default:
		b, err := json.Marshal(x)
		if err != nil {
			return fmt.Errorf("encode %T: %w", x, err)
		}
		if b, err = Transform(b); err != nil {
			return fmt.Errorf("encode %T: %w", x, err)
		}
		e.buf = append(e.buf, b...)
	}
	return nil
}

func (e *encoder) object(m map[string]any, depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("nesting deeper than %d", maxDepth)
	}
	type member struct {
		name  string
		value any
	}
	members := make([]member, 0, len(m))
	for name, v := range m {
		members = append(members, member{validUTF8(name), v})
	}
	slices.SortFunc(members, func(a, b member) int { return compareUTF16(a.name, b.name) })
	e.buf = append(e.buf, '{')
	for i, mb := range members {
		if i > 0 {
			if mb.name == members[i-1].name {
				return fmt.Errorf("two member names are %q once invalid UTF-8 is replaced", mb.name)
			}
			e.buf = append(e.buf, ',')
		}
		e.buf = appendString(e.buf, mb.name)
		e.buf = append(e.buf, ':')
		if err := e.value(mb.value, depth); err != nil {
			return err
		}
	}
	e.buf = append(e.buf, '}')
	return nil
}

func (e *encoder) array(a []any, depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("nesting deeper than %d", maxDepth)
	}
	e.buf = append(e.buf, '[')
	for i, v := range a {
		if i > 0 {
			e.buf = append(e.buf, ',')
		}
		if err := e.value(v, depth); err != nil {
			return err
		}
	}
	e.buf = append(e.buf, ']')
	return nil
}

// compareUTF16 orders two valid UTF-8 strings as their UTF-16 encodings
// compare, code unit by code unit. Byte order is code point order, which is
// UTF-16 order except where a character above U+FFFF (a surrogate pair,
// first unit 0xD800–0xDBFF) meets one in U+E000–U+FFFF.
func compareUTF16(a, b string) int {
	n := min(len(a), len(b))
	i := 0
	for i < n && a[i] == b[i] {
		i++
	}
	if i == n {
		return len(a) - len(b)
	}
	// The common prefix is the same bytes, so both runes start at the same
	// place: the start of the rune holding byte i.
	for i > 0 && !utf8.RuneStart(a[i]) {
		i--
	}
	ra, _ := utf8.DecodeRuneInString(a[i:])
	rb, _ := utf8.DecodeRuneInString(b[i:])
	if ua, ub := firstUnit(ra), firstUnit(rb); ua != ub {
		return int(ua) - int(ub)
	}
	return int(ra) - int(rb) // both above U+FFFF: code point order is unit order
}

// firstUnit is the first UTF-16 code unit of r.
func firstUnit(r rune) rune {
	if r > 0xFFFF {
		return 0xD800 + (r-0x10000)>>10
	}
	return r
}

// validUTF8 replaces each byte of invalid UTF-8 in s by U+FFFD, as
// encoding/json does when it decodes a string.
func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	b := make([]byte, 0, len(s)+8)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = utf8.AppendRune(b, utf8.RuneError)
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return string(b)
}

const hexDigits = "0123456789abcdef"

// appendString writes s as RFC 8785 §3.2.2.2 does, invalid UTF-8 as U+FFFD.
func appendString(buf []byte, s string) []byte {
	buf = append(buf, '"')
	start := 0 // s[start:i] is pending, to be copied as it is
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			buf = append(buf, s[start:i]...)
			switch c {
			case '"', '\\':
				buf = append(buf, '\\', c)
			case '\b':
				buf = append(buf, '\\', 'b')
			case '\t':
				buf = append(buf, '\\', 't')
			case '\n':
				buf = append(buf, '\\', 'n')
			case '\f':
				buf = append(buf, '\\', 'f')
			case '\r':
				buf = append(buf, '\\', 'r')
			default:
				buf = append(buf, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			buf = append(buf, s[start:i]...)
			buf = utf8.AppendRune(buf, utf8.RuneError)
			i++
			start = i
			continue
		}
		i += size
	}
	buf = append(buf, s[start:]...)
	return append(buf, '"')
}

// number writes the JSON number text s as its exact decimal value in
// ECMAScript notation (see the package documentation).
func (e *encoder) number(s string) error {
	d, err := parseDecimal(s)
	if err != nil {
		return err
	}
	e.buf = d.append(e.buf)
	return nil
}

// decimal is a number's exact value: (-1 if neg) × 0.digits × 10^n, digits
// without leading or trailing zeros (empty for zero). This is ECMAScript's
// own view of a number (k digits, point position n), with any number of
// digits. An exponent too large for int64 arithmetic is kept in bigN.
type decimal struct {
	neg    bool
	digits string
	n      int64
	bigN   *big.Int // n, when the written exponent has more than maxExpDigits digits
}

// maxExpDigits bounds the written exponents done in int64: 10^15 plus the
// length of any input in memory cannot overflow.
const maxExpDigits = 15

// parseDecimal reads a JSON number (RFC 8259 §6 grammar) exactly.
func parseDecimal(s string) (decimal, error) {
	bad := func() (decimal, error) { return decimal{}, fmt.Errorf("%q is not a JSON number", s) }
	var d decimal
	i := 0
	if i < len(s) && s[i] == '-' {
		d.neg = true
		i++
	}
	intStart := i
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case i < len(s) && '1' <= s[i] && s[i] <= '9':
		for i < len(s) && isDigit(s[i]) {
			i++
		}
	default:
		return bad()
	}
	intPart := s[intStart:i]
	var frac string
	if i < len(s) && s[i] == '.' {
		i++
		fracStart := i
		for i < len(s) && isDigit(s[i]) {
			i++
		}
		if i == fracStart {
			return bad()
		}
		frac = s[fracStart:i]
	}
	expNeg, expDigits := false, ""
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			expNeg = s[i] == '-'
			i++
		}
		expStart := i
		for i < len(s) && isDigit(s[i]) {
			i++
		}
		if i == expStart {
			return bad()
		}
		expDigits = s[expStart:i]
	}
	if i != len(s) {
		return bad()
	}

	digits := intPart + frac
	lead := 0
	for lead < len(digits) && digits[lead] == '0' {
		lead++
	}
	end := len(digits)
	for end > lead && digits[end-1] == '0' {
		end--
	}
	d.digits = digits[lead:end]
	if d.digits == "" {
		return decimal{}, nil // zero, whatever its sign and exponent
	}
	point := int64(len(intPart) - lead) // where the point is, counted from the first significant digit
	for len(expDigits) > 1 && expDigits[0] == '0' {
		expDigits = expDigits[1:]
	}
	if len(expDigits) <= maxExpDigits {
		var exp int64
		if expDigits != "" {
			exp, _ = strconv.ParseInt(expDigits, 10, 64) // at most 15 digits: cannot fail
		}
		if expNeg {
			exp = -exp
		}
		d.n = point + exp
		return d, nil
	}
	exp, _ := new(big.Int).SetString(expDigits, 10)
	if expNeg {
		exp.Neg(exp)
	}
	d.bigN = exp.Add(exp, big.NewInt(point))
	return d, nil
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// append writes d as ECMAScript's Number::toString (ECMA-262, Number::toString
// step 5 onwards) writes a number with these digits k and point n.
func (d decimal) append(buf []byte) []byte {
	if d.digits == "" {
		return append(buf, '0')
	}
	if d.neg {
		buf = append(buf, '-')
	}
	k := int64(len(d.digits))
	if d.bigN == nil {
		n := d.n
		switch {
		case k <= n && n <= 21: // an integer: the digits, then n-k zeros
			buf = append(buf, d.digits...)
			for range n - k {
				buf = append(buf, '0')
			}
			return buf
		case 0 < n && n <= 21: // the point inside the digits
			buf = append(buf, d.digits[:n]...)
			buf = append(buf, '.')
			return append(buf, d.digits[n:]...)
		case -6 < n && n <= 0: // 0.000ddd
			buf = append(buf, '0', '.')
			for range -n {
				buf = append(buf, '0')
			}
			return append(buf, d.digits...)
		}
	}
	// Exponential: d[.ddd]e±(n-1).
	buf = append(buf, d.digits[0])
	if k > 1 {
		buf = append(buf, '.')
		buf = append(buf, d.digits[1:]...)
	}
	buf = append(buf, 'e')
	if d.bigN == nil {
		if d.n-1 >= 0 {
			buf = append(buf, '+')
		}
		return strconv.AppendInt(buf, d.n-1, 10)
	}
	e := new(big.Int).Sub(d.bigN, big.NewInt(1))
	if e.Sign() >= 0 {
		buf = append(buf, '+')
	}
	return e.Append(buf, 10)
}
