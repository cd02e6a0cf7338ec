package guard

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/mcp-confirm/mcp-confirm/mcpclient"
	"github.com/mcp-confirm/mcp-confirm/pending"
)

func TestExpandQueryArgs(t *testing.T) {
	c := pending.Call{
		ID: 3, Key: "01JQUERYKEYQUERYKEYQUERYKE",
		Args: json.RawMessage(`{"buyer":"alice","quantity":2,"account":12345678901234567890,"tags":["a"],"card_number":"[redacted]","meta":{"x":1}}`),
	}
	for _, tc := range []struct {
		name     string
		template map[string]any
		want     map[string]any
		missing  []string // error must name these
	}{
		{"key", map[string]any{"idempotency_key": "{key}"}, map[string]any{"idempotency_key": c.Key}, nil},
		{"arg string", map[string]any{"buyer": "{arg.buyer}"}, map[string]any{"buyer": "alice"}, nil},
		{"single placeholder keeps the type", map[string]any{"n": "{arg.quantity}", "t": "{arg.tags}", "m": "{arg.meta}"},
			map[string]any{"n": json.Number("2"), "t": []any{"a"}, "m": map[string]any{"x": json.Number("1")}}, nil},
		{"big numbers are kept exactly", map[string]any{"account": "{arg.account}"},
			map[string]any{"account": json.Number("12345678901234567890")}, nil},
		{"embedded placeholders become text", map[string]any{"q": "buyer={arg.buyer} n={arg.quantity} key={key}"},
			map[string]any{"q": "buyer=alice n=2 key=" + c.Key}, nil},
		{"nested template", map[string]any{"filter": map[string]any{"keys": []any{"{key}", "literal"}, "who": "{arg.buyer}"}},
			map[string]any{"filter": map[string]any{"keys": []any{c.Key, "literal"}, "who": "alice"}}, nil},
		{"literals pass through", map[string]any{"limit": int64(5), "exact": true, "s": "{notaplaceholder}", "braces": "{arg.}"},
			map[string]any{"limit": int64(5), "exact": true, "s": "{notaplaceholder}", "braces": "{arg.}"}, nil},
		{"empty template", nil, map[string]any{}, nil},
		{"missing argument", map[string]any{"x": "{arg.nope}"}, nil, []string{"arg.nope"}},
		{"missing embedded argument", map[string]any{"x": "id-{arg.nope}"}, nil, []string{"arg.nope"}},
		{"redacted argument", map[string]any{"card": "{arg.card_number}"}, nil, []string{"arg.card_number"}},
		{"redacted embedded argument", map[string]any{"card": "last4 {arg.card_number}"}, nil, []string{"arg.card_number"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := expandQueryArgs(tc.template, c)
			if tc.missing != nil {
				if !errors.Is(err, ErrBadInput) {
					t.Fatalf("err = %v, got %v", err, got)
				}
				for _, m := range tc.missing {
					if !strings.Contains(err.Error(), m) {
						t.Errorf("error %q does not name %s", err, m)
					}
				}
				if strings.Contains(err.Error(), "4111") {
					t.Error("error shows a secret")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("expanded %#v, want %#v", got, tc.want)
			}
		})
	}
	// The template is not modified.
	tmpl := map[string]any{"k": "{key}"}
	if _, err := expandQueryArgs(tmpl, c); err != nil || tmpl["k"] != "{key}" {
		t.Errorf("template changed: %v (%v)", tmpl, err)
	}
}

func TestProposalFrom(t *testing.T) {
	ok := func(structured string) Result {
		return Result{State: pending.StateSucceeded, Result: json.RawMessage(`{"content":[],"structuredContent":` + structured + `}`)}
	}
	for _, tc := range []struct {
		name string
		r    Result
		want string
	}{
		{"orders found", ok(`{"orders":[{"order_id":"o1"}]}`), ProposalApplied},
		{"no orders", ok(`{"orders":[]}`), ProposalNotFound},
		{"top-level list", ok(`[{"id":1}]`), ProposalApplied},
		{"empty top-level list", ok(`[]`), ProposalNotFound},
		{"deeper list", ok(`{"page":{"items":[1]}}`), ProposalApplied},
		{"deeper empty list", ok(`{"page":{"items":[]}}`), ProposalNotFound},
		{"scalars only", ok(`{"count":0}`), ProposalNotFound},
		{"null collection", ok(`{"orders":null}`), ProposalNotFound},
		{"empty object", ok(`{}`), ProposalNotFound},
		{"no structured content", Result{State: pending.StateSucceeded, Result: json.RawMessage(`{"content":[{"type":"text","text":"1 order"}]}`)}, ""},
		{"null structured content", ok(`null`), ""},
		{"tool error", Result{State: pending.StateFailed, Result: json.RawMessage(`{"isError":true,"structuredContent":{"orders":[1]}}`)}, ""},
		{"rpc error", Result{State: pending.StateFailed, Error: json.RawMessage(`{"code":-32603,"message":"x"}`)}, ""},
		{"no answer", Result{State: pending.StateFailed}, ""},
		{"unreadable", Result{State: pending.StateSucceeded, Result: json.RawMessage(`{`)}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := proposalFrom(tc.r); got != tc.want {
				t.Errorf("proposalFrom = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestFound(t *testing.T) {
	for _, tc := range []struct {
		v    any
		want bool
	}{
		{[]any{}, false},
		{[]any{nil}, true},
		{map[string]any{}, false},
		{map[string]any{"a": []any{1}}, true},
		{map[string]any{"a": []any{}, "b": []any{2}}, true},
		{map[string]any{"a": "x", "n": 3.0}, false},
		{map[string]any{"a": map[string]any{"b": map[string]any{"c": []any{1}}}}, true},
		{"text", false},
		{nil, false},
	} {
		if got := found(tc.v); got != tc.want {
			t.Errorf("found(%v) = %v, want %v", tc.v, got, tc.want)
		}
	}
}

func TestReadSignals(t *testing.T) {
	for _, tc := range []struct {
		raw  string
		want signals
	}{
		{`{"content":[]}`, signals{}},
		{`{"isError":true}`, signals{isError: true}},
		{`{"isError":true,"structuredContent":{"idempotency":"in_progress"}}`, signals{isError: true, inProgress: true}},
		// The in-progress signal counts only on an error result.
		{`{"isError":false,"structuredContent":{"idempotency":"in_progress"}}`, signals{}},
		{`{"isError":true,"structuredContent":{"idempotency":"completed"}}`, signals{isError: true}},
		{`{"_meta":{"io.github.mcp-confirm/replayed":true}}`, signals{replayed: true}},
		{`{"_meta":{"io.github.mcp-confirm/replayed":"true"}}`, signals{}},
		{`{"_meta":{"io.github.mcp-confirm/replayed":false}}`, signals{}},
		{`{"isError":true,"_meta":{"io.github.mcp-confirm/replayed":true}}`, signals{isError: true, replayed: true}},
		{`not json`, signals{}},
		{``, signals{}},
	} {
		if got := readSignals(json.RawMessage(tc.raw)); got != tc.want {
			t.Errorf("readSignals(%s) = %+v, want %+v", tc.raw, got, tc.want)
		}
	}
}

func TestOutcomeOf(t *testing.T) {
	okJSON := json.RawMessage(`{"content":[],"structuredContent":{"order_id":"o1"}}`)
	replayJSON := json.RawMessage(`{"content":[],"_meta":{"io.github.mcp-confirm/replayed":true}}`)
	errJSON := json.RawMessage(`{"content":[],"isError":true}`)
	errReplayJSON := json.RawMessage(`{"content":[],"isError":true,"_meta":{"io.github.mcp-confirm/replayed":true}}`)
	progJSON := json.RawMessage(`{"content":[],"isError":true,"structuredContent":{"idempotency":"in_progress"},"_meta":{"io.github.mcp-confirm/replayed":true}}`)
	rpcErr := &mcpclient.RPCError{Code: -32602, Message: "bad quantity"}
	for _, tc := range []struct {
		name     string
		out      mcpclient.Delivery
		event    pending.Event
		reason   string // substring
		clock    string
		replayed bool
		result   bool // the result is kept
	}{
		{"result", mcpclient.Delivery{Kind: mcpclient.DeliveryResult, ResultJSON: okJSON}, pending.EventSucceeded, "", "", false, true},
		{"replayed result", mcpclient.Delivery{Kind: mcpclient.DeliveryResult, ResultJSON: replayJSON}, pending.EventSucceeded, "", "", true, true},
		{"isError", mcpclient.Delivery{Kind: mcpclient.DeliveryResult, ResultJSON: errJSON}, pending.EventFailed, "tool reported an error", "", false, true},
		{"replayed isError", mcpclient.Delivery{Kind: mcpclient.DeliveryResult, ResultJSON: errReplayJSON}, pending.EventFailed, "tool reported an error", "", true, true},
		{"in progress", mcpclient.Delivery{Kind: mcpclient.DeliveryResult, ResultJSON: progJSON}, pending.EventLost, "server reports in progress", "", false, true},
		{"rpc error", mcpclient.Delivery{Kind: mcpclient.DeliveryRPCError, RPCError: rpcErr, Err: rpcErr}, pending.EventFailed, "bad quantity", "", false, false},
		{"not sent", mcpclient.Delivery{Kind: mcpclient.DeliveryNotSent, Err: errors.New("spawn: no such file")}, pending.EventFailed, "not sent: spawn: no such file", "", false, false},
		{"not sent, no error", mcpclient.Delivery{Kind: mcpclient.DeliveryNotSent}, pending.EventFailed, "not sent", "", false, false},
		{"idle", mcpclient.Delivery{Kind: mcpclient.DeliveryUnknown, Reason: mcpclient.ReasonIdleTimeout}, pending.EventLost, "idle timeout", "idle", false, false},
		{"absolute", mcpclient.Delivery{Kind: mcpclient.DeliveryUnknown, Reason: mcpclient.ReasonAbsoluteTimeout}, pending.EventLost, "absolute timeout", "absolute", false, false},
		{"connection lost", mcpclient.Delivery{Kind: mcpclient.DeliveryUnknown, Reason: mcpclient.ReasonConnectionLost}, pending.EventLost, "connection lost", "", false, false},
		{"cancelled", mcpclient.Delivery{Kind: mcpclient.DeliveryUnknown, Reason: mcpclient.ReasonCancelled}, pending.EventLost, "cancelled", "", false, false},
		{"protocol error", mcpclient.Delivery{Kind: mcpclient.DeliveryUnknown, Reason: mcpclient.ReasonProtocolError}, pending.EventLost, "unreadable answer", "", false, false},
		{"reason this build does not know", mcpclient.Delivery{Kind: mcpclient.DeliveryUnknown, Reason: "gremlins"}, pending.EventLost, "gremlins", "", false, false},
		{"kind this build does not know", mcpclient.Delivery{Kind: "new_kind"}, pending.EventLost, "", "", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, replayed := outcomeOf(tc.out)
			if o.Event != tc.event || o.Clock != tc.clock || replayed != tc.replayed {
				t.Errorf("outcome = %+v replayed=%v, want %s clock=%q replayed=%v", o, replayed, tc.event, tc.clock, tc.replayed)
			}
			if !strings.Contains(o.Reason, tc.reason) {
				t.Errorf("reason %q, want %q", o.Reason, tc.reason)
			}
			if tc.result != (len(o.Result) > 0) {
				t.Errorf("result kept = %v", len(o.Result) > 0)
			}
			if tc.out.Kind == mcpclient.DeliveryRPCError && !strings.Contains(string(o.Error), `"code":-32602`) {
				t.Errorf("error %s", o.Error)
			}
		})
	}
	if o, _ := outcomeOf(mcpclient.Delivery{Kind: mcpclient.DeliveryResult, ResultJSON: progJSON}); o.Reason != "server reports in progress" {
		t.Errorf("in-progress reason %q is not the SPEC's text", o.Reason)
	}
}

func TestBackoff(t *testing.T) {
	g := New(nil, nil, Options{Jitter: newJitter()})
	for i := 1; i <= 12; i++ {
		base := 200 * (1 << (i - 1))
		if base > 5000 {
			base = 5000
		}
		for range 50 {
			d := g.backoff(i).Milliseconds()
			if d < int64(base)/2 || d > int64(base)*3/2 {
				t.Fatalf("backoff(%d) = %dms, want %d±50%%", i, d, base)
			}
		}
	}
	if itoa(3) != "3" {
		t.Error(fmt.Sprint(itoa(3)))
	}
}
