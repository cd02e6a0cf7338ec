package guard

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/mcp-confirm/mcp-confirm/mcpclient"
	"github.com/mcp-confirm/mcp-confirm/pending"
)

func TestRedactPathsAndNames(t *testing.T) {
	args := mustDecode(t, []byte(`{
		"payment": {"card_number": "4111111111111111", "holder": "Ann", "cvv": 737},
		"items": [{"sku": "w", "card_number": "5500005555555559"}, {"sku": "g"}],
		"card_number": "top",
		"note": {"payment": {"card_number": "deeper"}},
		"idempotency_key": "k"}`))
	cases := []struct {
		name    string
		fields  []string
		want    string
		secrets []string
	}{
		{"plain name at any depth", []string{"cvv"},
			`{"card_number":"top","items":[{"card_number":"5500005555555559","sku":"w"},{"sku":"g"}],"note":{"payment":{"card_number":"deeper"}},"payment":{"card_number":"4111111111111111","cvv":"[redacted]","holder":"Ann"}}`,
			[]string{"737"}},
		{"dotted path from the top only", []string{"payment.card_number"},
			`{"card_number":"top","items":[{"card_number":"5500005555555559","sku":"w"},{"sku":"g"}],"note":{"payment":{"card_number":"deeper"}},"payment":{"card_number":"[redacted]","cvv":737,"holder":"Ann"}}`,
			[]string{"4111111111111111"}},
		{"path through an array", []string{"items.card_number"},
			`{"card_number":"top","items":[{"card_number":"[redacted]","sku":"w"},{"sku":"g"}],"note":{"payment":{"card_number":"deeper"}},"payment":{"card_number":"4111111111111111","cvv":737,"holder":"Ann"}}`,
			[]string{"5500005555555559"}},
		{"a name everywhere, and a whole object", []string{"card_number", "note"},
			`{"card_number":"[redacted]","items":[{"card_number":"[redacted]","sku":"w"},{"sku":"g"}],"note":"[redacted]","payment":{"card_number":"[redacted]","cvv":737,"holder":"Ann"}}`,
			[]string{"4111111111111111", "5500005555555559", "deeper", "top"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, secrets := redact(args, c.fields, "idempotency_key")
			if string(got) != c.want {
				t.Errorf("stored\n got %s\nwant %s", got, c.want)
			}
			if !sameSet(secrets, c.secrets) {
				t.Errorf("secrets = %q, want %q", secrets, c.secrets)
			}
		})
	}
}

func sameSet(a, b []string) bool {
	m := map[string]int{}
	for _, s := range a {
		m[s]++
	}
	for _, s := range b {
		m[s]--
	}
	for _, n := range m {
		if n != 0 {
			return false
		}
	}
	return true
}

func TestPolicyRefusesEmptyRedactParts(t *testing.T) {
	for _, bad := range []string{`""`, `"payment..card"`, `".card"`, `"card."`} {
		_, err := ParsePolicy("[tools.pay]\nredact = ["+bad+"]\n", "p.toml")
		if !errors.Is(err, ErrPolicy) || !strings.Contains(err.Error(), "tools.pay.redact") {
			t.Errorf("redact = [%s]: %v, want a policy error naming tools.pay.redact", bad, err)
		}
	}
	if _, err := ParsePolicy("[tools.pay]\nredact = [\"payment.card_number\", \"cvv\"]\n", "p.toml"); err != nil {
		t.Errorf("good redact: %v", err)
	}
}

func TestRestoreNestedRedacted(t *testing.T) {
	args := map[string]any{"payment": map[string]any{"card_number": "4111111111111111", "holder": "Ann"},
		"items": []any{map[string]any{"cvv": "123"}}, "amount": json.Number("5")}
	c := callFor(args, []string{"payment.card_number", "cvv"}, "")
	got, err := restoreArgs(c, "", map[string]any{
		"payment": map[string]any{"card_number": "4111111111111111"}, "items": []any{map[string]any{"cvv": "123"}}}, bare)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, args) {
		t.Errorf("restored %v, want %v", got, args)
	}
	_, err = restoreArgs(c, "", map[string]any{"card_number": "4111111111111111"}, bare)
	if !errors.Is(err, ErrBadInput) || !strings.Contains(err.Error(), "items[0].cvv, payment.card_number") ||
		!strings.Contains(err.Error(), `{"items[0]":{"cvv":…}}`) {
		t.Errorf("values at the wrong depth: %v, want both paths named", err)
	}
	_, err = restoreArgs(c, "", map[string]any{
		"payment": map[string]any{"card_number": "4000000000000002"}, "items": []any{map[string]any{"cvv": "123"}}}, bare)
	if !errors.Is(err, ErrBadInput) || !strings.Contains(err.Error(), "fingerprint") {
		t.Errorf("wrong value: %v", err)
	}
}

func TestMasker(t *testing.T) {
	m := newMasker([]string{"payment.card_number", "cvv"}, []string{"4111111111111111", "737", "ab"}, nil)
	cases := []struct{ in, want string }{
		// by field, whatever the value; by value, anywhere when long
		{`{"structuredContent":{"payment":{"card_number":"other"},"cvv":1},"content":[{"type":"text","text":"card 4111111111111111 ok"}]}`,
			`{"content":[{"text":"card [redacted] ok","type":"text"}],"structuredContent":{"cvv":"[redacted]","payment":{"card_number":"[redacted]"}}}`},
		// short values only as whole words; a number leaf equal to one
		{`{"a":"cvv 737, not 17370","b":737,"c":"xabx ab"}`, `{"a":"cvv [redacted], not 17370","b":"[redacted]","c":"xabx ab"}`},
		// a name that is a value
		{`{"4111111111111111":true}`, `{"[redacted]":true}`},
		// nothing to mask: the bytes as they came, spacing and all
		{`{ "x" : "y\u0041" }`, `{ "x" : "y\u0041" }`},
		// not JSON: masked as text, raw and escaped
		{`raw 4111111111111111 \u0037\u0033\u0037`, `raw [redacted] \u0037\u0033\u0037`},
	}
	for _, c := range cases {
		if got := string(m.json(json.RawMessage(c.in))); got != c.want {
			t.Errorf("json(%s)\n got %s\nwant %s", c.in, got, c.want)
		}
	}
	if got := m.text("the server said: card 4111111111111111 declined"); got != "the server said: card [redacted] declined" {
		t.Errorf("text: %q", got)
	}
}

// A process that never saw the values masks them by their seals.
func TestMaskerBySeals(t *testing.T) {
	known := func(s string) bool { return s == "4111-1111-1111-1111" || s == "Ann Smith" }
	m := newMasker(nil, nil, known)
	in := `{"text":"paid with 4111-1111-1111-1111. thanks","holder":"Ann Smith","other":"Ann"}`
	want := `{"holder":"[redacted]","other":"Ann","text":"paid with [redacted]. thanks"}`
	if got := string(m.json(json.RawMessage(in))); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

// Late answers, unusable ones and retries echoing redacted values: the
// process that made the call masks them by value, and the stored late
// result, its event and the retry's outcome keep none of them.
func TestLateAndRetryAnswersAreMasked(t *testing.T) {
	h := newHarness(t, "[tools.create_order]\nredact = [\"payment.card\"]\n")
	args := order(2)
	args["payment"] = map[string]any{"card": "4111111111111111"}
	h.f.set("create_order", always(lostOutcome()))
	res, err := h.call(Request{Tool: "create_order", Args: args})
	if err != nil || res.State != pending.StateUnknown {
		t.Fatalf("want unknown, got %s %v", res.State, err)
	}
	h.g.HandleLateResult(mcpclient.LateResult{Key: res.Key, Tool: "create_order", Session: 1, RPCID: "1",
		Class: mcpclient.AnswerUnusable, Raw: json.RawMessage(`{"id":1,"result":"card 4111111111111111`), Why: "cut"})
	h.g.HandleLateResult(mcpclient.LateResult{Key: res.Key, Tool: "create_order", Session: 1, RPCID: "1",
		ResultJSON: json.RawMessage(`{"content":[{"type":"text","text":"charged 4111111111111111"}],"isError":true}`)})
	c := h.get(res.Call.ID)
	if !c.Attempts[0].Late || !strings.Contains(string(c.Attempts[0].Result), "charged [redacted]") {
		t.Fatalf("late result %s (late %v), want it stored masked", c.Attempts[0].Result, c.Attempts[0].Late)
	}
	ev, ok := hasEvent(events(t, h.path, c.ID), pending.EventUnusableAnswer)
	if !ok || strings.Contains(ev.Detail, "4111") || !strings.Contains(ev.Detail, "card [redacted]") {
		t.Fatalf("unusable answer event %q, want it kept masked", ev.Detail)
	}

	h.f.set("create_order", always(rawOutcome(`{"content":[],"structuredContent":{"payment":{"card":"other"},"echo":"4111111111111111"}}`)))
	if _, err := h.g.Retry(context.Background(), c.ID, RetryOptions{
		Redacted: map[string]any{"payment": map[string]any{"card": "4111111111111111"}}}); err != nil {
		t.Fatal(err)
	}
	c = h.get(c.ID)
	last := string(c.Attempts[len(c.Attempts)-1].Result)
	if strings.Contains(last, "4111") || strings.Contains(last, "other") {
		t.Errorf("retry's result stored as %s", last)
	}
	if s := h.f.sent("create_order"); s[len(s)-1].Args["payment"].(map[string]any)["card"] != "4111111111111111" {
		t.Errorf("the retry did not send the real value: %v", s[len(s)-1].Args)
	}
}
