package mcpclient_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mcp-confirm/mcp-confirm/mcpclient"
)

// What a hostile server (testdata/hostile) cannot do: hang a call, a
// listing or the process, or make the client hold a line without bound.

func hostile(args ...string) mcpclient.ServerSpec {
	return mcpclient.ServerSpec{Command: hostileBin, Args: args}
}

// bigArgs are far larger than a pipe's buffer.
func bigArgs() map[string]any {
	return map[string]any{"data": strings.Repeat("x", 1<<20)}
}

// A server that stops reading its stdin while alive: the write of a 1 MB
// request blocks on the full pipe. The call's clock still ends it, unknown
// (part of the request reached the pipe), and the session is ended, so the
// next request goes to a new process instead of queueing behind the write.
func TestHostileStdinStallEndsOnClock(t *testing.T) {
	noLeak(t)
	c := started(t, hostile("stall-stdin"), testOptions())
	if _, err := c.Tools(context.Background()); err != nil {
		t.Fatal(err)
	}
	out := c.Call(context.Background(), "put", bigArgs(), mcpclient.CallOptions{Key: "k-stall-1", IdleTimeout: time.Second})
	if out.Kind != mcpclient.DeliveryUnknown || out.Reason != mcpclient.ReasonIdleTimeout {
		t.Fatalf("want unknown (idle timeout), got %s %s: %v", out.Kind, out.Reason, out.Err)
	}
	if out.SentAt.IsZero() {
		t.Error("the outcome does not say the request was (partly) written")
	}
	// The stalled session is over: listing starts session 2, which answers.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := c.Tools(ctx); err != nil {
		t.Fatalf("list after the stall: %v", err)
	}
	if n := c.Session(); n != 2 {
		t.Errorf("session %d after the stall, want 2", n)
	}
}

// The caller's context (what SIGINT/SIGTERM end in the CLI) ends a call
// stalled in its write, unknown: a signal is never ignored.
func TestHostileStdinStallCancelled(t *testing.T) {
	noLeak(t)
	c := started(t, hostile("stall-stdin"), testOptions())
	if _, err := c.Tools(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan mcpclient.Delivery, 1)
	go func() { done <- c.Call(ctx, "put", bigArgs(), mcpclient.CallOptions{Key: "k-stall-2"}) }()
	// Cancel only once the write has begun: a cancel before it is a
	// correct "not sent", and not what this test is about. (On a loaded
	// machine, encoding the 1 MB arguments alone can outlast a fixed delay.)
	for c.RequestsOnWire() == 0 {
		select {
		case out := <-done:
			t.Fatalf("the call ended before its write began: %s: %v", out.Kind, out.Err)
		case <-time.After(5 * time.Millisecond):
		}
	}
	time.Sleep(100 * time.Millisecond) // the write is now blocked on the full pipe
	cancel()
	select {
	case out := <-done:
		if out.Kind != mcpclient.DeliveryUnknown || out.Reason != mcpclient.ReasonCancelled {
			t.Fatalf("want unknown (cancelled), got %s %s: %v", out.Kind, out.Reason, out.Err)
		}
		if out.SentAt.IsZero() {
			t.Error("the outcome does not say the request was (partly) written")
		}
	case <-time.After(20 * time.Second): // a liveness bound, not a timing check
		t.Fatal("a call stalled in its write ignored its cancelled context")
	}
}

// A server that never answers tools/list: Tools, and a relayed tools/list
// (the proxy's listing), end on the list clock with an error that says so.
func TestHostileSilentList(t *testing.T) {
	noLeak(t)
	opts := testOptions()
	opts.ListTimeout = time.Second
	c := started(t, hostile("silent-list"), opts)
	_, err := c.Tools(context.Background())
	if !errors.Is(err, mcpclient.ErrListTimeout) ||
		err.Error() != "the server did not list its tools within 1s; nothing was sent" {
		t.Fatalf("Tools: %v", err)
	}
	_, err = c.Request(context.Background(), "tools/list", []byte(`{}`))
	if !errors.Is(err, mcpclient.ErrListTimeout) {
		t.Fatalf("Request tools/list: %v", err)
	}
}

// An answer over the line limit, endless or ended, ends its call unknown,
// "answer too large", at once, not by a clock.
func TestHostileTooLargeAnswer(t *testing.T) {
	defer mcpclient.SetLineLimit(1 << 20)()
	for _, args := range [][]string{{"endless"}, {"over", "3000000"}} {
		t.Run(args[0], func(t *testing.T) {
			noLeak(t)
			c := started(t, hostile(args...), testOptions())
			out := c.Call(context.Background(), "put", map[string]any{"data": "x"},
				mcpclient.CallOptions{Key: "k-big", IdleTimeout: time.Minute})
			if out.Kind != mcpclient.DeliveryUnknown || out.Reason != mcpclient.ReasonProtocolError ||
				out.Why != "answer too large (over 1 MiB)" {
				t.Fatalf("want unknown, answer too large; got %s %s %q: %v", out.Kind, out.Reason, out.Why, out.Err)
			}
			if len(out.Raw) > 64<<10 {
				t.Errorf("evidence of %d bytes kept", len(out.Raw))
			}
		})
	}
}
