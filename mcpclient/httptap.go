package mcpclient

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httptrace"
	"sync"
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

	mu    sync.Mutex           // guards following
	calls map[string]*exchange // by progress token: the call's latest request
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
	resumed     bool        // the answer came on a stream resumed with Last-Event-ID (Remote.resume)
	err         error       // what RoundTrip returned, if it failed
	body        *sentOnce   // the request's body, as the HTTP client was given it
	unsent      bool        // (done) the HTTP client never read the body: not one byte of it left
}

func newHTTPTap(base http.RoundTripper) *httpTap {
	return &httpTap{base: base, calls: map[string]*exchange{}}
}

// watch starts tracking the call whose requests carry token.
func (t *httpTap) watch(token string) {
	t.mu.Lock()
	t.calls[token] = &exchange{}
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
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
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
		resp.Body = &sseTap{t: t, x: x, body: resp.Body}
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
		header: req.Header.Clone(), body: body}
	t.calls[token] = x
	return x
}

// noteMessage keeps msg as x's answer when it is the response to x's
// request (it has x's id and no method). Called with mu held.
func (t *httpTap) noteMessage(x *exchange, msg []byte) {
	if x.answer != nil || len(msg) == 0 {
		return
	}
	var head struct {
		ID     json.RawMessage `json:"id"`
		Method *string         `json:"method"`
	}
	if json.Unmarshal(msg, &head) != nil || head.Method != nil || rpcIDText(string(head.ID)) != x.id {
		return
	}
	x.answer = bytes.Clone(msg)
}

// sseTap reads an SSE response stream on mcp-go's behalf, noting each
// event's id and the response to the watched request as they pass.
type sseTap struct {
	t    *httpTap
	x    *exchange
	body io.ReadCloser

	pending []byte       // bytes of an unfinished line
	data    bytes.Buffer // the data of the event being read
	id      string       // the last id field
	over    bool         // the event being read is over the line limit
	// onEvent, if set, is given each event as it is dispatched (its id and
	// data), outside the tap's lock: a resumed stream (Remote.resume) is
	// read by mcp-confirm alone, with no mcp-go client to see its events.
	onEvent func(id string, data []byte)
	idSet   bool // the event being read has an id field of its own
}

func (s *sseTap) Read(p []byte) (int, error) {
	n, err := s.body.Read(p)
	s.scan(p[:n])
	if err != nil && !errors.Is(err, io.EOF) {
		s.t.mu.Lock()
		s.x.broken = err
		s.t.mu.Unlock()
	}
	return n, err
}

func (s *sseTap) Close() error { return s.body.Close() }

// scan feeds the stream's bytes through an SSE line parser (the event
// stream format of the HTML standard: id and data fields, a blank line
// dispatches). Memory is bounded by the line limit: a longer event is
// dropped here (mcp-go decides what to make of it; for us it is no answer).
func (s *sseTap) scan(b []byte) {
	s.pending = append(s.pending, b...)
	for {
		i := bytes.IndexByte(s.pending, '\n')
		if i < 0 {
			break
		}
		s.line(bytes.TrimSuffix(s.pending[:i], []byte("\r")))
		s.pending = s.pending[i+1:]
	}
	if limit := int(lineLimit.Load()); len(s.pending) > limit {
		s.pending, s.over = s.pending[:0], true
	}
}

func (s *sseTap) line(l []byte) {
	field, value, _ := bytes.Cut(l, []byte(":"))
	value = bytes.TrimPrefix(value, []byte(" "))
	switch {
	case len(l) == 0:
		s.t.mu.Lock()
		if s.id != "" {
			s.x.lastEventID = s.id
		}
		if !s.over {
			s.t.noteMessage(s.x, bytes.TrimSpace(s.data.Bytes()))
		}
		s.t.mu.Unlock()
		if data := bytes.TrimSpace(s.data.Bytes()); s.onEvent != nil && !s.over && (s.idSet || len(data) > 0) {
			// A blank line after only comments (a keep-alive) is no event.
			id := ""
			if s.idSet {
				id = s.id
			}
			s.onEvent(id, data)
		}
		s.idSet = false
		s.data.Reset()
		s.over = false
	case string(field) == "data":
		if s.over || s.data.Len()+len(value) > int(lineLimit.Load()) {
			s.over = true
			return
		}
		if s.data.Len() > 0 {
			s.data.WriteByte('\n')
		}
		s.data.Write(value)
	case string(field) == "id":
		s.id, s.idSet = string(value), true
	}
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
