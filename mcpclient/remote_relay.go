package mcpclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"time"
	"unicode/utf8"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-confirm/mcp-confirm/termtext"
)

// Relaying over HTTP, for the proxy in front of a remote server (proxy
// --url): the same as Client's (relay.go), on the current HTTP session.
//
// The server's own requests to the host (sampling, elicitation, roots;
// upstream.go says why a legacy server asks only a client that declared
// them) work as on stdio: the host's capabilities are declared in the
// initialize of every new session (DeclareBeforeStart, DeclareCapabilities),
// a 404-expired session's successor included; mcp-go delivers the server's
// requests from the call's SSE stream and from the GET stream, which a
// session that declares them opens; each goes to OnServerRequest, and the
// answer (or error) goes back to the server in a POST of our own
// (answerServer), within ServerRequestTimeout. A request on a stream
// resumed with Last-Event-ID (resume.go) is not answered. A 2026-07-28
// server is not told, as on stdio.

// Capabilities are what the server of the current session declared; the
// zero value before the first handshake.
func (r *Remote) Capabilities() mcp.ServerCapabilities {
	r.mu.Lock()
	s := r.cur
	r.mu.Unlock()
	if s == nil {
		return mcp.ServerCapabilities{}
	}
	return s.mc.GetServerCapabilities()
}

// DeclareBeforeStart has every session's handshake, from the first on,
// declare the roots, sampling and elicitation in caps, in an initialize at
// version (a legacy version, a proxy's host's), as Client's does. It does
// nothing once a session has been started, nor for a 2026-07-28 version,
// nor when caps holds none of the three; it reports whether it will
// declare them.
func (r *Remote) DeclareBeforeStart(caps mcp.ClientCapabilities, version string) bool {
	caps, ok := declarable(caps)
	if !ok || version == "" || mcp.IsModernProtocol(version) {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.tried || r.closed {
		return false
	}
	r.declared = &declaration{caps: caps, version: version}
	return true
}

// DeclareCapabilities makes a legacy server see the roots, sampling and
// elicitation in caps, as Client's does: the current session is replaced
// by a new one whose initialize declares them (restarted), and so is
// every later one. That is done only while no tool call is running;
// otherwise it refuses and the session keeps running as it was. Other
// requests still running (Request, Tools) end with the old session. A
// 2026-07-28 server is not told.
func (r *Remote) DeclareCapabilities(ctx context.Context, caps mcp.ClientCapabilities) (restarted bool, err error) {
	caps, ok := declarable(caps)
	if !ok {
		return false, nil
	}
	// Held while deciding, so that no session starts meanwhile with the
	// declaration it read before this one.
	select {
	case r.startSem <- struct{}{}:
	case <-ctx.Done():
		return false, ctx.Err()
	}
	replace, err := r.declare(caps)
	<-r.startSem
	if !replace {
		return false, err
	}
	if _, err := r.session(ctx); err != nil {
		return true, err
	}
	return true, nil
}

// declare records caps for the next handshakes and retires the current
// session when it is to be replaced. The caller holds startSem.
func (r *Remote) declare(caps mcp.ClientCapabilities) (replace bool, _ error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.cur
	switch {
	case r.closed:
		return false, ErrClosed
	case s == nil:
		return false, fmt.Errorf("declare capabilities: no session with the server has been started")
	case mcp.IsModernProtocol(s.info.Protocol):
		return false, nil
	case r.declared != nil && reflect.DeepEqual(r.declared.caps, caps):
		return false, nil // declared already
	}
	decl := &declaration{caps: caps, version: s.info.Protocol}
	if !s.usable() {
		// The next session, started by the next call, declares them.
		r.declared = decl
		return false, nil
	}
	if r.calls > 0 {
		return false, fmt.Errorf("declare capabilities: calls to the server are still open; it keeps its session")
	}
	// A call that comes from here on (r.calls is counted under mu) finds
	// the session retired and starts the next one, which declares them.
	r.declared = decl
	s.dead.Store(true)
	return true, nil
}

// serverRequestHandler is mcp-go's handler for the server's requests on
// session s. mcp-go would send the answer itself, but within 30 s of the
// request and bound to the stream it came on; so only ping and refusals
// are answered that way, and the rest by answerServer.
func (r *Remote) serverRequestHandler(s *remoteSession) transport.RequestHandler {
	return func(_ context.Context, req transport.JSONRPCRequest) (*transport.JSONRPCResponse, error) {
		if req.Method == string(mcp.MethodPing) {
			return transport.NewJSONRPCResultResponse(req.ID, json.RawMessage(`{}`)), nil
		}
		if !serverRequests[req.Method] {
			r.opts.Logger.Debug("the MCP server asked something mcp-confirm does not answer", "session", s.n,
				"method", untrusted(req.Method))
			return transport.NewJSONRPCErrorResponse(req.ID, mcp.METHOD_NOT_FOUND, "mcp-confirm does not answer "+req.Method, nil), nil
		}
		go r.answerServer(s, req)
		return nil, nil // answered by answerServer
	}
}

// errHostClock ends a server request's wait for the host.
type errHostClock struct{ within time.Duration }

func (e errHostClock) Error() string {
	return fmt.Sprintf("the host did not answer within %s", e.within)
}

// answerServer asks OnServerRequest what the server asked on s, for at
// most ServerRequestTimeout, and posts the answer, or the error, to the
// server. Nothing is posted once s has ended: the server that asked no
// longer knows the session.
func (r *Remote) answerServer(s *remoteSession, req transport.JSONRPCRequest) {
	id, _ := json.Marshal(req.ID)
	var resp *transport.JSONRPCResponse
	params, err := json.Marshal(req.Params)
	if req.Params == nil {
		params, err = nil, nil
	}
	if err != nil {
		resp = transport.NewJSONRPCErrorResponse(req.ID, mcp.INVALID_PARAMS, "params: "+err.Error(), nil)
	} else {
		within := r.opts.ServerRequestTimeout
		ctx, cancel := context.WithTimeoutCause(s.ctx, within, errHostClock{within})
		res, rpcErr := r.opts.OnServerRequest(ctx, ServerRequest{Session: s.n, ID: string(id), Method: req.Method, Params: params})
		var clock errHostClock
		if rpcErr != nil && errors.As(context.Cause(ctx), &clock) {
			r.opts.Logger.Warn("the host did not answer the MCP server's request in time; the server is told so",
				"session", s.n, "method", req.Method, "within", within)
			rpcErr = &RPCError{Code: mcp.INTERNAL_ERROR, Message: "mcp-confirm: " + clock.Error() + " (" + req.Method + ")"}
		}
		cancel()
		switch {
		case rpcErr != nil:
			r.opts.Logger.Debug("the host answered the MCP server's request with an error", "session", s.n,
				"method", req.Method, "code", rpcErr.Code, "message", untrusted(rpcErr.Message))
			resp = transport.NewJSONRPCErrorResponse(req.ID, rpcErr.Code, rpcErr.Message, nil)
			if len(rpcErr.Data) > 0 {
				resp.Error.Data = rpcErr.Data
			}
		case len(res) == 0:
			resp = transport.NewJSONRPCResultResponse(req.ID, json.RawMessage(`{}`))
		default:
			resp = transport.NewJSONRPCResultResponse(req.ID, res)
		}
	}
	select {
	case <-s.ready:
	case <-s.ctx.Done():
	}
	if s.ctx.Err() != nil {
		r.opts.Logger.Debug("the MCP server's request is not answered: its session has ended", "session", s.n, "method", req.Method)
		return
	}
	if err := r.postAnswer(s, resp); err != nil {
		r.opts.Logger.Warn("the answer to the MCP server's request did not reach it", "session", s.n, "method", req.Method,
			"id", untrusted(string(id)), "err", err)
	}
}

// answerPostTimeout bounds the POST of one answer to the server.
const answerPostTimeout = 10 * time.Second

// postAnswer sends resp to the server on s, with the headers mcp-go's own
// requests on s carry.
func (r *Remote) postAnswer(s *remoteSession, resp *transport.JSONRPCResponse) error {
	body, err := json.Marshal(resp)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(s.ctx, answerPostTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.spec.URL, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if s.sid != "" {
		if s.tr.GetSessionId() != s.sid {
			return errors.New("the server no longer knows the session")
		}
		req.Header.Set(transport.HeaderKeySessionID, s.sid)
	}
	if s.info.Protocol != "" {
		req.Header.Set(transport.HeaderKeyProtocolVersion, s.info.Protocol)
	}
	for k, v := range r.spec.Headers {
		req.Header.Set(k, v)
	}
	if h := s.tr.GetOAuthHandler(); h != nil {
		auth, err := h.GetAuthorizationHeader(ctx)
		if err != nil {
			return fmt.Errorf("authorization: %w", err)
		}
		req.Header.Set("Authorization", auth)
	}
	res, err := r.httpc.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 64<<10))
	res.Body.Close()
	switch res.StatusCode {
	case http.StatusOK, http.StatusAccepted, http.StatusNoContent:
		return nil
	case http.StatusNotFound:
		if s.sid != "" {
			s.dead.Store(true)
		}
	}
	return fmt.Errorf("the server answered HTTP %d %s", res.StatusCode, http.StatusText(res.StatusCode))
}

// untrusted is text from the server or the host made safe for the log:
// controls and escapes shown, not obeyed, and at most 200 characters.
func untrusted(s string) string {
	const most = 200
	if len(s) > most {
		cut := most
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return termtext.Name(s)
}

// Request sends one request (not tools/call: use Call) on the current
// session, starting one if none is open, and returns the result as the
// server wrote it; a JSON-RPC error is an *RPCError. When ctx ends first
// the server is sent notifications/cancelled for it.
func (r *Remote) Request(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	if method == string(mcp.MethodToolsCall) {
		return nil, errors.New("tools/call goes through Call, never Request")
	}
	s, err := r.session(ctx)
	if err != nil {
		return nil, err
	}
	p, err := relayFields(params, s.connFields)
	if err != nil {
		return nil, err
	}
	id := fmt.Sprintf("mcp-confirm-relay-%d", relaySeq.Add(1))
	req := transport.JSONRPCRequest{
		JSONRPC: mcp.JSONRPC_VERSION,
		ID:      mcp.NewRequestId(id),
		Method:  method,
		Params:  p,
	}
	// 2026-07-28 over HTTP: Mcp-Method (and Mcp-Name) must name the
	// request in headers too, as mcp-go's own requests do.
	if encoded, err := json.Marshal(p); err == nil {
		if std := mcp.StandardHeaders(s.info.Protocol, mcp.MCPMethod(method), encoded); len(std) > 0 {
			req.Header = http.Header{}
			for k, v := range std {
				req.Header.Set(k, v)
			}
		}
	}
	if method == string(mcp.MethodToolsList) {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, r.opts.ListTimeout, errListClock)
		defer cancel()
	}
	tr := s.mc.GetTransport()
	resp, err := tr.SendRequest(ctx, req)
	if err != nil {
		if ctx.Err() != nil {
			r.sendCancel(s, id, ctx.Err())
		}
		if context.Cause(ctx) == errListClock {
			return nil, &ListTimeoutError{Within: r.opts.ListTimeout}
		}
		return nil, fmt.Errorf("%s (session %d): %w", method, s.n, err)
	}
	if resp.Error != nil {
		e := &RPCError{Code: resp.Error.Code, Message: resp.Error.Message}
		if resp.Error.Data != nil {
			e.Data, _ = json.Marshal(resp.Error.Data)
		}
		return nil, e
	}
	if len(resp.Result) == 0 {
		return json.RawMessage(`{}`), nil
	}
	return resp.Result, nil
}

// Notify sends one notification on the current session, if one is open;
// nothing is started for it.
func (r *Remote) Notify(ctx context.Context, method string, params json.RawMessage) error {
	s, err := r.live()
	if err != nil || s == nil {
		return err
	}
	p, err := relayFields(params, s.connFields)
	if err != nil {
		return err
	}
	var np mcp.NotificationParams
	if b, _ := json.Marshal(p); len(b) > 0 {
		if err := json.Unmarshal(b, &np); err != nil {
			return fmt.Errorf("%s: params: %w", method, err)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return s.mc.GetTransport().SendNotification(ctx, mcp.JSONRPCNotification{
		JSONRPC: mcp.JSONRPC_VERSION, Notification: mcp.Notification{Method: method, Params: np},
	})
}
