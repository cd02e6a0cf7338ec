package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-confirm/mcp-confirm/mcpclient"
)

// What passes through: requests and notifications relayed to the
// downstream server as they are, and the server's notifications up to the
// host.

func (p *Proxy) notifyDown(ctx context.Context, method string, params json.RawMessage) {
	if err := p.client.Notify(ctx, method, params); err != nil {
		p.log.Warn("forward notification to the MCP server", "method", method, "err", err)
	}
}

// relay sends one request to the downstream server and writes its answer,
// with the host's own id, as the server wrote it.
func (p *Proxy) relay(ctx context.Context, m message) {
	res, err := p.client.Request(ctx, m.Method, m.Params)
	if err != nil && ctx.Err() != nil {
		// Cancelled by the host (or the proxy is stopping): no answer.
		return
	}
	var rpcErr *mcpclient.RPCError
	switch {
	case err == nil:
		if modernRequest(m.Params) {
			res = withResultType(res)
		}
		p.writeResult(m.ID, res)
	case errors.As(err, &rpcErr):
		p.write(response{JSONRPC: mcp.JSONRPC_VERSION, ID: m.ID, Error: rpcErr})
	default:
		p.log.Warn("relay to the MCP server failed", "method", m.Method, "err", err)
		p.write(response{JSONRPC: mcp.JSONRPC_VERSION, ID: m.ID, Error: &mcpclient.RPCError{
			Code: mcp.INTERNAL_ERROR, Message: "mcp-confirm proxy: the MCP server gave no answer: " + err.Error(),
		}})
	}
}

// modernRequest: the host speaks 2026-07-28 or later on this request (it
// names its protocol version in _meta, which legacy hosts never do).
func modernRequest(params json.RawMessage) bool {
	if !bytes.Contains(params, []byte(mcp.MetaKeyProtocolVersion)) {
		return false
	}
	var pm struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	if json.Unmarshal(params, &pm) != nil {
		return false
	}
	var v string
	_ = json.Unmarshal(pm.Meta[mcp.MetaKeyProtocolVersion], &v)
	return mcp.IsModernProtocol(v)
}

// withResultType adds resultType "complete" to a legacy server's result for
// a 2026-07-28 host (legacy servers never set it). The member is spliced in
// before the closing brace, so the rest stays byte for byte as the server
// wrote it.
func withResultType(res json.RawMessage) json.RawMessage {
	hasName, escaped := bytes.Contains(res, []byte(`"resultType"`)), bytes.Contains(res, []byte(`\u`))
	if hasName && !escaped {
		return res // a modern server's (or a nested field of that name: left alone)
	}
	if escaped {
		// A name could be spelled with escapes: decode to know.
		var obj map[string]json.RawMessage
		if json.Unmarshal(res, &obj) != nil {
			return res
		}
		if _, ok := obj["resultType"]; ok {
			return res
		}
	}
	// res is one JSON value: validated on the way in, or made by the proxy.
	t := bytes.TrimSpace(res)
	if len(t) < 2 || t[0] != '{' || t[len(t)-1] != '}' {
		return res
	}
	member := `"resultType":"complete"`
	if len(bytes.TrimSpace(t[1:len(t)-1])) > 0 {
		member = "," + member
	}
	b := make([]byte, 0, len(t)+len(member))
	b = append(b, t[:len(t)-1]...)
	b = append(b, member...)
	return append(b, '}')
}

// fromDownstream receives the server's notifications on the session's read
// loop: it must not block for long. A tools/list_changed re-registers the
// tools (mcp-go then tells the host); a cancel of the server's own request
// goes up under the proxy's id for it, or not at all (serverCancelled);
// everything else goes up as it is.
func (p *Proxy) fromDownstream(session int, method string, params json.RawMessage) {
	if method == string(mcp.MethodNotificationCancelled) {
		p.host.serverCancelled(session, params)
		return
	}
	if method == string(mcp.MethodNotificationToolsListChanged) {
		p.bg.Go(func(ctx context.Context) {
			if err := p.refreshTools(ctx); err != nil {
				p.log.Warn("list tools after tools/list_changed", "err", err)
			}
		})
		return
	}
	if !p.host.isReady() {
		p.log.Debug("notification from the MCP server before the host was ready: dropped", "method", method)
		return
	}
	p.write(notification{JSONRPC: mcp.JSONRPC_VERSION, Method: method, Params: params})
}

type notification struct {
	JSONRPC string          `json:"jsonrpc"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params,omitempty"`
}
