package proxy

import (
	"context"
	"encoding/json"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-confirm/mcp-confirm/guard"
	"github.com/mcp-confirm/mcp-confirm/mcpclient"
)

// downstream is the server behind the proxy: a process over stdio
// (*mcpclient.Client) or a URL over Streamable HTTP (*mcpclient.Remote).
type downstream interface {
	guard.Server // ServerInfo, Session, Tools, Call
	Start(ctx context.Context) error
	Close() error
	State() mcpclient.SessionState
	Stderr() []string
	Capabilities() mcp.ServerCapabilities
	Request(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error)
	Notify(ctx context.Context, method string, params json.RawMessage) error
	DeclareBeforeStart(caps mcp.ClientCapabilities, version string) bool
	DeclareCapabilities(ctx context.Context, caps mcp.ClientCapabilities) (restarted bool, err error)
}

var (
	_ downstream = (*mcpclient.Client)(nil)
	_ downstream = (*mcpclient.Remote)(nil)
)

// unusable is a downstream that could not be made (a URL mcpclient
// refuses): every use says why, so the host's first request is answered
// with it.
type unusable struct{ err error }

func (u unusable) ServerInfo() mcpclient.ServerInfo                       { return mcpclient.ServerInfo{} }
func (u unusable) Session() int                                           { return 0 }
func (u unusable) Tools(context.Context) ([]mcp.Tool, error)              { return nil, u.err }
func (u unusable) Start(context.Context) error                            { return u.err }
func (u unusable) Close() error                                           { return nil }
func (u unusable) State() mcpclient.SessionState                          { return mcpclient.StateExited }
func (u unusable) Stderr() []string                                       { return nil }
func (u unusable) Capabilities() mcp.ServerCapabilities                   { return mcp.ServerCapabilities{} }
func (u unusable) DeclareBeforeStart(mcp.ClientCapabilities, string) bool { return false }
func (u unusable) Call(context.Context, string, map[string]any, mcpclient.CallOptions) mcpclient.Delivery {
	return mcpclient.Delivery{Kind: mcpclient.DeliveryNotSent, Err: u.err}
}
func (u unusable) Request(context.Context, string, json.RawMessage) (json.RawMessage, error) {
	return nil, u.err
}
func (u unusable) Notify(context.Context, string, json.RawMessage) error { return u.err }
func (u unusable) DeclareCapabilities(context.Context, mcp.ClientCapabilities) (bool, error) {
	return false, nil
}
