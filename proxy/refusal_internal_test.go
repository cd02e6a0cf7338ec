package proxy

import (
	"errors"
	"log/slog"
	"testing"

	"github.com/mcp-confirm/mcp-confirm/guard"
)

// A write that was sent but whose outcome the journal could not record is
// answered unknown (do not retry), never "could not be sent" (try again).
func TestRefusalOfAnUnrecordedOutcomeIsUnknown(t *testing.T) {
	p := &Proxy{log: slog.New(slog.DiscardHandler)}
	err := &guard.OutcomeNotRecordedError{CallID: 7, Err: errors.New("disk full")}
	r := p.refusal("create_order", guard.Result{Key: "01KEY0000000000000000000"}, err)
	st, _ := r.StructuredContent.(map[string]any)
	if !r.IsError || st[StatusField] != "unknown" || st["call_id"] != int64(7) || st["key"] != "01KEY0000000000000000000" {
		t.Fatalf("answer %+v; want the unknown answer for call 7", r)
	}
}
