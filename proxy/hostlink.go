package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-confirm/mcp-confirm/mcpclient"
)

// hostLink is the host as the client the server may ask things of
// (upstream.go): what the host declared it answers, whether its handshake
// is done, and the server's requests put to it under the proxy's own ids.
//
// Invariants: a request of the server's is in wait from before the host
// can be asked it until request returns, so that a cancel meanwhile finds
// it (or, coming first, is kept in early). It is written to the host at
// most once, and not once ended; its cancel goes up only after it was
// written and only once. Both writes happen under mu, so a cancel never
// reaches the host before its request.
type hostLink struct {
	write func(v any) // one message to the host (Proxy.write)

	ready      chan struct{} // closed when the host finished its handshake (markReady)
	readyOnce  sync.Once
	wanted     chan struct{} // closed when the server first asks the host before it is ready
	wantedOnce sync.Once

	// caps are the host's capabilities, from its initialize: nil before
	// it, and for a 2026-07-28 host, which sends none.
	caps      atomic.Pointer[mcp.ClientCapabilities]
	declared  atomic.Bool   // the host's (first) initialize came
	declaring atomic.Bool   // declareHost is restarting the server
	seq       atomic.Uint64 // numbers the proxy's ids

	mu        sync.Mutex            // guards following, and writes of requests and cancels to the host
	wait      map[string]*upRequest // by the proxy's id (JSON text)
	early     [8]earlyCancel        // the server's last cancels that named no request in wait
	earlyNext int
}

func newHostLink(write func(v any)) *hostLink {
	return &hostLink{write: write, ready: make(chan struct{}), wanted: make(chan struct{}), wait: map[string]*upRequest{}}
}

// upRequest is a request of the server's waiting for the host's answer.
type upRequest struct {
	id       json.RawMessage // the proxy's id for it, to the host
	session  int
	serverID string // the server's id for it (JSON text)
	answer   chan hostAnswer
	written  bool // the host has been asked; guarded by hostLink.mu
	ended    bool // cancelled by the server: the host is not to be asked; guarded by hostLink.mu
}

type hostAnswer struct {
	result json.RawMessage
	err    *mcpclient.RPCError
}

// upIDPrefix starts the ids of the proxy's own requests to the host.
const upIDPrefix = `"mcp-confirm-up-`

// declare keeps the capabilities of the host's first initialize; false,
// and nothing kept, for a later one.
func (h *hostLink) declare(caps *mcp.ClientCapabilities) bool {
	if !h.declared.CompareAndSwap(false, true) {
		return false
	}
	h.caps.Store(caps)
	return true
}

// answers: the host declared it answers the server's request method.
func (h *hostLink) answers(method string) bool {
	caps := h.caps.Load()
	if caps == nil {
		return false
	}
	switch method {
	case string(mcp.MethodSamplingCreateMessage):
		return caps.Sampling != nil
	case string(mcp.MethodElicitationCreate):
		return caps.Elicitation != nil
	case string(mcp.MethodListRoots):
		return caps.Roots != nil
	}
	return false
}

// request asks the host what the server asked, once the host is ready,
// and returns the host's answer as the host wrote it. It ends early when
// the server cancels, when ctx (the server's session) ends, or when
// proxyCtx (the proxy's run) does.
func (h *hostLink) request(ctx, proxyCtx context.Context, r mcpclient.ServerRequest) (json.RawMessage, *mcpclient.RPCError) {
	if !h.answers(r.Method) {
		return nil, &mcpclient.RPCError{Code: mcp.METHOD_NOT_FOUND, Message: "the host behind mcp-confirm did not declare it answers " + r.Method}
	}
	stop := proxyCtx.Done()
	id := strconv.AppendQuote(nil, upIDPrefix[1:]+strconv.FormatUint(h.seq.Add(1), 10))
	req := &upRequest{id: id, session: r.Session, serverID: r.ID, answer: make(chan hostAnswer, 1)}
	h.mu.Lock()
	if h.cancelledEarly(r.Session, r.ID) {
		h.mu.Unlock()
		return nil, &mcpclient.RPCError{Code: mcp.INTERNAL_ERROR, Message: "cancelled by the MCP server"}
	}
	h.wait[string(id)] = req
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		delete(h.wait, string(id))
		h.mu.Unlock()
	}()
	// A server may ask as soon as its own handshake is done, which comes
	// before the host's (declareHost). Registered already, so that the
	// server's cancel meanwhile is not lost.
	if !h.isReady() {
		h.wantedOnce.Do(func() { close(h.wanted) })
	}
	select {
	case <-h.ready:
	case a := <-req.answer:
		return a.result, a.err // cancelled before the host was asked
	case <-ctx.Done():
		return nil, sessionEnded()
	case <-stop:
		return nil, sessionEnded()
	}
	// Written under mu, so that a cancel for it cannot go up before it.
	h.mu.Lock()
	if !req.ended {
		h.write(upRequestLine{JSONRPC: mcp.JSONRPC_VERSION, ID: id, Method: r.Method, Params: r.Params})
		req.written = true
	}
	h.mu.Unlock()
	select {
	case a := <-req.answer:
		return a.result, a.err
	case <-ctx.Done():
		// The server is gone: the host need not go on.
		h.mu.Lock()
		if req.written && !req.ended {
			req.ended = true
			h.cancelUp(id, endReason(ctx))
		}
		h.mu.Unlock()
		return nil, sessionEnded()
	case <-stop:
		return nil, sessionEnded()
	}
}

// endReason is why the host is told to stop answering a request of the
// server's whose ctx ended: the session ended, or, over HTTP, mcpclient's
// bound on the wait passed (the ctx's cause says so).
func endReason(ctx context.Context) string {
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) && cause != context.DeadlineExceeded {
		return cause.Error()
	}
	return "the MCP server's session ended"
}

type upRequestLine struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params,omitempty"`
}

func sessionEnded() *mcpclient.RPCError {
	return &mcpclient.RPCError{Code: mcp.INTERNAL_ERROR, Message: "mcp-confirm proxy: the connection ended before the host answered"}
}

// answered takes the host's answer to a request of the server's; false
// when id names none of the proxy's requests (an answer to mcp-go's server,
// which it then gets). A late answer, to a request the server has since
// cancelled or whose session ended, is dropped: mcp-go would answer it as
// if it were a request.
func (h *hostLink) answered(id json.RawMessage, line []byte) bool {
	id = bytes.TrimSpace(id)
	h.mu.Lock()
	req := h.wait[string(id)]
	h.mu.Unlock()
	if req == nil {
		return bytes.HasPrefix(id, []byte(upIDPrefix))
	}
	var a struct {
		Result json.RawMessage     `json:"result"`
		Error  *mcpclient.RPCError `json:"error"`
	}
	if json.Unmarshal(line, &a) != nil || (a.Error == nil && isNull(a.Result)) {
		a.Error = &mcpclient.RPCError{Code: mcp.INTERNAL_ERROR, Message: "mcp-confirm proxy: the host's answer was neither a result nor an error"}
	}
	if a.Error != nil {
		a.Result = nil
	}
	select {
	case req.answer <- hostAnswer{result: a.Result, err: a.Error}:
	default: // answered twice: the first stands
	}
	return true
}

// serverCancelled passes up the server's notifications/cancelled for a
// request of its own that the host was asked, under the proxy's id, and
// ends the wait for the host's answer. A cancel naming anything else is
// dropped: the host never saw that id.
func (h *hostLink) serverCancelled(session int, params json.RawMessage) {
	var c struct {
		RequestID mcp.RequestId `json:"requestId"`
		Reason    string        `json:"reason"`
	}
	if json.Unmarshal(params, &c) != nil || c.RequestID.IsNil() {
		return
	}
	// The id as mcpclient wrote it in ServerRequest.ID.
	raw, err := json.Marshal(c.RequestID)
	if err != nil {
		return
	}
	serverID := string(raw)
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, req := range h.wait {
		if req.session != session || req.serverID != serverID || req.ended {
			continue
		}
		req.ended = true
		if req.written {
			h.cancelUp(req.id, c.Reason)
		}
		select {
		case req.answer <- hostAnswer{err: &mcpclient.RPCError{Code: mcp.INTERNAL_ERROR, Message: "cancelled by the MCP server"}}:
		default:
		}
		return
	}
	// mcp-go hands a server's request to serverRequest on a goroutine of its
	// own, and its notifications in order on the read loop: a cancel sent
	// right after a request can come first. Kept, the last few, for
	// request to find.
	h.early[h.earlyNext%len(h.early)] = earlyCancel{session: session, serverID: serverID}
	h.earlyNext++
}

// earlyCancel is a server's cancel that named no request being asked.
type earlyCancel struct {
	session  int
	serverID string
}

// cancelledEarly: the server cancelled this request before it was
// registered. The caller holds mu.
func (h *hostLink) cancelledEarly(session int, serverID string) bool {
	for i, c := range h.early {
		if c.session == session && c.serverID == serverID {
			h.early[i] = earlyCancel{}
			return true
		}
	}
	return false
}

// cancelUp tells the host that the request it knows as id is cancelled.
// The caller holds mu.
func (h *hostLink) cancelUp(id json.RawMessage, reason string) {
	params, err := json.Marshal(map[string]any{"requestId": id, "reason": reason})
	if err != nil {
		return
	}
	h.write(notification{JSONRPC: mcp.JSONRPC_VERSION, Method: string(mcp.MethodNotificationCancelled), Params: params})
}

// markReady: the host finished its handshake; notifications and the
// server's requests may go up.
func (h *hostLink) markReady() {
	h.readyOnce.Do(func() { close(h.ready) })
}

func (h *hostLink) isReady() bool {
	select {
	case <-h.ready:
		return true
	default:
		return false
	}
}
