package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// Resuming a write's broken stream (issue 19, SPEC §9). A 2025 server
// that gives its SSE events ids keeps them; a client whose response
// stream broke may GET the endpoint with Last-Event-ID and be sent what it
// missed on that stream, the response included. mcp-go resumes only a
// stream the server ended cleanly. For a tools/call whose stream broke
// after an event id was seen, Remote asks for the rest this way, within
// the call's own clocks: the answer that arrives is the answer to the one
// request that was sent, so nothing is resent. A server that keeps no
// events (no id was seen), a 2026-07-28 connection (resumption was
// removed), or a refusal leaves the call unknown, as before.

// ReasonResumed is the note an attempt answered on a resumed stream carries.
const ReasonResumed = "recovered by resuming the stream; not resent"

// Bounds of the resume loop. A resumed stream may end, break, or stay open
// and quiet (only keep-alive comments): some servers replay what they had
// at the GET and send nothing after it (server-everything 2026.8.31 keeps
// its events but registers the resumed stream under the wrong id). So a
// stream that brings no event for resumeQuiet is dropped and asked again
// from its last id, after a pause that grows to resumePauseMax; at most
// maxResumeGets GETs per call, and never past the call's clocks (ctx).
var (
	resumeQuiet    = 3 * time.Second
	resumePause    = 100 * time.Millisecond
	resumePauseMax = 2 * time.Second
)

const maxResumeGets = 30

// errResumeQuiet: the resumed stream brought no event for resumeQuiet.
var errResumeQuiet = errors.New("the resumed stream brought nothing new")

// canResume reports whether x's broken stream may be resumed on s.
func canResume(s *remoteSession, x exchange) bool {
	return x.answer == nil && x.broken != nil && x.lastEventID != "" && x.status >= 200 && x.status <= 299 && s.connFields == nil
}

// resume asks the server for what x's stream missed after its last event,
// until x's answer comes, ctx ends (the call's clocks), the server refuses,
// or the GETs run out. It returns x with the answer (and resumed set), or x
// as it was, and why not. Progress that comes on a resumed stream is
// delivered as on the first one, so it resets the idle clock; keep-alive
// comments do not.
func (r *Remote) resume(ctx context.Context, x exchange) (exchange, error) {
	last := x.lastEventID
	pause := resumePause
	var why error
	for try := 0; try < maxResumeGets && ctx.Err() == nil; try++ {
		if try > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(pause):
			}
			pause = min(2*pause, resumePauseMax)
		}
		got := exchange{id: x.id, call: x.call}
		err := r.resumeOnce(ctx, x.header, last, &got)
		if got.answer != nil {
			x.answer, x.resumed = got.answer, true
			return x, nil
		}
		why = err
		var refused *RefusedError
		if errors.As(err, &refused) {
			break // the server will not resume this stream (the session is gone, or it keeps no events)
		}
		if got.lastEventID != "" && got.lastEventID != last {
			last, pause = got.lastEventID, resumePause
		}
	}
	if ctx.Err() != nil {
		why = fmt.Errorf("%w (last: %v)", ctx.Err(), why)
	}
	return x, why
}

// resumeOnce is one GET with Last-Event-ID, read into got until the answer
// comes, the stream ends, or it is quiet for resumeQuiet.
func (r *Remote) resumeOnce(ctx context.Context, header http.Header, lastEventID string, got *exchange) error {
	// The GET has a context of its own, so that a quiet stream is dropped by
	// cancelling it (closing the body from another goroutine does not
	// reliably end a Read in progress).
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The stream outlives ctx once its answer is in: the tap reads it on
	// for a second answer (httpTap.drain).
	hold := holdStream(ctx)
	req, err := http.NewRequestWithContext(hold.ctx, http.MethodGet, r.spec.URL, nil)
	if err != nil {
		return err
	}
	req.Header = header.Clone()
	req.Header.Del("Content-Type")
	req.Header.Del("Content-Length")
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Last-Event-ID", lastEventID)
	// The quiet clock runs from the GET on: a server may hold the response
	// headers back until it has an event to write.
	var quiet atomic.Bool
	timer := time.AfterFunc(resumeQuiet, func() {
		quiet.Store(true)
		cancel()
	})
	defer timer.Stop()
	resp, err := r.httpc.Do(req)
	if quiet.Load() {
		if err == nil {
			resp.Body.Close()
		}
		hold.release()
		return errResumeQuiet
	}
	if err != nil {
		hold.release()
		return fmt.Errorf("resume the stream: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		hold.release()
		return &RefusedError{Status: resp.StatusCode}
	}
	sse := &sseTap{t: r.tap, x: got, body: resp.Body, hold: hold, resumed: true, onEvent: func(id string, data []byte) {
		if id != "" {
			timer.Reset(resumeQuiet)
		}
		r.resumedMessage(data)
	}}
	defer sse.Close()
	buf := make([]byte, 32<<10)
	for {
		_, err := sse.Read(buf)
		r.tap.mu.Lock()
		answered := got.answer != nil
		r.tap.mu.Unlock()
		if answered {
			return nil
		}
		if quiet.Load() {
			return errResumeQuiet
		}
		if err != nil {
			return fmt.Errorf("resumed stream ended without the answer: %w", err)
		}
	}
}

// resumedMessage hands a notification that came on a resumed stream to
// where the first stream's notifications go (progress to its call, the
// rest to the proxy's host). The answer is the tap's; a server request on
// a resumed stream is not answered.
func (r *Remote) resumedMessage(data []byte) {
	var n mcp.JSONRPCNotification
	if len(data) == 0 || json.Unmarshal(data, &n) != nil || n.Method == "" {
		return
	}
	var head struct {
		ID json.RawMessage `json:"id"`
	}
	if json.Unmarshal(data, &head) == nil && len(head.ID) > 0 {
		return // a request, not a notification
	}
	r.onNotification(r.Session(), n)
}
