package guard

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-confirm/mcp-confirm/pending"
)

func TestValidateKey(t *testing.T) {
	for _, tc := range []struct {
		name string
		key  string
		ok   bool
	}{
		{"16 characters", strings.Repeat("a", 16), true},
		{"255 characters", strings.Repeat("k", 255), true},
		{"ULID", "01JDEMO0LOSTRESPONSE00001", true},
		{"UUID", "0191f3c4-7a2b-7c3d-9e4f-0123456789ab", true},
		{"punctuation", "order:2026/12/02#1~x", true},
		{"1 character (servers accept short keys, SPEC §9)", "a", true},
		{"15 characters", strings.Repeat("a", 15), true},
		{"256 characters", strings.Repeat("k", 256), false},
		{"empty", "", false},
		{"space", "abcdefgh ijklmnop", false},
		{"tab", "abcdefgh\tijklmnop", false},
		{"newline", "abcdefghijklmnop\n", false},
		{"escape sequence", "\x1b[31mabcdefghijklmnop", false},
		{"DEL", "abcdefghijklmnop\x7f", false},
		{"non-ASCII", "abcdefghijklmnöp", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateKey(tc.key)
			if (err == nil) != tc.ok {
				t.Errorf("ValidateKey(%q) = %v, want ok=%v", tc.key, err, tc.ok)
			}
		})
	}
}

func TestKeyArg(t *testing.T) {
	raw := func(s string) mcp.Tool { return mcp.Tool{Name: "t", RawInputSchema: json.RawMessage(s)} }
	for _, tc := range []struct {
		name   string
		tool   mcp.Tool
		policy string
		want   string
	}{
		{"policy wins", tool("t", nil, "idempotency_key", "token"), "token", "token"},
		{"policy wins even if the schema lacks it", tool("t", nil), "op_id", "op_id"},
		{"idempotency_key", tool("t", nil, "item", "idempotency_key"), "", "idempotency_key"},
		{"idempotency_key before idempotencyKey", tool("t", nil, "idempotencyKey", "idempotency_key"), "", "idempotency_key"},
		{"idempotencyKey before request_id", tool("t", nil, "request_id", "idempotencyKey"), "", "idempotencyKey"},
		{"request_id before requestId", tool("t", nil, "requestId", "request_id"), "", "request_id"},
		{"requestId before client_token", tool("t", nil, "client_token", "requestId"), "", "requestId"},
		{"client_token before clientToken", tool("t", nil, "clientToken", "client_token"), "", "client_token"},
		{"clientToken", tool("t", nil, "clientToken"), "", "clientToken"},
		{"none", tool("t", nil, "item", "key", "token"), "", ""},
		{"no schema", mcp.Tool{Name: "t"}, "", ""},
		{"raw schema", raw(`{"type":"object","properties":{"requestId":{"type":"string"},"x":{}}}`), "", "requestId"},
		{"raw schema without the names", raw(`{"type":"object","properties":{"x":{}}}`), "", ""},
		{"raw schema beats typed", func() mcp.Tool {
			x := tool("t", nil, "idempotency_key")
			x.RawInputSchema = json.RawMessage(`{"type":"object","properties":{"clientToken":{}}}`)
			return x
		}(), "", "clientToken"},
		{"unreadable raw schema falls back to typed", func() mcp.Tool {
			x := tool("t", nil, "request_id")
			x.RawInputSchema = json.RawMessage(`{not json`)
			return x
		}(), "", "request_id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := KeyArg(tc.tool, tc.policy); got != tc.want {
				t.Errorf("KeyArg = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestFingerprint(t *testing.T) {
	base := map[string]any{"item": "widget", "quantity": 2, "buyer": "alice"}
	fp := Fingerprint(base, "idempotency_key")
	if hex, ok := strings.CutPrefix(fp, "c1:"); !ok || len(hex) != 64 {
		t.Fatalf("fingerprint %q is not c1: and hex SHA-256", fp)
	}
	same := []map[string]any{
		{"buyer": "alice", "quantity": 2, "item": "widget"},
		{"item": "widget", "quantity": 2, "buyer": "alice", "idempotency_key": "01JAAAAAAAAAAAAAAAAAAAAAAA"},
		{"item": "widget", "quantity": 2, "buyer": "alice", "idempotency_key": "01JBBBBBBBBBBBBBBBBBBBBBBB"},
		{"item": "widget", "quantity": 2.0, "buyer": "alice"},
		{"item": "widget", "quantity": json.Number("2"), "buyer": "alice"},
		// One canonical form (RFC 8785): a number's spelling does not matter.
		{"item": "widget", "quantity": json.Number("2.0"), "buyer": "alice"},
		{"item": "widget", "quantity": json.Number("2e0"), "buyer": "alice"},
		{"item": "widget", "quantity": json.Number("20e-1"), "buyer": "alice"},
	}
	for i, a := range same {
		if got := Fingerprint(a, "idempotency_key"); got != fp {
			t.Errorf("same[%d] %v: fingerprint differs", i, a)
		}
	}
	differ := []map[string]any{
		{"item": "widget", "quantity": 3, "buyer": "alice"},
		{"item": "widget", "quantity": "2", "buyer": "alice"},
		{"item": "widget", "quantity": 2},
		{"item": "widget", "quantity": 2, "buyer": "alice", "note": nil},
		{"item": "widget", "quantity": json.Number("2.000000000000000000001"), "buyer": "alice"},
	}
	for i, a := range differ {
		if Fingerprint(a, "idempotency_key") == fp {
			t.Errorf("differ[%d] %v: same fingerprint", i, a)
		}
	}
	// Without a key argument, a field of that name is business data.
	withKey := map[string]any{"item": "widget", "quantity": 2, "buyer": "alice", "idempotency_key": "x"}
	if Fingerprint(withKey, "") == fp {
		t.Error("an argument that is not the key argument was left out")
	}
	// Nested key order does not matter either.
	a := map[string]any{"o": map[string]any{"a": 1, "b": []any{"x", map[string]any{"c": 1, "d": 2}}}}
	b := map[string]any{"o": map[string]any{"b": []any{"x", map[string]any{"d": 2, "c": 1}}, "a": 1}}
	if Fingerprint(a, "") != Fingerprint(b, "") {
		t.Error("nested key order changed the fingerprint")
	}
	if Fingerprint(nil, "") != Fingerprint(map[string]any{}, "") {
		t.Error("nil and empty arguments differ")
	}
}

// A fingerprint computed again from what the journal stores matches the
// caller's, whatever numbers the caller wrote: DecodeObject keeps them as
// written.
func TestFingerprintStableThroughDecodeObject(t *testing.T) {
	for _, text := range []string{
		`{"quantity": 2, "buyer": "alice"}`,
		`{"amount": 12345678901234567890, "buyer": "alice"}`,
		`{"amount": 0.1, "rate": 1e-7, "big": 1E+30}`,
		`{"price": 19.990, "n": -0}`,
		`{"nested": {"ids": [9007199254740993, 2.50]}, "s": "<&>"}`,
	} {
		args, err := DecodeObject([]byte(text))
		if err != nil {
			t.Fatal(err)
		}
		fp := Fingerprint(args, "")
		stored := redactArgs(args, nil, "")
		again, err := DecodeObject(stored)
		if err != nil {
			t.Fatal(err)
		}
		if Fingerprint(again, "") != fp {
			t.Errorf("%s: fingerprint changed through the journal (stored %s)", text, stored)
		}
		// And a second round trip too.
		if Fingerprint(mustDecode(t, redactArgs(again, nil, "")), "") != fp {
			t.Errorf("%s: fingerprint changed on a second round trip", text)
		}
	}
	// Numbers that float64 cannot hold are kept exactly.
	args, _ := DecodeObject([]byte(`{"amount": 12345678901234567890}`))
	if got := string(redactArgs(args, nil, "")); got != `{"amount":12345678901234567890}` {
		t.Errorf("stored %s", got)
	}
}

func mustDecode(t *testing.T, b []byte) map[string]any {
	t.Helper()
	m, err := DecodeObject(b)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestDecodeObject(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string // error substring; "" for success
	}{
		{`{"a": 1}`, ""},
		{` {} `, ""},
		{`[1]`, "not an array"},
		{`"x"`, "not a string"},
		{`3`, "not a number"},
		{`true`, "not a boolean"},
		{`null`, "not null"},
		{`{"a": 1} {"b": 2}`, "more than one value"},
		{`{"a": `, "not valid JSON"},
		{``, "not valid JSON"},
	} {
		_, err := DecodeObject([]byte(tc.in))
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("DecodeObject(%q) = %v", tc.in, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("DecodeObject(%q) = %v, want %q", tc.in, err, tc.want)
		}
	}
	m, _ := DecodeObject([]byte(`{"n": 2}`))
	if _, ok := m["n"].(json.Number); !ok {
		t.Errorf("number decoded as %T, want json.Number", m["n"])
	}
}

func TestRedact(t *testing.T) {
	args := map[string]any{"item": "widget", "card_number": "4111111111111111", "idempotency_key": "k", "cvv": 123}
	got := mustDecode(t, redactArgs(args, []string{"card_number", "cvv", "absent"}, "idempotency_key"))
	want := map[string]any{"item": "widget", "card_number": Redacted, "cvv": Redacted}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("redacted = %v, want %v", got, want)
	}
	if _, ok := args["card_number"].(string); !ok || args["card_number"] == Redacted {
		t.Error("redact changed the caller's map")
	}
	if bytes.Contains(redactArgs(args, []string{"card_number"}, "idempotency_key"), []byte("4111")) {
		t.Error("card number stored")
	}
}

// callFor builds the journal's view of a call as write() would record it.
func callFor(args map[string]any, redactFields []string, keyArg string) pending.Call {
	return pending.Call{ID: 7, Key: "01JKEYKEYKEYKEYKEYKEYKEYKE", Args: redactArgs(args, redactFields, keyArg), Fingerprint: Fingerprint(args, keyArg)}
}

func TestRestoreArgs(t *testing.T) {
	args := map[string]any{"item": "widget", "quantity": 2, "card_number": "4111111111111111", "idempotency_key": "01JKEYKEYKEYKEYKEYKEYKEYKE"}
	c := callFor(args, []string{"card_number"}, "idempotency_key")

	t.Run("right redacted value", func(t *testing.T) {
		got, err := restoreArgs(c, "idempotency_key", map[string]any{"card_number": "4111111111111111"}, bare)
		if err != nil {
			t.Fatal(err)
		}
		if got["card_number"] != "4111111111111111" || got["item"] != "widget" || got["quantity"] != json.Number("2") {
			t.Errorf("restored %v", got)
		}
		if _, ok := got["idempotency_key"]; ok {
			t.Error("the key argument is restored; the session adds it")
		}
	})
	t.Run("missing redacted value", func(t *testing.T) {
		_, err := restoreArgs(c, "idempotency_key", nil, bare)
		if !errors.Is(err, ErrBadInput) || !strings.Contains(err.Error(), "card_number") {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("wrong redacted value", func(t *testing.T) {
		_, err := restoreArgs(c, "idempotency_key", map[string]any{"card_number": "4000000000000002"}, bare)
		if !errors.Is(err, ErrBadInput) || !strings.Contains(err.Error(), "fingerprint") {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("extra values are not added", func(t *testing.T) {
		got, err := restoreArgs(c, "idempotency_key", map[string]any{"card_number": "4111111111111111", "quantity": 5, "extra": 1}, bare)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := got["extra"]; ok || got["quantity"] != json.Number("2") {
			t.Errorf("restored %v", got)
		}
	})
	t.Run("nothing redacted", func(t *testing.T) {
		c := callFor(map[string]any{"item": "gizmo", "price": 12345678901234567890.0}, nil, "")
		if _, err := restoreArgs(c, "", nil, bare); err != nil {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("tampered arguments", func(t *testing.T) {
		c := c
		c.Args = json.RawMessage(`{"item":"widget","quantity":20,"card_number":"[redacted]"}`)
		_, err := restoreArgs(c, "idempotency_key", map[string]any{"card_number": "4111111111111111"}, bare)
		if !errors.Is(err, ErrBadInput) {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("unreadable arguments", func(t *testing.T) {
		c := c
		c.Args = json.RawMessage(`[1]`)
		if _, err := restoreArgs(c, "", nil, bare); !errors.Is(err, ErrUnavailable) {
			t.Errorf("err = %v", err)
		}
	})
}

func TestDifferingFields(t *testing.T) {
	for _, tc := range []struct {
		name string
		a, b map[string]any
		want []string
	}{
		{"equal", map[string]any{"a": 1, "b": "x"}, map[string]any{"b": "x", "a": 1}, nil},
		{"number forms", map[string]any{"q": json.Number("2")}, map[string]any{"q": 2}, nil},
		{"changed", map[string]any{"a": 1, "b": "x"}, map[string]any{"a": 2, "b": "x"}, []string{"a"}},
		{"sorted", map[string]any{"z": 1, "a": 1, "m": 1}, map[string]any{"z": 2, "a": 2, "m": 1}, []string{"a", "z"}},
		{"only in a", map[string]any{"a": 1, "b": 2}, map[string]any{"a": 1}, []string{"b"}},
		{"only in b", map[string]any{"a": 1}, map[string]any{"a": 1, "c": 3}, []string{"c"}},
		{"null is not absent", map[string]any{"a": nil}, map[string]any{}, []string{"a"}},
		{"type", map[string]any{"a": "1"}, map[string]any{"a": 1}, []string{"a"}},
		{"nested", map[string]any{"o": map[string]any{"x": 1}}, map[string]any{"o": map[string]any{"x": 2}}, []string{"o"}},
		{"nested key order", map[string]any{"o": map[string]any{"x": 1, "y": 2}}, map[string]any{"o": map[string]any{"y": 2, "x": 1}}, nil},
		{"both empty", nil, map[string]any{}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := differingFields(tc.a, tc.b); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("differingFields = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestSeededKeys(t *testing.T) {
	a := SeededKeys(bytes.NewReader(bytes.Repeat([]byte{7}, 64)))
	b := SeededKeys(bytes.NewReader(bytes.Repeat([]byte{7}, 64)))
	k1, k2 := a.NewKey(), a.NewKey()
	if k1 == k2 {
		t.Error("two keys alike")
	}
	if b.NewKey() != k1 {
		t.Error("seeded keys are not deterministic")
	}
	for _, k := range []string{k1, k2, (&ulidKeys{entropy: strings.NewReader(strings.Repeat("x", 32)), now: func() uint64 { return 1 }}).NewKey()} {
		if err := ValidateKey(k); err != nil {
			t.Errorf("generated key %q fails ValidateKey: %v", k, err)
		}
	}
}

// TestFingerprintCanonicalSpellings: arguments decoded from the wire (as the
// CLI and the proxy decode them, numbers kept as written) have one
// fingerprint however their numbers and strings are spelled (SPEC §9), and
// integers beyond 2^53 stay exact.
func TestFingerprintCanonicalSpellings(t *testing.T) {
	fp := func(s string) string {
		t.Helper()
		a, err := DecodeObject([]byte(s))
		if err != nil {
			t.Fatal(err)
		}
		return Fingerprint(a, "idempotency_key")
	}
	for _, group := range [][]string{
		{`{"q":3}`, `{"q":3.0}`, `{"q":3e0}`, `{"q":30e-1}`, `{"q":0.3E1}`},
		{`{"name":"\u00e9"}`, `{"name":"é"}`},
		{`{"a":1,"b":2}`, `{"b":2,"a":1}`, `{ "b" : 2 , "a" : 1 }`},
		{`{"id":9007199254740993}`, `{"id":9007199254740993.0}`},
	} {
		for _, s := range group[1:] {
			if fp(s) != fp(group[0]) {
				t.Errorf("%s and %s: fingerprints differ", group[0], s)
			}
		}
	}
	for _, pair := range [][2]string{
		{`{"id":9007199254740993}`, `{"id":9007199254740992}`},
		{`{"q":3}`, `{"q":"3"}`},
		{`{"name":"e"}`, `{"name":"é"}`},
	} {
		if fp(pair[0]) == fp(pair[1]) {
			t.Errorf("%s and %s: one fingerprint for two operations", pair[0], pair[1])
		}
	}
}

// bare is the seal of a journal not yet sealed: fingerprints stored as made.
func bare(fp string) string { return fp }

// redactArgs is redact's stored form alone.
func redactArgs(args map[string]any, fields []string, keyArg string) json.RawMessage {
	b, _ := redact(args, fields, keyArg)
	return b
}

// A write hashes its stored arguments for the legacy fingerprint when the
// tool redacts nothing (legacyFingerprintOf): that must be what
// legacyFingerprint computes from the arguments themselves.
func TestLegacyFingerprintOfStoredArgs(t *testing.T) {
	for _, raw := range []string{
		`{}`,
		`{"item":"widget","quantity":1,"buyer":"alice","idempotency_key":"k-0000000001"}`,
		`{"n":1.50,"big":12345678901234567890,"e":1e3,"s":"<a&b>","u":"é\u2028","nested":{"z":[1,{"b":null,"a":true}],"a":""}}`,
		`{"idempotency_key":"k-0000000002"}`,
	} {
		args, err := decodeObject([]byte(raw))
		if err != nil {
			t.Fatal(err)
		}
		for _, keyArg := range []string{"", "idempotency_key", "nested"} {
			stored, _ := redact(args, nil, keyArg)
			if got, want := legacyFingerprintOf(stored), legacyFingerprint(args, keyArg); got != want {
				t.Errorf("%s without %q: %s from the stored form, %s from the arguments", raw, keyArg, got, want)
			}
		}
	}
}
