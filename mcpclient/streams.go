package mcpclient

import (
	"bytes"
	"context"
	"io"
	"mime"
	"net/http"
	"sync"
	"time"
)

// Every stream of a call's request (issue 44). The answer to a tools/call
// over HTTP may come on the POST's own stream, or on a stream resumed with
// Last-Event-ID: by mcp-go, when a 2025-11-25 server ends the POST's
// stream before the answer to be polled (SEP-1699), or by Remote.resume
// when the stream broke. Each is the one request's stream: a GET resumes
// it, it resends nothing. The tap watches them all, and reads each on
// after its answer, so that a second answer to the same request is kept
// as on stdio (LateResult.Second), not dropped with the stream mcp-go
// closes once it has its answer.

// callTokenKey is the context key under which Remote.Call puts the call's
// progress token: mcp-go opens a resumed stream under the context of the
// request it resumes, so a GET with it is a stream of that call.
type callTokenKey struct{}

func withCallToken(ctx context.Context, token string) context.Context {
	return context.WithValue(ctx, callTokenKey{}, token)
}

// drainFor bounds how long a stream is read after its answer: a server
// should end it there; one that keeps it open is heard that long for a
// second answer. closeGrace is how long Close lets streams being read end
// by themselves before it ends them.
var (
	drainFor   = 10 * time.Second
	closeGrace = time.Second
)

// streamHold is the context a watched request is sent with: it ends with
// the asker's own, until the answer is in (keep); from then on only when
// the tap is done with the stream (release). mcp-go ends its context as
// soon as it has the answer, which would cut the rest of the stream.
type streamHold struct {
	ctx    context.Context
	cancel context.CancelFunc
	stop   func() bool

	mu   sync.Mutex
	kept bool
}

func holdStream(parent context.Context) *streamHold {
	h := &streamHold{}
	h.ctx, h.cancel = context.WithCancel(context.WithoutCancel(parent))
	h.stop = context.AfterFunc(parent, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if !h.kept {
			h.cancel()
		}
	})
	return h
}

// keep detaches the stream from the asker's context, if it has not ended
// yet; it reports whether it did.
func (h *streamHold) keep() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ctx.Err() != nil {
		return false
	}
	h.kept = true
	return true
}

// release ends the stream's context.
func (h *streamHold) release() {
	h.stop()
	h.cancel()
}

// resumeOf is the exchange whose stream req resumes: a GET with
// Last-Event-ID made under the context of a tracked call's request (by
// mcp-go, polling a stream the server ended before the answer). nil for
// any other request, and once the call is over (Remote.resume's own GETs
// are read by it).
func (t *httpTap) resumeOf(req *http.Request) *exchange {
	if req.Method != http.MethodGet || req.Header.Get("Last-Event-ID") == "" {
		return nil
	}
	token, _ := req.Context().Value(callTokenKey{}).(string)
	if token == "" {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.calls[token]
}

// roundTripResumed passes on a GET that resumes x's stream and watches the
// stream that comes back as x's.
func (t *httpTap) roundTripResumed(req *http.Request, x *exchange) (*http.Response, error) {
	hold := holdStream(req.Context())
	resp, err := t.base.RoundTrip(req.WithContext(hold.ctx))
	if err != nil {
		hold.release()
		t.mu.Lock()
		if x.answer == nil {
			x.broken = err // Remote.resume may ask again
		}
		t.mu.Unlock()
		return nil, err
	}
	media, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	boundResponse(resp, media) // bounded as every other response (httpbody.go)
	if resp.StatusCode != http.StatusOK || media != "text/event-stream" {
		// Refused: mcp-go gives up, and so does the call.
		resp.Body = &releaseOnClose{ReadCloser: resp.Body, hold: hold}
		return resp, nil
	}
	resp.Body = &sseTap{t: t, x: x, body: resp.Body, hold: hold, resumed: true}
	return resp, nil
}

type releaseOnClose struct {
	io.ReadCloser
	hold *streamHold
}

func (r *releaseOnClose) Close() error {
	r.hold.release()
	return r.ReadCloser.Close()
}

// drain reads s on after its answer, in the background, until it ends,
// drainFor passes, or the tap closes; then closes it. ended: the stream
// already ended in the read that brought the answer. Messages other than
// responses go where a resumed stream's go (drained, from sseTap.line).
func (t *httpTap) drain(s *sseTap, ended bool) {
	t.mu.Lock()
	closing := t.quit.Err() != nil
	if !ended && !closing && s.hold.keep() {
		t.ndrain++
	} else {
		ended = true
	}
	t.mu.Unlock()
	if ended {
		s.hold.release()
		_ = s.body.Close()
		return
	}
	stopQuit := context.AfterFunc(t.quit, s.hold.cancel)
	timer := time.AfterFunc(drainFor, s.hold.cancel)
	go func() {
		defer t.drainEnded()
		defer s.hold.release()
		defer s.body.Close()
		defer timer.Stop()
		defer stopQuit()
		buf := make([]byte, 32<<10)
		for {
			n, err := s.body.Read(buf)
			s.scan(buf[:n])
			if err != nil {
				return
			}
		}
	}()
}

// second passes on a further answer to x's request, within the bound:
// held until the call's outcome is out, then to the late queue. Called
// with mu held.
func (t *httpTap) second(x *exchange, msg []byte) {
	if x.call == nil || x.seconds >= maxSecondAnswers {
		return
	}
	x.seconds++
	c := x.call
	it := lateItem{key: c.key, tool: c.tool, session: c.session, rpcID: x.id, second: true,
		resp: &wireResp{line: bytes.Clone(msg), at: time.Now()}}
	if !c.released {
		c.held = append(c.held, it)
		return
	}
	t.late.push(it)
}

// release passes on the second answers held for c, and those that come
// later as they come: its outcome is out, and every id it sent was given
// to OnSent.
func (t *httpTap) release(c *tapCall) {
	if c == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	c.released = true
	for _, it := range c.held {
		t.late.push(it)
	}
	c.held = nil
}

// drainEnded counts a drain out.
func (t *httpTap) drainEnded() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ndrain--; t.ndrain == 0 {
		for _, ch := range t.idle {
			close(ch)
		}
		t.idle = nil
	}
}

// drainsIdle is closed once no stream is read after its answer. Called
// with mu held.
func (t *httpTap) drainsIdle() <-chan struct{} {
	ch := make(chan struct{})
	if t.ndrain == 0 {
		close(ch)
		return ch
	}
	t.idle = append(t.idle, ch)
	return ch
}

// close lets the streams still read after their answers end by themselves
// for closeGrace, ends the rest, and closes the late queue (its runner
// delivers what is queued and returns).
func (t *httpTap) close() {
	t.mu.Lock()
	idle := t.drainsIdle()
	t.mu.Unlock()
	grace := time.NewTimer(closeGrace)
	select {
	case <-idle:
	case <-grace.C:
	}
	grace.Stop()
	t.mu.Lock()
	t.stop() // under mu: no drain starts after this
	idle = t.drainsIdle()
	t.mu.Unlock()
	<-idle
	t.late.close()
}
