package mcpclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httptrace"
	"sync"
	"sync/atomic"
)

// httpTap is the http.RoundTripper under mcp-go's Streamable HTTP client.
// It watches every POST that carries one of our tools/call requests and
// records, in an exchange, what the decision needs and mcp-go's errors do
// not say exactly: whether a connection was ever made (so whether a byte
// could have left), the status, and the JSON-RPC answer to that request as
// the server wrote it (its bytes, judged by the same classify as on stdio).
//
// mcp-go's own reading of the answer is ignored for tools/call: a gateway's
// 502 body that happens to parse as JSON is not an answer, and an answer is
// judged once, the same way on every transport.
type httpTap struct {
	base http.RoundTripper
	// late takes second answers (Options.OnLateResult); drained is given
	// the other messages read off a stream after its answer (streams.go).
	late    *lateQueue
	drained func(data []byte)
	// quit ends the streams still read after their answer (Remote.Close).
	quit context.Context
	stop context.CancelFunc

	mu     sync.Mutex           // guards following
	calls  map[string]*exchange // by progress token: the call's latest request
	ndrain int                  // streams read after their answer (drain)
	idle   []chan struct{}      // closed when ndrain is next 0
}

// exchange is what the tap saw of the latest tools/call request of one call.
type exchange struct {
	id          string      // its JSON-RPC id, as text (rpcIDText)
	connected   bool        // a connection was obtained: bytes may have left
	sessionSent bool        // the request carried an Mcp-Session-Id
	status      int         // 0: no response headers came
	answer      []byte      // the JSON-RPC response with our id; nil if none came
	lastEventID string      // the last SSE event id seen on its stream
	header      http.Header // the request's headers (session, protocol version, authorization), for a resume
	broken      error       // the response stream broke (not a clean end)
	resumed     bool        // the answer came on a stream resumed with Last-Event-ID (mcp-go's GET or Remote.resume)
	err         error       // what RoundTrip returned, if it failed
	body        *sentOnce   // the request's body, as the HTTP client was given it
	unsent      bool        // (done) the HTTP client never read the body: not one byte of it left
	// answerEvent is the SSE event id the answer came with: the same event
	// delivered again (a server replaying a stream) is no second answer.
	answerEvent string
	seconds     int      // further answers passed on (at most maxSecondAnswers)
	call        *tapCall // the call the request belongs to; nil for one not tracked
}

// tapCall is a tracked call, for its second answers: they are held until
// the call's outcome is out (release), so that whoever journals them
// already knows the request they answer (OnSent), then passed on to the
// late queue as on stdio.
type tapCall struct {
	key, tool string
	session   int
	released  bool
	held      []lateItem
}

func newHTTPTap(base http.RoundTripper) *httpTap {
	t := &httpTap{base: base, calls: map[string]*exchange{}, late: newLateQueue()}
	t.quit, t.stop = context.WithCancel(context.Background())
	return t
}

// watch starts tracking the call whose requests carry token: the call
// with idempotency key key, of tool, on session.
func (t *httpTap) watch(token, key, tool string, session int) {
	t.mu.Lock()
	t.calls[token] = &exchange{call: &tapCall{key: key, tool: tool, session: session}}
	t.mu.Unlock()
}

// done stops tracking token and returns what was seen of its latest request.
func (t *httpTap) done(token string) exchange {
	t.mu.Lock()
	defer t.mu.Unlock()
	x := t.calls[token]
	delete(t.calls, token)
	if x == nil {
		return exchange{}
	}
	if x.body != nil {
		// From here on not one more byte of the request may leave, so
		// that what is decided stays true.
		x.unsent = !x.body.seal()
	}
	return *x
}

// toolsCallHead is the part of a request body the tap reads.
type toolsCallHead struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		Meta struct {
			ProgressToken any `json:"progressToken"`
		} `json:"_meta"`
	} `json:"params"`
}

// RoundTrip passes req on, watching it when it is a tools/call of a
// tracked call. Every request's body is handed to the HTTP client as one
// that leaves at most once (sendOnce), and every response's body is bounded
// (boundResponse).
func (t *httpTap) RoundTrip(req *http.Request) (*http.Response, error) {
	req, once, err := sendOnce(req)
	if err != nil {
		return nil, err
	}
	x := t.exchangeOf(req, once)
	if x == nil {
		if x = t.resumeOf(req); x != nil {
			return t.roundTripResumed(req, x)
		}
		resp, err := t.base.RoundTrip(req)
		if err != nil {
			return nil, err
		}
		media, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
		boundResponse(resp, media)
		return resp, nil
	}
	trace := &httptrace.ClientTrace{GotConn: func(httptrace.GotConnInfo) {
		t.mu.Lock()
		x.connected = true
		t.mu.Unlock()
	}}
	hold := holdStream(req.Context())
	req = req.WithContext(httptrace.WithClientTrace(hold.ctx, trace))
	resp, err := t.base.RoundTrip(req)
	t.mu.Lock()
	defer t.mu.Unlock()
	if err != nil {
		x.err = err
		return nil, err
	}
	x.status = resp.StatusCode
	media, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	boundResponse(resp, media)
	switch media {
	case "text/event-stream":
		resp.Body = &sseTap{t: t, x: x, body: resp.Body, hold: hold}
	case "application/json":
		// Read whole here (boundResponse capped it), so the answer is
		// recorded before mcp-go's decoder, which may stop short of the
		// end, sees it.
		body, rerr := io.ReadAll(resp.Body)
		resp.Body.Close()
		if rerr != nil {
			x.broken = rerr
		}
		t.noteMessage(x, bytes.TrimSpace(body))
		resp.Body = io.NopCloser(bytes.NewReader(body))
	}
	return resp, nil
}

// exchangeOf is the exchange a request belongs to, nil when it is not a
// tools/call of a tracked call. body holds the request's body.
func (t *httpTap) exchangeOf(req *http.Request, body *sentOnce) *exchange {
	if req.Method != http.MethodPost || body == nil {
		return nil
	}
	var head toolsCallHead
	if json.Unmarshal(body.data, &head) != nil || head.Method != "tools/call" {
		return nil
	}
	token, ok := head.Params.Meta.ProgressToken.(string)
	if !ok {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, tracked := t.calls[token]; !tracked {
		return nil
	}
	// A multi round-trip call sends several requests; only the latest can
	// carry its outcome.
	x := &exchange{id: rpcIDText(string(head.ID)), sessionSent: req.Header.Get("Mcp-Session-Id") != "",
		header: req.Header.Clone(), body: body, call: t.calls[token].call}
	t.calls[token] = x
	return x
}

// noteMessage keeps msg as x's answer when it is the response to x's
// request (it has x's id and no method). Called with mu held.
func (t *httpTap) noteMessage(x *exchange, msg []byte) {
	t.noteEvent(x, msg, "", false)
}

// noteEvent is noteMessage for a message that came in an SSE event with id
// event ("" for none), on a stream resumed with Last-Event-ID when resumed.
// It reports whether msg was x's answer, the first. A further response
// with x's id is a second answer (second), unless it is the answer's own
// event delivered again. Called with mu held.
func (t *httpTap) noteEvent(x *exchange, msg []byte, event string, resumed bool) (first bool) {
	if len(msg) == 0 {
		return false
	}
	var head struct {
		ID     json.RawMessage `json:"id"`
		Method *string         `json:"method"`
	}
	if json.Unmarshal(msg, &head) != nil || head.Method != nil || rpcIDText(string(head.ID)) != x.id {
		return false
	}
	if x.answer != nil {
		if event == "" || event != x.answerEvent {
			t.second(x, msg)
		}
		return false
	}
	x.answer, x.answerEvent = bytes.Clone(msg), event
	if resumed {
		x.resumed = true
	}
	return true
}

// sseTap reads an SSE response stream on mcp-go's behalf, noting each
// event's id and the response to the watched request as they pass. Once
// that response has passed, the stream is the tap's alone: mcp-go is given
// the stream up to the end of the answer's event and then its end, and
// the tap reads on (drain), for a second answer to the same request.
type sseTap struct {
	t    *httpTap
	x    *exchange
	body io.ReadCloser
	// hold keeps the stream open when the context of the one who asked for
	// it ends once the answer is in (streams.go).
	hold *streamHold
	// resumed: the stream is one resumed with Last-Event-ID; the answer
	// on it was recovered by resuming.
	resumed bool

	pending []byte       // bytes of an unfinished line
	data    bytes.Buffer // the data of the event being read
	id      string       // the last id field
	over    bool         // the event being read is over the line limit
	// onEvent, if set, is given each event as it is dispatched (its id and
	// data), outside the tap's lock: a resumed stream (Remote.resume) is
	// read by mcp-confirm alone, with no mcp-go client to see its events.
	onEvent func(id string, data []byte)
	idSet   bool // the event being read has an id field of its own
	// handed: the answer has passed, and the rest of the stream is read by
	// drain, which closes it. Atomic: mcp-go may Close the stream from
	// another goroutine while a Read is in progress.
	handed atomic.Bool
	past   bool // the answer's event has been dispatched
}

func (s *sseTap) Read(p []byte) (int, error) {
	if s.handed.Load() {
		return 0, io.EOF
	}
	n, err := s.body.Read(p)
	cut := s.scan(p[:n])
	if err != nil && !errors.Is(err, io.EOF) {
		s.t.mu.Lock()
		s.x.broken = err
		s.t.mu.Unlock()
	}
	if cut >= 0 {
		s.handed.Store(true)
		s.t.drain(s, err != nil)
		return cut, nil
	}
	return n, err
}

// Close closes the stream, unless the tap reads it on after the answer.
func (s *sseTap) Close() error {
	if s.handed.Load() {
		return nil
	}
	s.hold.release()
	return s.body.Close()
}

// scan feeds the stream's bytes through an SSE line parser (the event
// stream format of the HTML standard: id and data fields, a blank line
// dispatches). Memory is bounded by the line limit: a longer event is
// dropped here (mcp-go decides what to make of it; for us it is no answer).
// It returns where in b the event that brought the watched request's
// answer ends, or -1.
func (s *sseTap) scan(b []byte) (cut int) {
	cut = -1
	before := len(s.pending) // bytes of an earlier read, ahead of b
	s.pending = append(s.pending, b...)
	start := 0
	for {
		i := bytes.IndexByte(s.pending[start:], '\n')
		if i < 0 {
			break
		}
		end := start + i + 1
		if s.line(bytes.TrimSuffix(s.pending[start:end-1], []byte("\r"))) && cut < 0 {
			cut = end - before
		}
		start = end
	}
	s.pending = s.pending[start:]
	if limit := int(lineLimit.Load()); len(s.pending) > limit {
		s.pending, s.over = s.pending[:0], true
	}
	return cut
}

// line reads one line; it reports whether it dispatched the event that
// brought the watched request's answer.
func (s *sseTap) line(l []byte) (answer bool) {
	field, value, _ := bytes.Cut(l, []byte(":"))
	value = bytes.TrimPrefix(value, []byte(" "))
	switch {
	case len(l) == 0:
		data := bytes.TrimSpace(s.data.Bytes())
		event := ""
		if s.idSet {
			event = s.id
		}
		s.t.mu.Lock()
		if s.id != "" {
			s.x.lastEventID = s.id
		}
		if !s.over {
			answer = s.t.noteEvent(s.x, data, event, s.resumed)
		}
		s.t.mu.Unlock()
		switch {
		case s.over || !s.idSet && len(data) == 0:
			// A blank line after only comments (a keep-alive) is no event.
		case s.onEvent != nil:
			s.onEvent(event, data)
		case s.past && s.t.drained != nil:
			// After the answer: mcp-go no longer sees the stream.
			s.t.drained(data)
		}
		s.past = s.past || answer
		s.idSet = false
		s.data.Reset()
		s.over = false
	case string(field) == "data":
		if s.over || s.data.Len()+len(value) > int(lineLimit.Load()) {
			s.over = true
			return false
		}
		if s.data.Len() > 0 {
			s.data.WriteByte('\n')
		}
		s.data.Write(value)
	case string(field) == "id":
		s.id, s.idSet = string(value), true
	}
	return answer
}

// errIdempotencyHeader: Go's HTTP client resends a POST on its own, on a
// fresh connection, when the request carries one of these headers and the
// first connection closes (net/http's isReplayable). mcp-confirm never lets
// anything resend a write behind its back, so they are refused.
var errIdempotencyHeader = errors.New("an Idempotency-Key header makes Go's HTTP client resend a POST by itself; " +
	"mcp-confirm sends the key in _meta and the key argument instead")

func checkHeaders(h map[string]string) error {
	for k := range h {
		switch http.CanonicalHeaderKey(k) {
		case "Idempotency-Key", "X-Idempotency-Key":
			return fmt.Errorf("header %s: %w", k, errIdempotencyHeader)
		}
	}
	return nil
}
