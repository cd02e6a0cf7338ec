package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// Relaying over HTTP, for the proxy in front of a remote server (proxy
// --url): the same as Client's (relay.go), on the current HTTP session.
//
// Not over HTTP yet: the server's own requests to the host (sampling,
// elicitation, roots), so the host's capabilities are not declared to a
// remote server (DeclareBeforeStart, DeclareCapabilities), and a server
// that would ask for them sees a client that cannot answer.

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

// DeclareBeforeStart declares nothing over HTTP (see above): false.
func (r *Remote) DeclareBeforeStart(mcp.ClientCapabilities, string) bool { return false }

// DeclareCapabilities declares nothing over HTTP (see above).
func (r *Remote) DeclareCapabilities(context.Context, mcp.ClientCapabilities) (restarted bool, err error) {
	return false, nil
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
