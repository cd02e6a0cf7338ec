package canonical

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"unicode/utf8"
)

var fuzzSeeds = []string{
	`{"b":1,"a":[1,2.50,"x"],"c":{"e":null,"d":true}}`,
	`{"numbers":[333333333.33333329,1E30,4.50,2e-3,0.000000000000000000000000001],"string":"\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/","literals":[null,true,false]}`,
	`{"\u20ac":1,"\r":2,"\ufb33":3,"1":4,"\ud83d\ude00":5,"\u0080":6,"\u00f6":7}`,
	`[3,3.0,3e0,30e-1,0.3e1,-0,1e21,1e-7,0.000001,9007199254740993,12345678901234567890.0]`,
	`[0.1000000000000000000001,1e400,-1e-400,1e99999999999999999999,123456789012345678901234]`,
	`"\ud800\u2028<&>\u0000\u001f"`,
	"\"\xff\xe2\x82\"",
	`{"a":1,"a":2}`,
	` [ ] `,
	`1 2`,
	`{"a":`,
}

// FuzzTransform checks, for any input, that Transform accepts exactly valid
// JSON; that its output is valid JSON, valid UTF-8 and canonical already
// (Transform is idempotent); that encoding/json reads input and output as the
// same value; and that every number keeps its exact quantity.
func FuzzTransform(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		out, err := Transform(data)
		if err != nil {
			if json.Valid(data) {
				t.Fatalf("valid JSON %q refused: %v", data, err)
			}
			return
		}
		if !json.Valid(data) {
			t.Fatalf("invalid JSON %q accepted as %q", data, out)
		}
		if !json.Valid(out) || !utf8.Valid(out) {
			t.Fatalf("%q gave invalid output %q", data, out)
		}
		again, err := Transform(out)
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("not idempotent: %q → %q → %q, %v", data, out, again, err)
		}
		// Numbers beyond a double make encoding/json fail on both; otherwise
		// both read as the same value.
		var a, b any
		if json.Unmarshal(data, &a) == nil {
			if err := json.Unmarshal(out, &b); err != nil || !reflect.DeepEqual(a, b) {
				t.Fatalf("%q → %q: read as %#v and %#v (%v)", data, out, a, b, err)
			}
		}
		sameQuantities(t, decodeNumbers(t, data), decodeNumbers(t, out))
	})
}

// FuzzNumbers checks that two numbers share a form exactly when they are the
// same quantity.
func FuzzNumbers(f *testing.F) {
	for _, p := range [][2]string{
		{"3", "3.0"}, {"30e-1", "0.3e1"}, {"9007199254740992", "9007199254740993"},
		{"0.1", "0.10000000000000001"}, {"1e21", "1000000000000000000000"}, {"-0", "0e7"},
		{"1152921504606846976", "1152921504606847000"}, {"1e-7", "0.0000001"},
	} {
		f.Add(p[0], p[1])
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		ca, errA := Transform([]byte(a))
		cb, errB := Transform([]byte(b))
		if errA != nil || errB != nil {
			return // not valid JSON
		}
		na, isNumA := decodeNumbers(t, []byte(a)).(json.Number)
		nb, isNumB := decodeNumbers(t, []byte(b)).(json.Number)
		if !isNumA || !isNumB {
			return
		}
		ra, okA := ratOf(string(na))
		rb, okB := ratOf(string(nb))
		if !okA || !okB {
			return
		}
		if same := ra.Cmp(rb) == 0; same != bytes.Equal(ca, cb) {
			t.Fatalf("%s → %s and %s → %s: same quantity %v", a, ca, b, cb, same)
		}
	})
}

func decodeNumbers(t *testing.T, data []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decode %q: %v", data, err)
	}
	return v
}

// sameQuantities walks two decoded values of the same shape and checks each
// pair of numbers is one quantity (where both exponents are small enough to
// check exactly: "0e2001" becomes "0").
func sameQuantities(t *testing.T, a, b any) {
	t.Helper()
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			t.Fatalf("object %v became %v", x, b)
		}
		for k, v := range x {
			w, ok := y[k]
			if !ok {
				t.Fatalf("member %q lost", k)
			}
			sameQuantities(t, v, w)
		}
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			t.Fatalf("array %v became %v", x, b)
		}
		for i := range x {
			sameQuantities(t, x[i], y[i])
		}
	case json.Number:
		y, ok := b.(json.Number)
		if !ok {
			t.Fatalf("number %v became %v", x, b)
		}
		ra, okA := ratOf(string(x))
		rb, okB := ratOf(string(y))
		if okA && okB && ra.Cmp(rb) != 0 {
			t.Fatalf("number %s became %s, another quantity", x, y)
		}
	default:
		if a != b {
			t.Fatalf("%#v became %#v", a, b)
		}
	}
}
