package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"
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

// upRequest is a request of the server's waiting for the host's answer.
// written and ended are guarded by Proxy.upMu.
type upRequest struct {
	session  int
	serverID string // the server's id for it (JSON text)
	answer   chan hostAnswer
	written  bool // the host has been asked
	ended    bool // cancelled by the server: the host is not to be asked
}

type hostAnswer struct {
	result json.RawMessage
	err    *mcpclient.RPCError
}

// upIDPrefix starts the ids of the proxy's own requests to the host.
const upIDPrefix = `"mcp-confirm-up-`

// hostWantedGrace is how long the tool listing may still take once the
// server has asked the host something (listToolsBeforeAnswering).
const hostWantedGrace = time.Second

// capabilityOf names the host capability each server request needs.
func capabilityOf(caps *mcp.ClientCapabilities, method string) bool {
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
		p.hostInit.Store(true)
		p.hostCaps.Store(&m.Params.Capabilities)
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
// for it. mcpclient restarts the server to do so, which is safe only
// because no call is open yet (the first initialize only).
func (p *Proxy) declareHost(ctx context.Context, params json.RawMessage) {
	var ip struct {
		Capabilities mcp.ClientCapabilities `json:"capabilities"`
	}
	if json.Unmarshal(params, &ip) != nil {
		return
	}
	if !p.hostInit.CompareAndSwap(false, true) {
		return // a second initialize: the server was told at the first
	}
	p.hostCaps.Store(&ip.Capabilities)
	p.declaring.Store(true)
	restarted, err := p.client.DeclareCapabilities(ctx, ip.Capabilities)
	p.declaring.Store(false)
	if err != nil {
		p.log.Warn("the MCP server could not be shown the host's capabilities", "err", err)
	}
	if !restarted {
		return
	}
	p.log.Info("restarted the MCP server to declare the host's capabilities", "session", p.client.Session())
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
	p.background(func(ctx context.Context) { listed <- p.refreshTools(ctx) })
	wanted := p.hostWanted
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
// the server the host's answer as the host wrote it. It runs on a goroutine
// of its own; ctx ends with the server's session.
func (p *Proxy) serverRequest(ctx context.Context, r mcpclient.ServerRequest) (json.RawMessage, *mcpclient.RPCError) {
	if !capabilityOf(p.hostCaps.Load(), r.Method) {
		return nil, &mcpclient.RPCError{Code: mcp.METHOD_NOT_FOUND, Message: "the host behind mcp-confirm did not declare it answers " + r.Method}
	}
	stop := p.bgCtx.Done()
	id := strconv.AppendQuote(nil, upIDPrefix[1:]+strconv.FormatUint(p.upSeq.Add(1), 10))
	req := &upRequest{session: r.Session, serverID: r.ID, answer: make(chan hostAnswer, 1)}
	p.upMu.Lock()
	if p.cancelledEarly(r.Session, r.ID) {
		p.upMu.Unlock()
		return nil, &mcpclient.RPCError{Code: mcp.INTERNAL_ERROR, Message: "cancelled by the MCP server"}
	}
	p.upWait[string(id)] = req
	p.upMu.Unlock()
	defer func() {
		p.upMu.Lock()
		delete(p.upWait, string(id))
		p.upMu.Unlock()
	}()
	// A server may ask as soon as its own handshake is done, which comes
	// before the host's (declareHost). Registered already, so that the
	// server's cancel meanwhile is not lost.
	if !p.hostReady() {
		p.hostWantedOnce.Do(func() { close(p.hostWanted) })
	}
	select {
	case <-p.upReadyCh:
	case a := <-req.answer:
		return a.result, a.err // cancelled before the host was asked
	case <-ctx.Done():
		return nil, sessionEnded()
	case <-stop:
		return nil, sessionEnded()
	}
	// Written under upMu, so that a cancel for it cannot go up before it.
	p.upMu.Lock()
	if !req.ended {
		p.write(upRequestLine{JSONRPC: mcp.JSONRPC_VERSION, ID: id, Method: r.Method, Params: r.Params})
		req.written = true
	}
	p.upMu.Unlock()
	select {
	case a := <-req.answer:
		return a.result, a.err
	case <-ctx.Done():
		// The server is gone: the host need not go on.
		p.upMu.Lock()
		if req.written && !req.ended {
			req.ended = true
			p.cancelUp(id, "the MCP server's session ended")
		}
		p.upMu.Unlock()
		return nil, sessionEnded()
	case <-stop:
		return nil, sessionEnded()
	}
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

// hostAnswered takes the host's answer to a request of the server's; false
// when id names none of the proxy's requests (an answer to mcp-go's server,
// which it then gets). A late answer, to a request the server has since
// cancelled or whose session ended, is dropped: mcp-go would answer it as
// if it were a request.
func (p *Proxy) hostAnswered(id json.RawMessage, line []byte) bool {
	id = bytes.TrimSpace(id)
	p.upMu.Lock()
	req := p.upWait[string(id)]
	p.upMu.Unlock()
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
func (p *Proxy) serverCancelled(session int, params json.RawMessage) {
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
	p.upMu.Lock()
	defer p.upMu.Unlock()
	for id, req := range p.upWait {
		if req.session != session || req.serverID != serverID || req.ended {
			continue
		}
		req.ended = true
		if req.written {
			p.cancelUp(json.RawMessage(id), c.Reason)
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
	// serverRequest to find.
	p.upEarly[p.upEarlyNext%len(p.upEarly)] = earlyCancel{session: session, serverID: serverID}
	p.upEarlyNext++
}

// earlyCancel is a server's cancel that named no request being asked.
type earlyCancel struct {
	session  int
	serverID string
}

// cancelledEarly: the server cancelled this request before it was
// registered. The caller holds upMu.
func (p *Proxy) cancelledEarly(session int, serverID string) bool {
	for i, c := range p.upEarly {
		if c.session == session && c.serverID == serverID {
			p.upEarly[i] = earlyCancel{}
			return true
		}
	}
	return false
}

func (p *Proxy) cancelUp(id json.RawMessage, reason string) {
	params, err := json.Marshal(map[string]any{"requestId": id, "reason": reason})
	if err != nil {
		return
	}
	p.write(notification{JSONRPC: mcp.JSONRPC_VERSION, Method: string(mcp.MethodNotificationCancelled), Params: params})
}

// markUpReady: the host finished its handshake; notifications and the
// server's requests may go up.
func (p *Proxy) markUpReady() {
	p.upReadyOnce.Do(func() { close(p.upReadyCh) })
}

func (p *Proxy) hostReady() bool {
	select {
	case <-p.upReadyCh:
		return true
	default:
		return false
	}
}
