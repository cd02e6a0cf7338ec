package mcpclient

import (
	"context"
	"testing"
	"time"

	"github.com/mcp-confirm/mcp-confirm/internal/npmfixture"
)

// The moment DeclareCapabilities opens: the tap takes no more calls, but the
// session has not ended yet. A call made then is not sent on it; it waits
// for the session's end and is sent on the next one.
func TestCallBetweenTapClosedAndSessionEnd(t *testing.T) {
	c := New(ServerSpec{Command: "node", Args: []string{npmfixture.Bin(t, "mcp-server-everything"), "stdio"}}, Options{})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	s, _ := c.live()
	if !s.tap.closeIfIdle() {
		t.Fatal("a fresh session is not idle")
	}
	done := make(chan Delivery, 1)
	go func() { done <- c.Call(ctx, "echo", map[string]any{"message": "x"}, CallOptions{}) }()
	// Most often the call is by now waiting on the closed tap; either way it
	// must be answered.
	time.Sleep(20 * time.Millisecond)
	s.requestStop()
	out := <-done
	if out.Kind != DeliveryResult || out.Session != 2 {
		t.Fatalf("call made while the session was closing: %v on session %d (%v); want a result on session 2", out.Kind, out.Session, out.Err)
	}
}
