package guard

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/mcp-confirm/mcp-confirm/mcpclient"
	"github.com/mcp-confirm/mcp-confirm/pending"
)

// A retry of an unknown call that is never sent (the server cannot be
// started again) learns nothing: the call stays unknown, and abandon and
// mark applied stay open to the operator. Found by the end-to-end tests,
// where such a call became "failed" although its first attempt had
// committed an order. A retry of a failed call that is not sent stays
// failed.
func TestRetryNotSent(t *testing.T) {
	notSent := always(mcpclient.Delivery{Kind: mcpclient.DeliveryNotSent, Err: errors.New("start MCP server: exit status 1")})
	for _, tc := range []struct {
		name  string
		first mcpclient.Delivery
		want  pending.State
	}{
		{"unknown stays unknown", lostOutcome(), pending.StateUnknown},
		{"failed stays failed", rawOutcome(`{"content":[],"isError":true}`), pending.StateFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, "")
			h.f.set("create_order", always(tc.first))
			res, err := h.call(Request{Tool: "create_order", Args: order(2)})
			if err != nil {
				t.Fatal(err)
			}
			h.f.set("create_order", notSent)
			r, err := h.g.Retry(context.Background(), res.Call.ID, RetryOptions{})
			if !errors.Is(err, ErrUnavailable) {
				t.Fatalf("retry not sent: err = %v", err)
			}
			c := h.get(res.Call.ID)
			if c.State != tc.want || r.State != tc.want {
				t.Fatalf("after a retry that was not sent: journal %s, returned %s; want %s", c.State, r.State, tc.want)
			}
			if a := c.Attempts[1]; a.N != 2 || !strings.HasPrefix(a.Reason, "not sent") {
				t.Errorf("attempt 2: %+v", a)
			}
			if tc.want == pending.StateUnknown {
				if err := h.g.Abandon(context.Background(), c.ID, "checked by hand"); err != nil {
					t.Errorf("abandon after a retry that was not sent: %v", err)
				}
			}
		})
	}
}
