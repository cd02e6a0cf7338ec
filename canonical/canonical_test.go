package canonical

import (
	"encoding/json"
	"math"
	"math/big"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

func TestTransform(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		// Numbers: one spelling per quantity.
		{"integer", `3`, `3`},
		{"integer with fraction zero", `3.0`, `3`},
		{"integer with exponent", `3e0`, `3`},
		{"exponent moves the point left", `30e-1`, `3`},
		{"exponent moves the point right", `0.3e1`, `3`},
		{"capital E and plus", `3E+0`, `3`},
		{"trailing zeros", `300e-2`, `3`},
		{"hundred", `1e2`, `100`},
		{"1e21 is where exponents begin", `1e21`, `1e+21`},
		{"1e21 written out", `1000000000000000000000`, `1e+21`},
		{"1e20 is still fixed", `1e20`, `100000000000000000000`},
		{"0.000001 is still fixed", `0.000001`, `0.000001`},
		{"1e-7 is exponential", `1e-7`, `1e-7`},
		{"1e-7 written out", `0.0000001`, `1e-7`},
		{"exponential with digits", `0.00000015`, `1.5e-7`},
		{"small fixed with digits", `-0.000001234`, `-0.000001234`},
		{"small exponential with digits", `0.0000001234`, `1.234e-7`},
		{"minus zero", `-0`, `0`},
		{"minus zero with fraction and exponent", `-0.000e10`, `0`},
		{"zero with exponent", `0e-5`, `0`},
		{"1.5", `1.5`, `1.5`},
		{"0.1", `0.1`, `0.1`},
		{"negative", `-1.50`, `-1.5`},
		{"point inside", `123.456`, `123.456`},
		{"RFC 8785 1E30", `1E30`, `1e+30`},
		{"RFC 8785 4.50", `4.50`, `4.5`},
		{"RFC 8785 2e-3", `2e-3`, `0.002`},
		{"RFC 8785 1e-27", `0.000000000000000000000000001`, `1e-27`},
		// Numbers: the extension keeps exact values.
		{"2^53", `9007199254740992`, `9007199254740992`},
		{"2^53+1 stays exact", `9007199254740993`, `9007199254740993`},
		{"big integer", `12345678901234567890`, `12345678901234567890`},
		{"big integer with fraction zero", `12345678901234567890.0`, `12345678901234567890`},
		{"big integer in exponent form", `1.234567890123456789e19`, `12345678901234567890`},
		{"big integer, point far left", `0.0012345678901234567890e22`, `12345678901234567890`},
		{"negative big integer", `-12345678901234567890`, `-12345678901234567890`},
		{"2^60 written out stays exact", `1152921504606846976`, `1152921504606846976`},
		{"over-precise fraction stays exact", `0.1000000000000000000001`, `0.1000000000000000000001`},
		{"same double as 0.1, other quantity", `0.10000000000000001`, `0.10000000000000001`},
		{"RFC 8785's over-precise sample stays exact", `333333333.33333329`, `333333333.33333329`},
		{"integer from 1e21 on is exponential", `123456789012345678901234`, `1.23456789012345678901234e+23`},
		{"beyond a double", `1e400`, `1e+400`},
		{"below a double", `-1e-400`, `-1e-400`},
		{"exponent beyond int64", `1e1000000000000000000000`, `1e+1000000000000000000000`},
		{"negative exponent beyond int64", `1.5e-1000000000000000000000`, `1.5e-1000000000000000000000`},
		{"exponent beyond int64 folded with the point", `1000e-1000000000000000000003`, `1e-1000000000000000000000`},
		{"zero with exponent beyond int64", `0.0e99999999999999999999`, `0`},
		{"exponent with leading zeros", `1e0000000000000000000000021`, `1e+21`},

		// Structure.
		{"key order", `{"b":1,"a":2}`, `{"a":2,"b":1}`},
		{"whitespace", " \t\r\n{ \"a\" : [ 1 , 2 ] , \"b\" : { } }\n ", `{"a":[1,2],"b":{}}`},
		{"nested arrays keep order", `[3,1,[2,1],{"z":[0,-1],"y":null}]`, `[3,1,[2,1],{"y":null,"z":[0,-1]}]`},
		{"literals", `[null,true,false]`, `[null,true,false]`},
		{"empties", `[{},[],""]`, `[{},[],""]`},
		{"duplicate name: last wins", `{"a":1,"b":0,"a":2}`, `{"a":2,"b":0}`},
		{"top-level string", `"x"`, `"x"`},

		// Strings.
		{"escape or literal: same string", `"\u00e9"`, `"é"`},
		{"literal stays literal", `"é"`, `"é"`},
		{"no HTML escaping", `"<&>\u003c\u0026\u003e"`, `"<&><&>"`},
		{"U+2028 and U+2029 literal", `"\u2028\u2029"`, "\"\u2028\u2029\""},
		{"short escapes", `"\u0008\u0009\u000a\u000c\u000d"`, `"\b\t\n\f\r"`},
		{"other C0 controls as lower-case \\u00xx", `"\u0000\u001F\u000B"`, `"\u0000\u001f\u000b"`},
		{"DEL literal", `"\u007f"`, "\"\x7f\""},
		{"quote and backslash", `"\"\\"`, `"\"\\"`},
		{"solidus unescaped", `"\/"`, `"/"`},
		{"surrogate pair", `"\ud83d\ude00"`, `"😀"`},
		{"unpaired surrogate", `"\ud800x"`, "\"\uFFFDx\""},
		{"invalid UTF-8, one U+FFFD a byte", "\"a\xe2\x82\xffb\"", "\"a\uFFFD\uFFFD\uFFFDb\""},
		{"U+FFFD itself", "\"\uFFFD\"", "\"\uFFFD\""},
		{"invalid UTF-8 in a name", "{\"\xff\":1}", "{\"\uFFFD\":1}"},

		// Member names sort as UTF-16 code units (RFC 8785 §3.2.3's example).
		{"RFC 8785 §3.2.3", `{
			"\u20ac": "Euro Sign",
			"\r": "Carriage Return",
			"\ufb33": "Hebrew Letter Dalet With Dagesh",
			"1": "One",
			"\ud83d\ude00": "Emoji: Grinning Face",
			"\u0080": "Control",
			"\u00f6": "Latin Small Letter O With Diaeresis"
		}`, "{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\u0080\":\"Control\",\"ö\":\"Latin Small Letter O With Diaeresis\"," +
			"\"€\":\"Euro Sign\",\"😀\":\"Emoji: Grinning Face\",\"\ufb33\":\"Hebrew Letter Dalet With Dagesh\"}"},
		{"above U+FFFF before U+E000", `{"\ue000":1,"\ud800\udc00":2,"\uffff":3,"\ud7ff":4}`, "{\"\ud7ff\":4,\"\U00010000\":2,\"\ue000\":1,\"\uffff\":3}"},
		{"prefix first", `{"ab":1,"a":2,"":3}`, `{"":3,"a":2,"ab":1}`},

		// RFC 8785 §3.2.4's example, with its one over-precise number written
		// as the digits of its double: then the output is RFC 8785's byte for
		// byte.
		{"RFC 8785 §3.2.4", `{
		  "numbers": [333333333.3333333, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
		  "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
		  "literals": [null, true, false]
		}`, `{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}`},
		// As the RFC writes it: the extension keeps 333333333.33333329, a
		// quantity other than its double's 333333333.3333333.
		{"RFC 8785 §3.2.4 as written", `{
		  "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
		  "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
		  "literals": [null, true, false]
		}`, `{"literals":[null,true,false],"numbers":[333333333.33333329,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Transform([]byte(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("Transform(%s)\n got %s\nwant %s", tt.in, got, tt.want)
			}
			again, err := Transform(got)
			if err != nil || string(again) != string(got) {
				t.Errorf("not idempotent: %s, %v", again, err)
			}
		})
	}
}

func TestTransformRefuses(t *testing.T) {
	for _, in := range []string{
		``, ` `, `{`, `[1,]`, `{"a" 1}`, `{"a":1,}`, `1 2`, `{} x`, `[1]]`, `"a"b`,
		`01`, `1.`, `.5`, `+1`, `1e`, `1e+`, `-`, `NaN`, `Infinity`, `0x10`,
		"\"\x01\"", `"\x"`, `'a'`, `nul`, "\ufeff1",
	} {
		if got, err := Transform([]byte(in)); err == nil {
			t.Errorf("Transform(%q) = %s, want an error", in, got)
		}
	}
}

func TestMarshal(t *testing.T) {
	tests := []struct {
		name string
		in   any
		want string
	}{
		{"what UseNumber decodes", map[string]any{
			"s": "é", "b": true, "n": nil, "num": json.Number("3.0"), "a": []any{json.Number("1e21"), "x"},
			"o": map[string]any{"z": 1, "y": []any{}},
		}, `{"a":[1e+21,"x"],"b":true,"n":null,"num":3,"o":{"y":[],"z":1},"s":"é"}`},
		{"int", 42, `42`},
		{"negative int64", int64(-9007199254740993), `-9007199254740993`},
		{"int64 minimum", int64(math.MinInt64), `-9223372036854775808`},
		{"int64 2^60 is exact", int64(1 << 60), `1152921504606846976`},
		{"float64 2^60 is its shortest digits, as RFC 8785", float64(1 << 60), `1152921504606847000`},
		{"float64 0.1", 0.1, `0.1`},
		{"float64 integral", 3.0, `3`},
		{"float64 minus zero", math.Copysign(0, -1), `0`},
		{"float64 1e21", 1e21, `1e+21`},
		{"float64 1e-7", 1e-7, `1e-7`},
		{"raw message", json.RawMessage(` {"b": 2.50, "a": "\u00e9"} `), `{"a":"é","b":2.5}`},
		{"nil raw message", json.RawMessage(nil), `null`},
		{"raw message inside", map[string]any{"r": json.RawMessage(`[1.0]`)}, `{"r":[1]}`},
		{"invalid UTF-8 as encoding/json reads it", "a\xe2\x82\xffb", "\"a\uFFFD\uFFFD\uFFFDb\""},
		{"other types through encoding/json", map[string]any{"u": uint64(1 << 63), "l": []string{"<"}, "m": map[string]int{"b": 1, "a": 2}},
			`{"l":["<"],"m":{"a":2,"b":1},"u":9223372036854775808}`},
		{"float32 as encoding/json writes it", float32(0.1), `0.1`},
		{"nil", nil, `null`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Marshal(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("got %s, want %s", got, tt.want)
			}
		})
	}
}

func TestMarshalRefuses(t *testing.T) {
	for name, in := range map[string]any{
		"NaN":                    math.NaN(),
		"infinity":               math.Inf(-1),
		"bad number":             json.Number("1.2.3"),
		"empty number":           json.Number(""),
		"number with space":      json.Number(" 1"),
		"bad raw message":        json.RawMessage(`{`),
		"names equal once fixed": map[string]any{"\xff": 1, "\xfe": 2},
		"channel":                make(chan int),
		"nested NaN":             []any{map[string]any{"x": math.NaN()}},
	} {
		if got, err := Marshal(in); err == nil {
			t.Errorf("%s: Marshal = %s, want an error", name, got)
		}
	}
}

// A map that contains itself is refused, not followed forever.
func TestMarshalCycle(t *testing.T) {
	m := map[string]any{}
	m["self"] = m
	if _, err := Marshal(m); err == nil {
		t.Error("no error for a cyclic map")
	}
}

// As deep as encoding/json reads, and no deeper.
func TestDepth(t *testing.T) {
	deep := strings.Repeat("[", maxDepth) + strings.Repeat("]", maxDepth)
	got, err := Transform([]byte(deep))
	if err != nil || string(got) != deep {
		t.Fatalf("depth %d: %v", maxDepth, err)
	}
	if _, err := Transform([]byte("[" + deep + "]")); err == nil {
		t.Error("no error past the depth limit")
	}
}

// RFC 8785 Appendix B: IEEE-754 doubles (as bits) and their canonical text.
// Each row is also checked against strconv: the text reads back as exactly
// that double.
func TestAppendixB(t *testing.T) {
	tests := []struct {
		bits uint64
		want string
	}{
		{0x0000000000000000, "0"},
		{0x8000000000000000, "0"}, // minus zero
		{0x0000000000000001, "5e-324"},
		{0x8000000000000001, "-5e-324"},
		{0x7fefffffffffffff, "1.7976931348623157e+308"},
		{0xffefffffffffffff, "-1.7976931348623157e+308"},
		{0x4340000000000000, "9007199254740992"},
		{0xc340000000000000, "-9007199254740992"},
		{0x4430000000000000, "295147905179352830000"},
		{0x44b52d02c7e14af5, "9.999999999999997e+22"},
		{0x44b52d02c7e14af6, "1e+23"},
		{0x44b52d02c7e14af7, "1.0000000000000001e+23"},
		{0x444b1ae4d6e2ef4e, "999999999999999700000"},
		{0x444b1ae4d6e2ef4f, "999999999999999900000"},
		{0x444b1ae4d6e2ef50, "1e+21"},
		{0x3eb0c6f7a0b5ed8c, "9.999999999999997e-7"},
		{0x3eb0c6f7a0b5ed8d, "0.000001"},
		{0x41b3de4355555553, "333333333.3333332"},
		{0x41b3de4355555554, "333333333.33333325"},
		{0x41b3de4355555555, "333333333.3333333"},
		{0x41b3de4355555556, "333333333.3333334"},
		{0x41b3de4355555557, "333333333.33333343"},
		{0xbecbf647612f3696, "-0.0000033333333333333333"},
		{0x43143ff3c1cb0959, "1424953923781206.2"},
	}
	for _, tt := range tests {
		f := math.Float64frombits(tt.bits)
		back, err := strconv.ParseFloat(tt.want, 64)
		if err != nil || (back != f) || (f != 0 && math.Float64bits(back) != tt.bits) {
			t.Fatalf("%016x: %s does not read back as that double (%v)", tt.bits, tt.want, back)
		}
		got, err := Marshal(f)
		if err != nil || string(got) != tt.want {
			t.Errorf("Marshal(%016x) = %s, %v; want %s", tt.bits, got, err, tt.want)
		}
		// The same text read back is already canonical: these are shortest digits.
		if got, err := Transform([]byte(tt.want)); err != nil || string(got) != tt.want {
			t.Errorf("Transform(%s) = %s, %v", tt.want, got, err)
		}
	}
}

// esReference writes f as ECMAScript does, from strconv alone: fixed
// notation with the shortest digits for 1e-6 <= |f| < 1e21, otherwise
// strconv's exponent form without its exponent's leading zeros.
func esReference(f float64) string {
	if f == 0 {
		return "0"
	}
	if a := math.Abs(f); a >= 1e-6 && a < 1e21 {
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	mant, exp, _ := strings.Cut(strconv.FormatFloat(f, 'e', -1, 64), "e")
	return mant + "e" + exp[:1] + strings.TrimLeft(exp[1:], "0")
}

// Random doubles, of every magnitude, against the reference; and each
// output read back is the same double, and canonical already.
func TestFloatsAgainstReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(8785, 1))
	check := func(f float64) {
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return
		}
		got, err := Marshal(f)
		if err != nil {
			t.Fatal(err)
		}
		if want := esReference(f); string(got) != want {
			t.Fatalf("Marshal(%016x) = %s, want %s", math.Float64bits(f), got, want)
		}
		if back, _ := strconv.ParseFloat(string(got), 64); back != f {
			t.Fatalf("%s reads back as %v, not %v", got, back, f)
		}
		if again, _ := Transform(got); string(again) != string(got) {
			t.Fatalf("Transform(%s) = %s", got, again)
		}
	}
	for range 200000 {
		check(math.Float64frombits(rng.Uint64()))
	}
	for range 100000 { // ordinary magnitudes, where the fixed notation is
		check((rng.Float64() - 0.5) * math.Pow(10, float64(rng.IntN(30)-10)))
	}
	for e := -330; e <= 310; e++ { // around each power of ten
		p := math.Pow(10, float64(e))
		check(p)
		check(math.Nextafter(p, 0))
		check(math.Nextafter(p, math.Inf(1)))
	}
}

// ratOf is the exact value of a JSON number, when its exponent is small
// enough to compute with; ok is false otherwise.
func ratOf(s string) (r *big.Rat, ok bool) {
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		e, err := strconv.Atoi(s[i+1:])
		if err != nil || e > 2000 || e < -2000 {
			return nil, false
		}
	}
	r, ok = new(big.Rat).SetString(s)
	return r, ok
}

// Two numbers share a form exactly when they are the same quantity.
func TestNumberFormIsTheQuantity(t *testing.T) {
	numbers := []string{
		"0", "-0", "0.0", "0e10", "3", "3.0", "3e0", "30e-1", "0.3e1", "-3",
		"0.1", "0.10", "1e-1", "0.1000000000000000000001", "0.10000000000000001",
		"0.1000000000000000055511151231257827021181583404541015625", // the double nearest 0.1, exactly
		"9007199254740992", "9007199254740993", "9007199254740994", "9.007199254740993e15",
		"1152921504606846976", "1152921504606847000", "1.152921504606847e18",
		"12345678901234567890", "12345678901234567890.0", "1.234567890123456789e19", "12345678901234567000",
		"1e21", "1000000000000000000000", "1e+21", "999999999999999900000", "999999999999999999999",
		"1e-7", "0.0000001", "1.0e-7", "1e-6", "0.000001", "9.999999999999997e-7",
		"333333333.33333329", "333333333.3333333", "1e400", "1e-400", "10e399",
	}
	form := map[string]string{}
	for _, n := range numbers {
		b, err := Transform([]byte(n))
		if err != nil {
			t.Fatal(err)
		}
		form[n] = string(b)
	}
	for _, a := range numbers {
		for _, b := range numbers {
			ra, _ := ratOf(a)
			rb, _ := ratOf(b)
			if same := ra.Cmp(rb) == 0; same != (form[a] == form[b]) {
				t.Errorf("%s → %s and %s → %s: same quantity %v", a, form[a], b, form[b], same)
			}
		}
	}
}

func BenchmarkTransform(b *testing.B) {
	args := []byte(`{"buyer": "alice", "item": "widget-42", "quantity": 2, "price": 19.99, "note": "leave at the door"}`)
	b.SetBytes(int64(len(args)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Transform(args); err != nil {
			b.Fatal(err)
		}
	}
}
