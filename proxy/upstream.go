package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"

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
type upRequest struct {
	session  int
	serverID string // the server's id for it (JSON text)
	answer   chan hostAnswer
}

type hostAnswer struct {
	result json.RawMessage
	err    *mcpclient.RPCError
}

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

// declareHost shows the server the host's roots, sampling and elicitation
// capabilities, as if the host had started it itself: a legacy server
// offers some tools only to such a host (server-everything), and asks it
// for its roots (server-filesystem then serves the host's folders). It runs
// before mcp-go answers the host's initialize, so that the host's first
// tools/list lists the server's tools for it. mcpclient restarts the
// server to do so, which is safe only because no call is open yet.
func (p *Proxy) declareHost(ctx context.Context, params json.RawMessage) {
	var ip struct {
		Capabilities mcp.ClientCapabilities `json:"capabilities"`
	}
	if json.Unmarshal(params, &ip) != nil {
		return
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
	if err := p.refreshTools(ctx); err != nil {
		p.log.Warn("list tools after declaring the host's capabilities", "err", err)
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
	// A server may ask as soon as its own handshake is done, which comes
	// before the host's (declareHost).
	select {
	case <-p.upReadyCh:
	case <-ctx.Done():
		return nil, sessionEnded()
	case <-stop:
		return nil, sessionEnded()
	}
	id := strconv.AppendQuote(nil, "mcp-confirm-up-"+strconv.FormatUint(p.upSeq.Add(1), 10))
	req := &upRequest{session: r.Session, serverID: r.ID, answer: make(chan hostAnswer, 1)}
	p.upMu.Lock()
	p.upWait[string(id)] = req
	p.upMu.Unlock()
	defer func() {
		p.upMu.Lock()
		delete(p.upWait, string(id))
		p.upMu.Unlock()
	}()
	p.write(upRequestLine{JSONRPC: mcp.JSONRPC_VERSION, ID: id, Method: r.Method, Params: r.Params})
	select {
	case a := <-req.answer:
		return a.result, a.err
	case <-ctx.Done():
		// The server is gone: the host need not go on.
		p.cancelUp(id, "the MCP server's session ended")
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
// when id names none (an answer to mcp-go's server, which it then gets).
func (p *Proxy) hostAnswered(id json.RawMessage, line []byte) bool {
	p.upMu.Lock()
	req := p.upWait[string(bytes.TrimSpace(id))]
	p.upMu.Unlock()
	if req == nil {
		return false
	}
	var a struct {
		Result json.RawMessage     `json:"result"`
		Error  *mcpclient.RPCError `json:"error"`
	}
	if json.Unmarshal(line, &a) != nil || (a.Error == nil && len(a.Result) == 0) {
		a.Error = &mcpclient.RPCError{Code: mcp.INTERNAL_ERROR, Message: "mcp-confirm proxy: the host's answer was neither a result nor an error"}
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
		RequestID json.RawMessage `json:"requestId"`
		Reason    string          `json:"reason"`
	}
	if json.Unmarshal(params, &c) != nil {
		return
	}
	serverID := string(bytes.TrimSpace(c.RequestID))
	p.upMu.Lock()
	var id string
	var req *upRequest
	for k, r := range p.upWait {
		if r.session == session && r.serverID == serverID {
			id, req = k, r
		}
	}
	p.upMu.Unlock()
	if req == nil {
		return
	}
	p.cancelUp(json.RawMessage(id), c.Reason)
	select {
	case req.answer <- hostAnswer{err: &mcpclient.RPCError{Code: mcp.INTERNAL_ERROR, Message: "cancelled by the MCP server"}}:
	default:
	}
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
	p.upReady.Store(true)
	p.upReadyOnce.Do(func() { close(p.upReadyCh) })
}
