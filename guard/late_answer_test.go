package guard

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/mcp-confirm/mcp-confirm/mcpclient"
	"github.com/mcp-confirm/mcp-confirm/pending"
)

// A late answer that settles the call before Call returns (it came with
// the timeout) must be what Call returns, with the state it set: found by
// the end-to-end fault test, where `call` printed {"state":"failed"} with
// no result, and a proxy host would have been told "no answer" for a call
// that the server had answered.
func TestLateAnswerIsTheResult(t *testing.T) {
	for _, tc := range []struct {
		name   string
		answer string
		state  pending.State
	}{
		{"succeeded", `{"content":[],"structuredContent":{"order_id":"o1"},"_meta":{"io.github.mcp-confirm/replayed":true}}`, pending.StateSucceeded},
		{"failed", `{"content":[{"type":"text","text":"stopped before committing"}],"isError":true}`, pending.StateFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, "")
			h.f.set("create_order", func(c fakeCall) mcpclient.Delivery {
				// Delivered on the session's goroutine before Call returns.
				h.g.HandleLateResult(mcpclient.LateResult{Key: c.Opts.Key, Tool: "create_order", Session: 1, RPCID: "1",
					ResultJSON: json.RawMessage(tc.answer)})
				return lostOutcome()
			})
			res, err := h.call(Request{Tool: "create_order", Args: order(2)})
			if err != nil {
				t.Fatal(err)
			}
			c := h.get(res.Call.ID)
			if c.State != tc.state || res.State != tc.state {
				t.Fatalf("journal %s, returned %s; want %s", c.State, res.State, tc.state)
			}
			if string(res.Result) != tc.answer {
				t.Errorf("returned result %s, want the late answer %s", res.Result, tc.answer)
			}
			if res.Replayed != (tc.state == pending.StateSucceeded) {
				t.Errorf("replayed %v", res.Replayed)
			}
		})
	}
}

// An unusable answer that comes late never settles a call: it stays
// unknown, the bytes are kept as an unusable_answer event (SPEC §9).
func TestLateUnusableAnswerIsEvidenceOnly(t *testing.T) {
	h := newHarness(t, "")
	h.f.set("create_order", always(lostOutcome()))
	res, err := h.call(Request{Tool: "create_order", Args: order(2)})
	if err != nil || res.State != pending.StateUnknown {
		t.Fatalf("want unknown, got %s %v", res.State, err)
	}
	h.g.HandleLateResult(mcpclient.LateResult{Key: res.Key, Tool: "create_order", Session: 1, RPCID: "1",
		Class: mcpclient.AnswerUnusable, Raw: json.RawMessage(`{"jsonrpc":"2.0","id":1,"result":null,"isError":true`),
		Why: "result is null"})
	c := h.get(res.Call.ID)
	if c.State != pending.StateUnknown || c.Attempts[0].Late || len(c.Attempts[0].Result) != 0 {
		t.Fatalf("an unusable late answer settled the call: %s %+v", c.State, c.Attempts[0])
	}
	ev, ok := hasEvent(events(t, h.path, c.ID), pending.EventUnusableAnswer)
	if !ok || !strings.Contains(ev.Detail, "result is null") || !strings.Contains(ev.Detail, `\"result\":null`) {
		t.Fatalf("want the raw bytes and why kept as evidence, got %+v", ev)
	}
}

// A second answer to one request is an event; it flags a conflict only
// when it says something other than the first answer, which stands.
func TestSecondAnswer(t *testing.T) {
	first := `{"content":[],"structuredContent":{"order_id":1}}`
	for _, tc := range []struct {
		name, second string
		conflict     bool
	}{
		{"same, spelled otherwise", `{"structuredContent":{"order_id":1.0},"content":[]}`, false},
		{"another result", `{"content":[],"structuredContent":{"order_id":2}}`, true},
		{"a failure", `{"content":[],"isError":true}`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, "")
			h.f.set("create_order", always(rawOutcome(first)))
			res, err := h.call(Request{Tool: "create_order", Args: order(2)})
			if err != nil || res.State != pending.StateSucceeded {
				t.Fatalf("want succeeded, got %s %v", res.State, err)
			}
			rpcID := h.get(res.Call.ID).Attempts[0].RPCID
			h.g.HandleLateResult(mcpclient.LateResult{Key: res.Key, Tool: "create_order", Session: 1, RPCID: rpcID,
				Class: mcpclient.AnswerResult, ResultJSON: json.RawMessage(tc.second), Second: true})
			c := h.get(res.Call.ID)
			if c.State != pending.StateSucceeded || string(c.Attempts[0].Result) != first {
				t.Fatalf("the first answer must stand: %s %s", c.State, c.Attempts[0].Result)
			}
			if c.Conflict != tc.conflict {
				t.Fatalf("conflict = %v, want %v (%s)", c.Conflict, tc.conflict, c.ConflictNote)
			}
			if _, ok := hasEvent(events(t, h.path, c.ID), pending.EventSecondAnswer); !ok {
				t.Errorf("want a second_answer event")
			}
		})
	}
}
