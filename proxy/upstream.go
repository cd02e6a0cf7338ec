package proxy

import (
	"context"
	"encoding/json"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-confirm/mcp-confirm/mcpclient"
)

// A server may ask its client for an LLM completion (sampling), for an
// answer from the user (elicitation), or for the workspace roots, if the
// client declared it can answer. Behind the proxy the host is that client:
// the proxy declares the host's capabilities to the server and passes the
// server's requests up to the host, under ids of its own, and the host's
// answers back down. None of this is journaled: these requests change
// nothing on the server. The tool call that caused one is still journaled,
// and its clock keeps running while the host answers.

// hostWantedGrace is how long the tool listing may still take once the
// server has asked the host something (listToolsBeforeAnswering).
const hostWantedGrace = time.Second

// declareFirst declares the host's capabilities for the server's first
// handshake, when the host's first line is its initialize (the usual
// case): the server then starts once, as if the host had started it.
func (p *Proxy) declareFirst(first []byte) {
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			ProtocolVersion string                 `json:"protocolVersion"`
			Capabilities    mcp.ClientCapabilities `json:"capabilities"`
		} `json:"params"`
	}
	if json.Unmarshal(first, &m) != nil || m.Method != string(mcp.MethodInitialize) || len(m.ID) == 0 {
		return
	}
	if p.client.DeclareBeforeStart(m.Params.Capabilities, m.Params.ProtocolVersion) {
		p.host.declare(&m.Params.Capabilities) // the first line: always kept
	}
	// Otherwise declareHost does what can be done, once the server runs.
}

// declareHost shows the server the host's roots, sampling and elicitation
// capabilities when its initialize was not its first line (a host that
// tried server/discover first, say), as if the host had started the server
// itself: a legacy server offers some tools only to such a host
// (server-everything), and asks it for its roots (server-filesystem then
// serves the host's folders). It runs before mcp-go answers the host's
// initialize, so that the host's first tools/list lists the server's tools
// for it. mcpclient restarts the server (a remote one: starts a new
// session) to do so, which is safe only because no call is open yet (the
// first initialize only).
func (p *Proxy) declareHost(ctx context.Context, params json.RawMessage) {
	var ip struct {
		Capabilities mcp.ClientCapabilities `json:"capabilities"`
		ClientInfo   struct {
			Name string `json:"name"`
		} `json:"clientInfo"`
	}
	if json.Unmarshal(params, &ip) != nil {
		return
	}
	// A host whose first line was not its initialize names itself here,
	// before any call (a no-op when it already did).
	p.fitHost(ip.ClientInfo.Name)
	if !p.host.declare(&ip.Capabilities) {
		return // a second initialize: the server was told at the first
	}
	p.host.declaring.Store(true)
	restarted, err := p.client.DeclareCapabilities(ctx, ip.Capabilities)
	p.host.declaring.Store(false)
	if err != nil {
		p.log.Warn("the MCP server could not be shown the host's capabilities", "err", err)
	}
	if !restarted {
		return
	}
	p.log.Info(p.newSessionSaid()+" to declare the host's capabilities", "session", p.client.Session())
	if err := p.listToolsBeforeAnswering(ctx); err != nil {
		p.log.Warn("list tools after declaring the host's capabilities", "err", err)
	}
}

// listToolsBeforeAnswering registers the server's tools before the host's first
// line is answered. A server may ask the host something while it lists them
// (its roots, say), which the host can answer only once that line is
// answered: so when the server asks the host anything before then, the
// wait ends after hostWantedGrace, the listing goes on in the background,
// and the host hears of the tools with tools/list_changed; nil is returned.
func (p *Proxy) listToolsBeforeAnswering(ctx context.Context) error {
	listed := make(chan error, 1)
	p.bg.Go(func(ctx context.Context) { listed <- p.refreshTools(ctx) })
	wanted := p.host.wanted
	var grace <-chan time.Time // nil until the server wants the host
	for {
		select {
		case err := <-listed:
			return err
		case <-wanted:
			wanted, grace = nil, time.After(hostWantedGrace)
		case <-grace:
			p.log.Info("the MCP server is still listing its tools and waits for the host; the host hears of them when it is done")
			go func() {
				if err := <-listed; err != nil {
					p.log.Warn("list the MCP server's tools", "err", err)
				}
			}()
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// serverRequest asks the host what the server asked the proxy, and gives
// the server the host's answer as the host wrote it (hostLink.request). It
// runs on a goroutine of its own; ctx ends with the server's session.
func (p *Proxy) serverRequest(ctx context.Context, r mcpclient.ServerRequest) (json.RawMessage, *mcpclient.RPCError) {
	return p.host.request(ctx, p.bg.ctx, r)
}
