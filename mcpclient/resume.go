package mcpclient

import (
	"context"
	"errors"
	"fmt"
	"net/http"
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

// maxResumes bounds the GETs for one call: a resumed stream may break
// again (each one that brings new events earns another try).
const maxResumes = 3

// canResume reports whether x's broken stream may be resumed on s.
func canResume(s *remoteSession, x exchange) bool {
	return x.answer == nil && x.broken != nil && x.lastEventID != "" && x.status >= 200 && x.status <= 299 && s.connFields == nil
}

// resume asks the server for what x's stream missed after its last event,
// until x's answer comes, ctx ends (the call's clocks), or the server
// cannot resume. It returns x with the answer (and resumed set), or x as it
// was, and why not.
func (r *Remote) resume(ctx context.Context, x exchange, onEvent func()) (exchange, error) {
	last := x.lastEventID
	var why error
	for try := 0; try < maxResumes && ctx.Err() == nil; try++ {
		got := exchange{id: x.id}
		err := r.resumeOnce(ctx, x.header, last, &got, onEvent)
		if got.answer != nil {
			x.answer, x.resumed = got.answer, true
			return x, nil
		}
		why = err
		var refused *RefusedError
		if errors.As(err, &refused) || got.lastEventID == "" || got.lastEventID == last {
			break // refused, or nothing new came: another GET would do the same
		}
		last = got.lastEventID
	}
	if why == nil {
		why = ctx.Err()
	}
	return x, why
}

// resumeOnce is one GET with Last-Event-ID, read into got.
func (r *Remote) resumeOnce(ctx context.Context, header http.Header, lastEventID string, got *exchange, onEvent func()) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.spec.URL, nil)
	if err != nil {
		return err
	}
	req.Header = header.Clone()
	req.Header.Del("Content-Type")
	req.Header.Del("Content-Length")
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Last-Event-ID", lastEventID)
	resp, err := r.httpc.Do(req)
	if err != nil {
		return fmt.Errorf("resume the stream: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return &RefusedError{Status: resp.StatusCode}
	}
	sse := &sseTap{t: r.tap, x: got, body: resp.Body}
	buf := make([]byte, 32<<10)
	for {
		n, err := sse.Read(buf)
		if n > 0 && onEvent != nil {
			onEvent()
		}
		r.tap.mu.Lock()
		answered := got.answer != nil
		r.tap.mu.Unlock()
		if answered {
			return nil
		}
		if err != nil {
			return fmt.Errorf("resumed stream ended without the answer: %w", err)
		}
	}
}
