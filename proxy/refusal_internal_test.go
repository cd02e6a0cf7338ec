package proxy

import (
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-confirm/mcp-confirm/guard"
	"github.com/mcp-confirm/mcp-confirm/mcpclient"
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

// A write the server answered with a status by which it says it did not
// run it is told to the host as unknown with the server's word, never as
// "did not answer in time".
func TestUnknownSaysWhatTheServerSaid(t *testing.T) {
	r := Unknown(7, "01KEY0000000000000000000", string(mcpclient.RefusedReason(404, true)))
	text := r.Content[0].(mcp.TextContent).Text
	if !strings.Contains(text, "UNKNOWN: the server answered 404 for the session: it says it did not run this, but that is only its word") ||
		strings.Contains(text, "in time") {
		t.Fatalf("answer %q; want the server's word, as such", text)
	}
}
