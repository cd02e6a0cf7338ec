package guard

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/mcp-confirm/mcp-confirm/mcpclient"
	"github.com/mcp-confirm/mcp-confirm/pending"
)

// With Options.RecordedResult, a write's Result.Call is what the journal
// reads back, but for the clock of its last update; for the writes it is
// not built for, it is the read-back call itself.
func TestRecordedResultIsTheCallAsRead(t *testing.T) {
	cases := map[string]mcpclient.Delivery{
		"succeeded":  okOutcome(map[string]any{"order_id": 7}),
		"tool error": rawOutcome(`{"content":[{"type":"text","text":"no budget"}],"isError":true}`),
		"rpc error":  {Kind: mcpclient.DeliveryRPCError, RPCError: &mcpclient.RPCError{Code: -32602, Message: "bad item"}},
		"replayed":   rawOutcome(`{"content":[],"_meta":{"io.github.mcp-confirm/replayed":true}}`),
		"lost":       lostOutcome(),
		"not sent":   {Kind: mcpclient.DeliveryNotSent, Err: mcpclient.ErrIdleTimeout},
	}
	for name, out := range cases {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, `[tools.create_order]
redact = ["buyer"]
`)
			h.g.opts.RecordedResult = true
			h.f.set("create_order", always(out))
			res, _ := h.call(Request{Tool: "create_order", Args: order(3)})
			if res.Call.ID == 0 {
				t.Fatalf("no call: %+v", res)
			}
			got, want := res.Call, h.get(res.Call.ID)
			if got.State != res.State || want.State != res.State {
				t.Errorf("state: result %s, its call %s, read back %s", res.State, got.State, want.State)
			}
			if len(got.Attempts) != len(want.Attempts) {
				t.Fatalf("attempts: %+v, read back %+v", got.Attempts, want.Attempts)
			}
			for i := range got.Attempts {
				if (got.Attempts[i].EndedAt == nil) != (want.Attempts[i].EndedAt == nil) {
					t.Errorf("attempt %d ended at %v, read back %v", i+1, got.Attempts[i].EndedAt, want.Attempts[i].EndedAt)
				}
				got.Attempts[i].EndedAt, want.Attempts[i].EndedAt = nil, nil
			}
			got.UpdatedAt = want.UpdatedAt
			if !reflect.DeepEqual(norm(t, got), norm(t, want)) {
				t.Errorf("the result's call differs from the journal's:\n got %+v\nwant %+v", got, want)
			}
		})
	}
}

// norm is c as JSON, plus what JSON leaves out, so that nil and empty
// slices and equal times in other locations compare equal.
func norm(t *testing.T, c pending.Call) string {
	b, err := json.Marshal(struct {
		pending.Call
		Owner string
		Seals []string
	}{c, c.Owner, c.RedactedSeals})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
