package termtext

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestJSON(t *testing.T) {
	for _, c := range []struct{ name, in, want string }{
		{"plain", `{"tool":"create_order","n":1}`, `{"tool":"create_order","n":1}`},
		{"escapes kept", `{"t":"\u001b]0;x\u0007"}`, `{"t":"\u001b]0;x\u0007"}`},
		{"8-bit csi", "{\"t\":\"a\u009b2Jb\"}", `{"t":"a\u009b2Jb"}`},
		{"8-bit osc and st", "{\"t\":\"\u009d0;pwned\u009c\"}", `{"t":"\u009d0;pwned\u009c"}`},
		{"del", "{\"t\":\"a\x7fb\"}", `{"t":"a\u007fb"}`},
		{"bidi override", "{\"name\":\"invoice\u202efdp.exe\"}", `{"name":"invoice\u202efdp.exe"}`},
		{"isolates and marks", "[\"\u2066a\u2069\u200e\u200f\u061c\"]", `["\u2066a\u2069\u200e\u200f\u061c"]`},
		{"invalid utf8, one U+FFFD a run", "{\"t\":\"bad \xff\xfe bytes \xff\"}", "{\"t\":\"bad \uFFFD bytes \uFFFD\"}"},
		{"unicode kept", `{"city":"Zürich — 東京"}`, `{"city":"Zürich — 東京"}`},
		{"newline after", "{\"t\":\"\u009b\"}\n", "{\"t\":\"\\u009b\"}\n"},
	} {
		got := string(JSON([]byte(c.in)))
		if got != c.want {
			t.Errorf("%s: JSON(%q) = %q, want %q", c.name, c.in, got, c.want)
			continue
		}
		if strings.ContainsAny(got, "\x7f\u009b\u009c\u009d\u202e\u2066") {
			t.Errorf("%s: JSON(%q) = %q keeps a raw control", c.name, c.in, got)
		}
		// The values are what they were, invalid bytes read as U+FFFD
		// (a decoder gives one for each).
		var before, after any
		if err := json.Unmarshal(bytes.ToValidUTF8([]byte(c.in), []byte("\uFFFD")), &before); err != nil {
			t.Fatalf("%s: the input is not JSON: %v", c.name, err)
		}
		if err := json.Unmarshal([]byte(got), &after); err != nil {
			t.Errorf("%s: JSON(%q) = %q is not JSON: %v", c.name, c.in, got, err)
		} else if !reflect.DeepEqual(before, after) {
			t.Errorf("%s: JSON(%q) decodes to %#v, want %#v", c.name, c.in, after, before)
		}
	}
}

func TestJSONPlainIsNotCopied(t *testing.T) {
	in := []byte(`{"a":"b"}`)
	if out := JSON(in); &out[0] != &in[0] {
		t.Error("JSON copied text with nothing to spell")
	}
}
