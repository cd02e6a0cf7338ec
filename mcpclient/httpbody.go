package mcpclient

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"sync"
)

// The bodies under the tap, both ways. A request's body leaves at most
// once: net/http resends a request on its own, below the journal, when an
// HTTP/2 server (or a proxy in between) answers with GOAWAY or a stream
// reset (REFUSED_STREAM, PROTOCOL_ERROR) after the request was written, and
// does so through Request.GetBody. A response's body is read only as far as
// mcp-go needs it, never whole when the server does not end it.

// errResendRefused is what the HTTP client is given when it asks for a
// request's body a second time after bytes of the first may have left.
var errResendRefused = errors.New("the connection was lost or reset after the request was sent " +
	"(HTTP/2 GOAWAY or stream reset, or a closed connection); the HTTP client's own resend was refused")

// errBodySuperseded: a body handed out before another took its place, or
// after the call was decided, is read again. Not expected of net/http.
var errBodySuperseded = errors.New("request body read after it was replaced or the call was decided")

// sentOnce holds one request's body for the HTTP client, which gets it as
// a body that can be read once (onceBody) and a GetBody that gives it
// afresh only while not one byte of it was read: a connection that failed
// before the body was touched may be retried (the stale keep-alive of
// HTTP/1, an HTTP/2 connection found unusable), one that failed after may
// not. Only the latest body handed out can be read.
type sentOnce struct {
	data []byte

	mu      sync.Mutex // guards following
	current *onceBody  // the one body that may be read
	touched bool       // a Read was made: bytes of the body may have left
	sealed  bool       // the call was decided (seal): no body is handed out again
}

func newSentOnce(data []byte) *sentOnce { return &sentOnce{data: data} }

// body is the request's GetBody.
func (s *sentOnce) body() (io.ReadCloser, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.touched || s.sealed {
		return nil, errResendRefused
	}
	b := &onceBody{s: s, r: bytes.NewReader(s.data)}
	s.current = b
	return b, nil
}

// seal stops s from handing out its body again, and an untouched body
// from being read from now on; it reports whether one ever was read:
// false means not one byte of the request's body can have left.
func (s *sentOnce) seal() (touched bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sealed = true
	return s.touched
}

type onceBody struct {
	s      *sentOnce
	r      *bytes.Reader
	closed bool // guarded by s.mu
}

func (b *onceBody) Read(p []byte) (int, error) {
	s := b.s
	s.mu.Lock()
	defer s.mu.Unlock()
	// Sealed untouched, the call was decided "not sent": not one byte may
	// leave after that. Sealed once touched, the call was decided sent, and
	// the HTTP client may still be finishing this body's write (it reads on
	// to EOF): failing that read would make it close a connection whose
	// stream the tap still reads for second answers (streams.go).
	if s.current != b || (s.sealed && !s.touched) {
		return 0, errBodySuperseded
	}
	if b.closed {
		return 0, http.ErrBodyReadAfterClose
	}
	// Counted before the read: a read that returns nothing may still be
	// the one after which the client wrote what it had.
	s.touched = true
	return b.r.Read(p)
}

func (b *onceBody) Close() error {
	b.s.mu.Lock()
	b.closed = true
	b.s.mu.Unlock()
	return nil
}

// sendOnce returns req with its body taken over by a sentOnce (nil when
// req has none). The original body is read and closed.
func sendOnce(req *http.Request) (*http.Request, *sentOnce, error) {
	if req.Body == nil || req.Body == http.NoBody {
		return req, nil, nil
	}
	data, err := io.ReadAll(req.Body)
	req.Body.Close()
	if err != nil {
		return nil, nil, err
	}
	s := newSentOnce(data)
	out := *req // RoundTrip must not change the caller's request
	out.Body, _ = s.body()
	out.GetBody = s.body
	out.ContentLength = int64(len(data))
	return &out, s, nil
}

// errorBodyLimit is how much of a response with an error status is read:
// enough for a message (or a JSON-RPC error), no more. mcp-go reads such a
// body whole (io.ReadAll), and one that never ends would hold the call and
// its memory until the clock fires, and then be printed.
const errorBodyLimit = 64 << 10

// boundResponse caps resp's body to what mcp-go may need of it: a small
// prefix for an error status or a content type mcp-go does not read, a
// line's limit for a JSON answer. An event stream is bounded by time (the
// call's clocks) and per line (lineBoundBody), not in total.
func boundResponse(resp *http.Response, media string) {
	switch {
	case resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusAccepted:
		// mcp-go treats every other status as an error.
		resp.Body = capBody(resp.Body, errorBodyLimit)
	case media == "text/event-stream":
		resp.Body = &lineBoundBody{body: resp.Body, max: lineLimit.Load()}
	case media == "application/json":
		resp.Body = capBody(resp.Body, lineLimit.Load()+1)
	default:
		resp.Body = capBody(resp.Body, errorBodyLimit)
	}
}

// cappedBody ends a body after n bytes: the rest is not read, and the
// underlying body is closed at once so that the connection is given up
// (HTTP/1) or the stream reset (HTTP/2) and the server stops sending.
type cappedBody struct {
	body io.ReadCloser
	left int64

	mu     sync.Mutex
	closed bool
}

func capBody(body io.ReadCloser, n int64) io.ReadCloser {
	if body == nil || body == http.NoBody {
		return body
	}
	return &cappedBody{body: body, left: n}
}

func (c *cappedBody) Read(p []byte) (int, error) {
	if c.left <= 0 {
		c.Close()
		return 0, io.EOF
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.body.Read(p)
	c.left -= int64(n)
	if c.left <= 0 && err == nil {
		c.Close()
		err = io.EOF
	}
	return n, err
}

func (c *cappedBody) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	return c.body.Close()
}

// errLineTooLong ends an event stream with a line longer than the line
// limit: mcp-go reads a stream line by line (bufio.Reader.ReadString), and
// would hold a line that never ends whole.
var errLineTooLong = errors.New("a line of the event stream is longer than the limit; the stream was ended")

// lineBoundBody passes an event stream on until one of its lines runs
// past max bytes, then ends it (errLineTooLong) and closes it.
type lineBoundBody struct {
	body io.ReadCloser
	max  int64
	line int64 // bytes since the last newline
	err  error
}

func (l *lineBoundBody) Read(p []byte) (int, error) {
	if l.err != nil {
		return 0, l.err
	}
	n, err := l.body.Read(p)
	for off := 0; off < n; {
		seg := bytes.IndexByte(p[off:n], '\n')
		if seg < 0 {
			seg = n - off
		}
		if l.line+int64(seg) > l.max {
			// What came before the line passes; the line ends here.
			l.err = errLineTooLong
			l.body.Close()
			return off + int(l.max-l.line), l.err
		}
		if off+seg == n {
			l.line += int64(seg)
			break
		}
		l.line, off = 0, off+seg+1
	}
	return n, err
}

func (l *lineBoundBody) Close() error { return l.body.Close() }
