// Package hostilehttp is a Streamable HTTP MCP server for tests, written
// by hand so that it can answer a tools/call in ways a well-behaved SDK
// never does (issue 44): the polling of SEP-1699 (the POST's stream ends
// before the answer, which comes on the GET resumed with Last-Event-ID),
// or two contradicting answers to one request. It speaks 2025-11-25 with a
// session, serves one write tool, create_order, and counts what it runs.
package hostilehttp

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Modes: how a tools/call is answered.
const (
	// Poll: the POST's stream carries one event with an id and a retry
	// field, and no data, and ends; the answer is sent on the GET that
	// resumes it with that Last-Event-ID (SEP-1699).
	Poll = "poll"
	// PollEmptyDiscover: as Poll, and server/discover is answered with an
	// empty result, as the MCP conformance suite's sse-retry server does
	// (it offers no 2026-07-28 version: this is a 2025 server).
	PollEmptyDiscover = "poll-empty-discover"
	// Twice: the stream carries the answer (success), then a second answer
	// with the same id saying isError true, in one write.
	Twice = "twice"
	// TwiceLater: as Twice, but the second answer comes a moment after the
	// first was flushed, so that it is read after the client has its answer.
	TwiceLater = "twice-later"
)

// Server is the hostile server; URL is its endpoint.
type Server struct {
	URL  string
	mode string

	Executions atomic.Int64 // tools/call requests run
	Resumes    atomic.Int64 // GETs with Last-Event-ID
	Posts      atomic.Int64 // tools/call POSTs received

	mu      sync.Mutex
	pending map[string][]byte // answers waiting for a GET, by the event id they follow
}

// Start runs a server in mode on loopback until the test ends.
func Start(tb testing.TB, mode string) *Server {
	tb.Helper()
	s := &Server{mode: mode, pending: map[string][]byte{}}
	ts := httptest.NewServer(s)
	tb.Cleanup(ts.Close)
	s.URL = ts.URL + "/mcp"
	return s
}

type message struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodDelete:
		return
	case http.MethodGet:
		s.get(w, r)
		return
	case http.MethodPost:
	default:
		http.Error(w, "no", http.StatusMethodNotAllowed)
		return
	}
	var m message
	if err := json.NewDecoder(r.Body).Decode(&m); err != nil {
		http.Error(w, "bad JSON", http.StatusBadRequest)
		return
	}
	if len(m.ID) == 0 {
		w.WriteHeader(http.StatusAccepted) // a notification
		return
	}
	switch m.Method {
	case "server/discover":
		if s.mode == PollEmptyDiscover {
			reply(w, m.ID, `{}`)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"method not found"}}`, m.ID)
	case "initialize":
		w.Header().Set("Mcp-Session-Id", "hostile-session")
		reply(w, m.ID, `{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"hostile","version":"1"}}`)
	case "tools/list":
		reply(w, m.ID, `{"tools":[{"name":"create_order","description":"creates an order",`+
			`"inputSchema":{"type":"object","properties":{"item":{"type":"string"}}},"annotations":{"readOnlyHint":false}}]}`)
	case "tools/call":
		s.Posts.Add(1)
		s.call(w, m.ID)
	default:
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"method not found"}}`, m.ID)
	}
}

func reply(w http.ResponseWriter, id json.RawMessage, result string) {
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":%s}`, id, result)
}

// answer is the response to request id: the order made, or a tool error.
func answer(id json.RawMessage, n int64, isError bool) []byte {
	if isError {
		return fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"order %d failed"}],"isError":true}}`, id, n)
	}
	return fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"order %d created"}],"structuredContent":{"order_id":%d}}}`, id, n, n)
}

func (s *Server) call(w http.ResponseWriter, id json.RawMessage) {
	n := s.Executions.Add(1) // the write runs, once per request
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	flush := func() {
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
	}
	switch s.mode {
	case Poll, PollEmptyDiscover:
		ev := fmt.Sprintf("poll-%d", n)
		s.mu.Lock()
		s.pending[ev] = answer(id, n, false)
		s.mu.Unlock()
		fmt.Fprintf(w, "id: %s\nretry: 20\ndata: \n\n", ev)
	case Twice:
		fmt.Fprintf(w, "id: a-%d\ndata: %s\n\nid: b-%d\ndata: %s\n\n", n, answer(id, n, false), n, answer(id, n, true))
	case TwiceLater:
		fmt.Fprintf(w, "id: a-%d\ndata: %s\n\n", n, answer(id, n, false))
		flush()
		time.Sleep(200 * time.Millisecond) // the shape of the fault, not a wait for anything
		fmt.Fprintf(w, "id: b-%d\ndata: %s\n\n", n, answer(id, n, true))
	}
	flush()
}

// get serves a GET: the answer kept for the Last-Event-ID it resumes from;
// no standalone stream otherwise.
func (s *Server) get(w http.ResponseWriter, r *http.Request) {
	last := r.Header.Get("Last-Event-ID")
	if last == "" {
		http.Error(w, "no standalone stream", http.StatusMethodNotAllowed)
		return
	}
	s.Resumes.Add(1)
	s.mu.Lock()
	ans, ok := s.pending[last]
	delete(s.pending, last)
	s.mu.Unlock()
	if !ok {
		http.Error(w, "no such stream", http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	fmt.Fprintf(w, "id: %s-answer\ndata: %s\n\n", strings.TrimSpace(last), ans)
}
