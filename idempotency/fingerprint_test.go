package idempotency

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestFingerprint(t *testing.T) {
	tests := []struct {
		name  string
		a, b  any
		same  bool
		canon string // canonical form of a, when checked
	}{
		{name: "key order does not matter", a: json.RawMessage(`{"b":1,"a":2}`), b: json.RawMessage(`{"a":2,"b":1}`), same: true, canon: `{"a":2,"b":1}`},
		{name: "key argument is left out", a: json.RawMessage(`{"a":1,"idempotency_key":"k1"}`), b: json.RawMessage(`{"a":1}`), same: true, canon: `{"a":1}`},
		{name: "integral numbers are integers", a: json.RawMessage(`{"q":2.0}`), b: json.RawMessage(`{"q":2}`), same: true, canon: `{"q":2}`},
		{name: "exponent form", a: json.RawMessage(`{"q":1e2}`), b: json.RawMessage(`{"q":100}`), same: true},
		{name: "big integers keep their digits", a: json.RawMessage(`{"id":9007199254740993}`), b: json.RawMessage(`{"id":9007199254740992}`), same: false, canon: `{"id":9007199254740993}`},
		{name: "absent equals empty", a: nil, b: json.RawMessage(`{}`), same: true, canon: `{}`},
		{name: "null equals empty", a: json.RawMessage(`null`), b: map[string]any{}, same: true},
		{name: "a map and its bytes agree", a: map[string]any{"x": []any{1, "<&>"}}, b: json.RawMessage(`{"x":[1,"<&>"]}`), same: true, canon: `{"x":[1,"<&>"]}`},
		{name: "different values differ", a: json.RawMessage(`{"q":2}`), b: json.RawMessage(`{"q":3}`), same: false},
		{name: "nested order does not matter", a: json.RawMessage(`{"o":{"y":1,"x":[{"b":1,"a":0}]}}`), b: json.RawMessage(`{"o":{"x":[{"a":0,"b":1}],"y":1}}`), same: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fa, ca, err := Fingerprint(tt.a, "idempotency_key")
			if err != nil {
				t.Fatal(err)
			}
			fb, _, err := Fingerprint(tt.b, "idempotency_key")
			if err != nil {
				t.Fatal(err)
			}
			if (fa == fb) != tt.same {
				t.Errorf("same=%v, want %v", fa == fb, tt.same)
			}
			if tt.canon != "" && string(ca) != tt.canon {
				t.Errorf("canonical %s, want %s", ca, tt.canon)
			}
			if len(fa) != 64 {
				t.Errorf("fingerprint %q is not SHA-256 hex", fa)
			}
		})
	}
	if _, _, err := Fingerprint(json.RawMessage(`{"a":`), ""); err == nil {
		t.Error("malformed JSON gave no error")
	}
}

func TestDifferingFields(t *testing.T) {
	got := differingFields([]byte(`{"a":1,"b":2,"c":3}`), []byte(`{"a":1,"b":5,"d":4}`))
	if want := []string{"b", "c", "d"}; !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	if got := differingFields([]byte(`[1]`), []byte(`{}`)); !reflect.DeepEqual(got, []string{"arguments"}) {
		t.Errorf("non-object: %v", got)
	}
}
