package mcpclient

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// A proxy's host may let servers ask it for things: an LLM completion
// (sampling), an answer from its user (elicitation), its workspace roots.
// A server asks only a client that declared it can answer, and on the
// legacy protocol that is fixed by the handshake, so the proxy declares its
// host's capabilities here (DeclareCapabilities) and answers the server's
// requests with its host's answers (Options.OnServerRequest). Nothing of
// this touches the journal: these requests change nothing on the server.

// ServerRequest is a request the server sent to this client.
type ServerRequest struct {
	Session int
	// ID is the request's id as JSON text, as the server's
	// notifications/cancelled for it names it.
	ID     string
	Method string
	// Params as mcp-go's transport decoded and re-encoded them: the same
	// members and values, in another order.
	Params json.RawMessage
}

// serverRequests are the requests passed to Options.OnServerRequest: those
// a client's declared capabilities allow (sampling, elicitation, roots).
var serverRequests = map[string]bool{
	string(mcp.MethodSamplingCreateMessage): true,
	string(mcp.MethodElicitationCreate):     true,
	string(mcp.MethodListRoots):             true,
}

// declaration is what the handshake of a new session declares beyond
// mcp-confirm's own (empty) capabilities.
type declaration struct {
	caps    mcp.ClientCapabilities
	version string // the legacy protocol version the last session spoke
}

// declarable keeps of caps what OnServerRequest can answer for: roots,
// sampling, elicitation; ok is false when it holds none of them.
func declarable(caps mcp.ClientCapabilities) (_ mcp.ClientCapabilities, ok bool) {
	caps = mcp.ClientCapabilities{Roots: caps.Roots, Sampling: caps.Sampling, Elicitation: caps.Elicitation}
	return caps, caps.Roots != nil || caps.Sampling != nil || caps.Elicitation != nil
}

// DeclareCapabilities makes the server see the roots, sampling and
// elicitation capabilities in caps (a proxy's host's), so that it offers
// what it offers such a client and may send those requests, which
// Options.OnServerRequest answers.
//
// Only a server on the legacy protocol is told: there the handshake fixes
// the capabilities, so the running session is replaced by one whose
// handshake declares them (it reports restarted). That is done only while
// no tool call is open or awaiting a late answer; otherwise it refuses, and
// the session keeps running as it was. Other requests still running
// (Request, Tools) end with the session: a proxy declares before its host
// has sent anything else. A 2026-07-28 server asks for such things
// inside a tool call's answer (input_required), which this client cannot
// supply, so it is not told: a call would fail where it now works.
func (c *Client) DeclareCapabilities(ctx context.Context, caps mcp.ClientCapabilities) (restarted bool, err error) {
	caps, ok := declarable(caps)
	if !ok {
		return false, nil
	}
	// Held while deciding, so that no session starts meanwhile with the
	// declaration it read before this one.
	select {
	case c.startSem <- struct{}{}:
	case <-ctx.Done():
		return false, ctx.Err()
	}
	s, stop, err := c.declare(caps)
	<-c.startSem
	if !stop {
		return false, err
	}
	s.requestStop()
	<-s.done
	if _, err := c.session(ctx); err != nil {
		return true, err
	}
	return true, nil
}

// declare records caps for the next handshakes and closes the running
// session's tap, if it is to be replaced (stop). The caller holds startSem.
func (c *Client) declare(caps mcp.ClientCapabilities) (_ *session, stop bool, _ error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.cur
	switch {
	case c.closed:
		return nil, false, ErrClosed
	case s == nil:
		return nil, false, fmt.Errorf("declare capabilities: the server has not been started")
	case mcp.IsModernProtocol(s.info.Protocol):
		return nil, false, nil
	case c.declared != nil && reflect.DeepEqual(c.declared.caps, caps):
		return nil, false, nil // declared already
	}
	decl := &declaration{caps: caps, version: s.info.Protocol}
	if !s.alive() {
		// The next session, started by the next call, declares them.
		c.declared = decl
		return nil, false, nil
	}
	if !s.tap.closeIfIdle() {
		return nil, false, fmt.Errorf("declare capabilities: calls to the server are still open; it keeps its session")
	}
	// From here a Call finds the tap closed, waits for the session to end
	// (lostError) and goes to the next one, which declares them.
	c.declared = decl
	return s, true, nil
}

// DeclareBeforeStart has the first session's handshake declare the roots,
// sampling and elicitation in caps, in an initialize at version: a legacy
// protocol version, a proxy's host's, whose server then sees the protocol
// and capabilities the host would show it. It does nothing once a session
// has been started, nor for a 2026-07-28 version (which has no
// initialize), nor when caps holds none of the three; it reports whether
// it will declare them.
func (c *Client) DeclareBeforeStart(caps mcp.ClientCapabilities, version string) bool {
	caps, ok := declarable(caps)
	if !ok || version == "" || mcp.IsModernProtocol(version) {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.tried || c.closed {
		return false
	}
	c.declared = &declaration{caps: caps, version: version}
	return true
}

// serverRequest answers the server's requests to this client, on a
// goroutine of mcp-go's transport per request; ctx ends with the session.
func (s *session) serverRequest(ctx context.Context, req transport.JSONRPCRequest) (*transport.JSONRPCResponse, error) {
	if req.Method == string(mcp.MethodPing) {
		return transport.NewJSONRPCResultResponse(req.ID, json.RawMessage(`{}`)), nil
	}
	if !serverRequests[req.Method] {
		return transport.NewJSONRPCErrorResponse(req.ID, mcp.METHOD_NOT_FOUND, "mcp-confirm does not answer "+req.Method, nil), nil
	}
	id, _ := json.Marshal(req.ID)
	var params json.RawMessage
	if req.Params != nil {
		var err error
		if params, err = json.Marshal(req.Params); err != nil {
			return transport.NewJSONRPCErrorResponse(req.ID, mcp.INVALID_PARAMS, "params: "+err.Error(), nil), nil
		}
	}
	res, rpcErr := s.opts.OnServerRequest(ctx, ServerRequest{Session: s.n, ID: string(id), Method: req.Method, Params: params})
	if rpcErr != nil {
		resp := transport.NewJSONRPCErrorResponse(req.ID, rpcErr.Code, rpcErr.Message, nil)
		if len(rpcErr.Data) > 0 {
			resp.Error.Data = rpcErr.Data
		}
		return resp, nil
	}
	if len(res) == 0 {
		res = json.RawMessage(`{}`)
	}
	return transport.NewJSONRPCResultResponse(req.ID, res), nil
}

// closeIfIdle ends the tap's taking of new calls, as failAll does, but only
// when no tool call is registered and no answer is awaited: then ending the
// session cuts no tool call short (the tap does not see other requests). A
// call that comes after is not sent on this session (Call sends it on the
// next).
func (t *tap) closeIfIdle() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.byToken) > 0 || len(t.byID) > 0 {
		return false
	}
	t.gone = true
	return true
}
