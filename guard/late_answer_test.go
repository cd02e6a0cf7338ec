package guard

import (
	"encoding/json"
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
			h.f.set("create_order", func(c fakeCall) mcpclient.Outcome {
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
