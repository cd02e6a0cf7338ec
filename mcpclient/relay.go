package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// Relaying is for the proxy: requests and notifications other than
// tools/call pass between an upstream host and this server as they are.
// They are never journaled and never retried here.

// Per-request _meta fields that belong to one connection (2026-07-28): the
// upstream's values say nothing about this session, so they are replaced.
var connectionMeta = []string{
	mcp.MetaKeyProtocolVersion, mcp.MetaKeyClientCapabilities, mcp.MetaKeyClientInfo,
}

var relaySeq atomic.Uint64

// Capabilities are what the server of the current session declared; the
// zero value before the first handshake.
func (c *Client) Capabilities() mcp.ServerCapabilities {
	c.mu.Lock()
	s := c.cur
	c.mu.Unlock()
	if s == nil {
		return mcp.ServerCapabilities{}
	}
	return s.mc.GetServerCapabilities()
}

// Request sends one request (not tools/call: use Call) with params as given,
// except for the connection's own _meta fields, and returns the result as
// the server wrote it. It starts a session if none is running. A JSON-RPC
// error from the server is an *RPCError. When ctx ends first the server is
// sent notifications/cancelled for the request.
func (c *Client) Request(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	if method == string(mcp.MethodToolsCall) {
		return nil, errors.New("tools/call goes through Call, never Request")
	}
	s, err := c.session(ctx)
	if err != nil {
		return nil, err
	}
	p, err := s.relayParams(params)
	if err != nil {
		return nil, err
	}
	req := transport.JSONRPCRequest{
		JSONRPC: mcp.JSONRPC_VERSION,
		ID:      mcp.NewRequestId(fmt.Sprintf("mcp-confirm-relay-%d", relaySeq.Add(1))),
		Method:  method,
		Params:  p,
	}
	tr := s.mc.GetTransport()
	if method == string(mcp.MethodToolsList) {
		// Listing is something we ask for ourselves: bounded (Tools).
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, c.opts.ListTimeout, errListClock)
		defer cancel()
	}
	resp, err := tr.SendRequest(ctx, req)
	if err != nil {
		if ctx.Err() != nil {
			go func() {
				cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				_ = tr.SendNotification(cctx, mcp.JSONRPCNotification{
					JSONRPC: mcp.JSONRPC_VERSION,
					Notification: mcp.Notification{Method: string(mcp.MethodNotificationCancelled),
						Params: mcp.NotificationParams{AdditionalFields: map[string]any{"requestId": req.ID, "reason": ctx.Err().Error()}}},
				})
			}()
		}
		if context.Cause(ctx) == errListClock {
			return nil, &ListTimeoutError{Within: c.opts.ListTimeout}
		}
		if !s.alive() {
			return nil, fmt.Errorf("%s: %w", method, s.lostError())
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

// Notify sends one notification to the server of the current session, if
// one is running; nothing is started for it.
func (c *Client) Notify(ctx context.Context, method string, params json.RawMessage) error {
	s, err := c.live()
	if err != nil || s == nil {
		return err
	}
	p, err := s.relayParams(params)
	if err != nil {
		return err
	}
	var np mcp.NotificationParams
	if b, _ := json.Marshal(p); len(b) > 0 {
		if err := json.Unmarshal(b, &np); err != nil {
			return fmt.Errorf("%s: params: %w", method, err)
		}
	}
	return s.mc.GetTransport().SendNotification(ctx, mcp.JSONRPCNotification{
		JSONRPC: mcp.JSONRPC_VERSION, Notification: mcp.Notification{Method: method, Params: np},
	})
}

// relayParams replaces the connection's _meta fields with this session's
// (2026-07-28) or drops them (legacy, where the handshake fixed them).
func (s *session) relayParams(params json.RawMessage) (map[string]json.RawMessage, error) {
	return relayFields(params, s.connFields)
}

// relayFields is params with its _meta members of the connection replaced
// by conn's (none on a legacy connection).
func relayFields(params json.RawMessage, conn map[string]json.RawMessage) (map[string]json.RawMessage, error) {
	fields := map[string]json.RawMessage{}
	if len(params) > 0 && string(params) != "null" {
		if err := json.Unmarshal(params, &fields); err != nil {
			return nil, fmt.Errorf("params must be a JSON object: %w", err)
		}
	}
	meta := map[string]json.RawMessage{}
	if raw, ok := fields["_meta"]; ok {
		_ = json.Unmarshal(raw, &meta)
	}
	for _, k := range connectionMeta {
		delete(meta, k)
	}
	for k, v := range conn {
		meta[k] = v
	}
	if len(meta) > 0 {
		fields["_meta"], _ = json.Marshal(meta)
	} else {
		delete(fields, "_meta")
	}
	return fields, nil
}

// relayNotification hands the server's notifications to OnNotification,
// except progress for this client's own calls (Call reports that).
func (s *session) relayNotification(tokenPrefix string) func(mcp.JSONRPCNotification) {
	return func(n mcp.JSONRPCNotification) {
		if n.Method == string(mcp.MethodNotificationProgress) {
			if tok, ok := n.Params.AdditionalFields["progressToken"].(string); ok && strings.HasPrefix(tok, tokenPrefix) {
				return
			}
		}
		params, err := json.Marshal(n.Params)
		if err != nil {
			return
		}
		s.opts.OnNotification(s.n, n.Method, params)
	}
}
