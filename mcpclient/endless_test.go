package mcpclient_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcp-confirm/mcp-confirm/mcpclient"
)

// endlessServer is a real mcp-go server whose tools/call answers are
// replaced by an HTTP error status with a text body that never ends
// (issue 44, item 7): chunked, written as fast as the client takes it, or a
// byte at a time (drip). It counts the bytes the client let it write and
// says when the client ended the response.
type endlessServer struct {
	url     string
	written atomic.Int64
	ended   chan struct{} // closed when the endless response is over: the client went away
}

// endlessCap keeps an old client that reads everything from eating the
// machine: past it the server stops writing (but does not end the body).
const endlessCap = 64 << 20

// The endless answers: an error status written as fast as the client
// takes it, or a byte at a time; a 200 event stream whose one line never
// ends.
const (
	endless500  = "500"
	dripping500 = "drip"
	endlessLine = "sse-line"
)

func newEndlessServer(t *testing.T, mode string) *endlessServer {
	t.Helper()
	e := &endlessServer{ended: make(chan struct{})}
	s := server.NewMCPServer("endless", "1.0.0")
	s.AddTool(mcp.NewTool("create_order", mcp.WithString("item")),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			t.Error("the tools/call reached the MCP server")
			return mcp.NewToolResultText("?"), nil
		})
	h := server.NewStreamableHTTPServer(s)
	var once atomic.Bool
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if !bytes.Contains(body, []byte(`"tools/call"`)) || !once.CompareAndSwap(false, true) {
			r.Body = io.NopCloser(bytes.NewReader(body))
			h.ServeHTTP(w, r)
			return
		}
		defer close(e.ended)
		drip := mode == dripping500
		chunk := bytes.Repeat([]byte("internal error, and more of it. "), 1024)
		if mode == endlessLine {
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(http.StatusOK)
			_, _ = io.WriteString(w, "data: ")
			chunk = bytes.Repeat([]byte("x"), 32<<10)
		} else {
			w.Header().Set("Content-Type", "text/plain")
			w.WriteHeader(http.StatusInternalServerError)
		}
		rc := http.NewResponseController(w)
		if drip {
			chunk = chunk[:1]
		}
		for e.written.Load() < endlessCap {
			n, err := w.Write(chunk)
			e.written.Add(int64(n))
			if err == nil {
				err = rc.Flush()
			}
			if err != nil {
				return
			}
			if drip {
				select {
				case <-r.Context().Done():
					return
				case <-time.After(20 * time.Millisecond):
				}
			}
		}
		<-r.Context().Done() // never ends the body
	}))
	t.Cleanup(ts.Close)
	e.url = ts.URL + "/mcp"
	return e
}

// TestRemoteEndlessErrorBodyBounded: a 500 whose body never ends is read
// only as far as a message needs; the call ends unknown (http error
// status) while the server is still writing, not when its clock fires, and
// the server gets to write a bounded amount.
func TestRemoteEndlessErrorBodyBounded(t *testing.T) {
	e := newEndlessServer(t, endless500)
	r := remoteClient(t, e.url)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out := r.Call(ctx, "create_order", map[string]any{"item": "book"},
		mcpclient.CallOptions{Key: "key-endless", IdleTimeout: 5 * time.Second})
	if out.Kind != mcpclient.DeliveryUnknown || out.Reason != mcpclient.ReasonHTTPStatus {
		t.Errorf("delivery = %s (%q), %v; want unknown (http error status), before the clock", out.Kind, out.Reason, out.Err)
	}
	select {
	case <-e.ended:
	case <-ctx.Done():
		t.Fatal("the server is still writing: the client never ended the response")
	}
	if n := e.written.Load(); n >= 16<<20 {
		t.Errorf("the server wrote %d bytes of the endless body before the client ended it, want far below 16 MiB", n)
	}
	if out.Err != nil && len(out.Err.Error()) > 128<<10 {
		t.Errorf("the error carries %d bytes of the body", len(out.Err.Error()))
	}
}

// TestRemoteDrippingErrorBodyEndsOnClock: a 500 whose body comes a byte at
// a time, for ever: the call's clock ends the read.
func TestRemoteDrippingErrorBodyEndsOnClock(t *testing.T) {
	e := newEndlessServer(t, dripping500)
	r := remoteClient(t, e.url)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out := r.Call(ctx, "create_order", map[string]any{"item": "book"},
		mcpclient.CallOptions{Key: "key-drip", IdleTimeout: time.Second})
	if out.Kind != mcpclient.DeliveryUnknown || out.Reason != mcpclient.ReasonIdleTimeout {
		t.Errorf("delivery = %s (%q), %v; want unknown (idle timeout)", out.Kind, out.Reason, out.Err)
	}
	select {
	case <-e.ended:
	case <-ctx.Done():
		t.Fatal("the server is still writing: the clock did not end the response")
	}
}

// TestRemoteEndlessEventLineBounded: a 200 event stream whose one line
// never ends is cut at the line limit (mcp-go would hold the line whole);
// the call ends unknown before its clock, the server's writing bounded.
func TestRemoteEndlessEventLineBounded(t *testing.T) {
	t.Cleanup(mcpclient.SetLineLimit(1 << 20))
	e := newEndlessServer(t, endlessLine)
	r := remoteClient(t, e.url)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out := r.Call(ctx, "create_order", map[string]any{"item": "book"},
		mcpclient.CallOptions{Key: "key-line", IdleTimeout: 5 * time.Second})
	if out.Kind != mcpclient.DeliveryUnknown || out.Reason == mcpclient.ReasonIdleTimeout {
		t.Errorf("delivery = %s (%q), %v; want unknown, before the clock", out.Kind, out.Reason, out.Err)
	}
	select {
	case <-e.ended:
	case <-ctx.Done():
		t.Fatal("the server is still writing: the client never ended the stream")
	}
	if n := e.written.Load(); n >= 16<<20 {
		t.Errorf("the server wrote %d bytes of the endless line before the client ended it, want far below 16 MiB", n)
	}
}
