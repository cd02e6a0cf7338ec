package mcpclient

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
)

// The request body rules of sentOnce, as net/http uses them: a body may be
// asked for afresh (GetBody) while not one byte was read (a connection that
// failed before the write: a retry is harmless), never after.
func TestSentOnceRetryOnlyUnread(t *testing.T) {
	req, _ := http.NewRequest(http.MethodPost, "http://example.invalid/mcp", strings.NewReader(`{"x":1}`))
	out, s, err := sendOnce(req)
	if err != nil {
		t.Fatal(err)
	}
	first := out.Body
	second, err := out.GetBody()
	if err != nil {
		t.Fatalf("GetBody before any read: %v", err)
	}
	if _, err := first.Read(make([]byte, 8)); !errors.Is(err, errBodySuperseded) {
		t.Errorf("read of a replaced body: %v, want errBodySuperseded", err)
	}
	if b, err := io.ReadAll(second); err != nil || string(b) != `{"x":1}` {
		t.Fatalf("read %q, %v", b, err)
	}
	if _, err := out.GetBody(); !errors.Is(err, errResendRefused) {
		t.Errorf("GetBody after a read: %v, want errResendRefused", err)
	}
	if !s.seal() {
		t.Errorf("seal says the body was never read")
	}
}

func TestSentOnceSealStopsReads(t *testing.T) {
	req, _ := http.NewRequest(http.MethodPost, "http://example.invalid/mcp", strings.NewReader(`{}`))
	out, s, _ := sendOnce(req)
	if s.seal() {
		t.Fatalf("seal says an unread body was read")
	}
	if _, err := out.Body.Read(make([]byte, 8)); err == nil {
		t.Errorf("a sealed body was read")
	}
	if _, err := out.GetBody(); err == nil {
		t.Errorf("a sealed body was handed out again")
	}
}

// A body the HTTP client began to read before the call was decided is
// read on to its end after the seal (net/http reads a body to EOF after
// the response may already be in; an error there would close a connection
// whose stream is still read), but is never handed out again.
func TestSentOnceSealLetsAStartedWriteFinish(t *testing.T) {
	req, _ := http.NewRequest(http.MethodPost, "http://example.invalid/mcp", strings.NewReader(`{"a":1}`))
	out, s, _ := sendOnce(req)
	first := make([]byte, 3)
	if _, err := out.Body.Read(first); err != nil {
		t.Fatal(err)
	}
	if !s.seal() {
		t.Fatalf("seal says a body read from was never read")
	}
	rest, err := io.ReadAll(out.Body)
	if err != nil || string(first)+string(rest) != `{"a":1}` {
		t.Errorf("after the seal the started body read %q, %v; want the rest of it", rest, err)
	}
	if _, err := out.GetBody(); err == nil {
		t.Errorf("a sealed body was handed out again")
	}
}

// A connection made but a body never read is not sent; a resend refused
// after a reset is unknown, connection lost.
func TestDecideHTTPBodyUnreadAndResendRefused(t *testing.T) {
	out := decideHTTP(exchange{connected: true, unsent: true, err: errors.New("http2: client conn not usable")}, nil, "", nil)
	if out.Kind != DeliveryNotSent {
		t.Errorf("unread body: %s, %v; want not sent", out.Kind, out.Err)
	}
	out = decideHTTP(exchange{connected: true, err: errResendRefused}, nil, ReasonProtocolError, nil)
	if out.Kind != DeliveryUnknown || out.Reason != ReasonConnectionLost || !errors.Is(out.Err, ErrConnectionLost) {
		t.Errorf("refused resend: %s (%q), %v; want unknown, connection lost", out.Kind, out.Reason, out.Err)
	}
}

func TestCapBodyEndsAndCloses(t *testing.T) {
	closed := false
	body := capBody(readCloser{strings.NewReader(strings.Repeat("x", 100)), func() { closed = true }}, 10)
	b, err := io.ReadAll(body)
	if err != nil || len(b) != 10 || !closed {
		t.Errorf("read %d bytes, %v, closed %v; want 10, nil, true", len(b), err, closed)
	}
}

func TestLineBoundBody(t *testing.T) {
	l := &lineBoundBody{body: io.NopCloser(strings.NewReader("ab\ncdef\nghijklmn")), max: 4}
	b, err := io.ReadAll(l)
	if !errors.Is(err, errLineTooLong) || string(b) != "ab\ncdef\nghij" {
		t.Errorf("read %q, %v; want the lines up to the limit, errLineTooLong", b, err)
	}
}

type readCloser struct {
	io.Reader
	close func()
}

func (r readCloser) Close() error { r.close(); return nil }
