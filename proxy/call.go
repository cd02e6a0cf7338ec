package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-confirm/mcp-confirm/guard"
	"github.com/mcp-confirm/mcp-confirm/mcpclient"
	"github.com/mcp-confirm/mcp-confirm/pending"
)

// StatusField is the structuredContent field of the proxy's own answers
// (SPEC §5a): "unknown" or "held".
const StatusField = "mcp-confirm"

// callTool is every tool's handler: the host's tools/call, through the
// guard. The host's progress token gets the server's progress; the host's
// cancel (mcp-go cancels ctx) ends the call, which is then journaled
// unknown unless an answer came.
func (p *Proxy) callTool(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	args, err := arguments(req)
	if err != nil {
		return toolError(fmt.Sprintf("mcp-confirm: %v; nothing was sent.", err)), nil
	}
	key, _ := req.Params.Meta.GetMetaField(mcpclient.KeyMetaField).(string)
	var onProgress func(mcpclient.Progress)
	if req.Params.Meta != nil && req.Params.Meta.ProgressToken != nil {
		token := req.Params.Meta.ProgressToken
		onProgress = func(pr mcpclient.Progress) { p.progressUp(token, pr) }
	}
	res, err := p.guard.Call(ctx, guard.Request{Tool: req.Params.Name, Args: args, Key: key, OnProgress: onProgress})
	return p.answer(req.Params.Name, res, err)
}

// arguments are the host's arguments as written: numbers stay json.Number,
// so the fingerprint of a resend equals the first one's.
func arguments(req mcp.CallToolRequest) (map[string]any, error) {
	raw := req.Params.RawArguments
	if isNull(raw) {
		if req.Params.Arguments == nil {
			return map[string]any{}, nil
		}
		b, err := json.Marshal(req.Params.Arguments)
		if err != nil {
			return nil, fmt.Errorf("arguments: %v", err)
		}
		raw = b
	}
	return guard.DecodeObject(raw)
}

// progressUp sends the server's progress to the host under the host's own
// token. Written directly, before the call returns, so it always precedes
// the answer.
func (p *Proxy) progressUp(token mcp.ProgressToken, pr mcpclient.Progress) {
	params := map[string]any{"progressToken": token, "progress": pr.Progress}
	if pr.Total > 0 {
		params["total"] = pr.Total
	}
	if pr.Message != "" {
		params["message"] = pr.Message
	}
	b, err := json.Marshal(params)
	if err != nil {
		return
	}
	p.write(notification{JSONRPC: mcp.JSONRPC_VERSION, Method: string(mcp.MethodNotificationProgress), Params: b})
}

// answer turns what the guard came to into the host's tools/call result.
func (p *Proxy) answer(tool string, res guard.Result, err error) (*mcp.CallToolResult, error) {
	if err != nil {
		return p.refusal(tool, res, err), nil
	}
	if res.Call.ID != 0 {
		p.log.Info("call", "id", res.Call.ID, "tool", tool, "state", res.State, "reason", res.Call.Reason, "key", res.Key)
	}
	switch res.State {
	case pending.StateUnknown, pending.StateInFlight:
		if res.Call.Reason == guard.ReasonConnectionLost {
			p.log.Warn("the MCP server went away during a call; answered unknown, and it restarts on the next call",
				"call", res.Call.ID, "tool", tool)
		}
		return Unknown(res.Call.ID, res.Key, res.Call.Reason), nil
	}
	if len(res.Result) > 0 {
		raw := res.Result
		r, perr := mcp.ParseCallToolResult(&raw)
		if perr == nil {
			r.ResultType = "" // mcp-go sets it for hosts that speak 2026-07-28
			return r, nil
		}
		p.log.Warn("the MCP server's result could not be re-encoded; passed as text", "tool", tool, "err", perr)
		return &mcp.CallToolResult{Content: []mcp.Content{mcp.NewTextContent(string(res.Result))}, IsError: res.State == pending.StateFailed}, nil
	}
	if len(res.Error) > 0 {
		var e mcpclient.RPCError
		_ = json.Unmarshal(res.Error, &e)
		// mcp-go answers a handler's error as -32603 with this message; the
		// server's own code is in the text.
		return nil, fmt.Errorf("the MCP server answered with error %d: %s", e.Code, e.Message)
	}
	return toolError("mcp-confirm: the MCP server gave no answer."), nil
}

// refusal answers a call the guard did not send.
func (p *Proxy) refusal(tool string, res guard.Result, err error) *mcp.CallToolResult {
	var held *guard.HeldError
	var pendingKey *guard.KeyPendingError
	switch {
	case errors.As(err, &held):
		p.log.Info("held: an identical call is still open; nothing sent", "call", held.CallID, "tool", tool, "state", held.State)
		return Held(held.CallID, held.State)
	case errors.As(err, &pendingKey):
		p.log.Info("held: the key names a call still open; nothing sent", "call", pendingKey.CallID, "tool", tool)
		return Held(pendingKey.CallID, pendingKey.State)
	case errors.Is(err, guard.ErrUnavailable):
		p.log.Warn("call not sent: the MCP server or the journal is unavailable", "tool", tool, "err", err)
		return toolError(fmt.Sprintf("mcp-confirm: %s could not be sent, so it did not take effect: %v. It is safe to try again later.", tool, err))
	}
	p.log.Info("call refused", "tool", tool, "err", err)
	return toolError(fmt.Sprintf("mcp-confirm: %v. Nothing was sent.", err))
}

func toolError(text string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{mcp.NewTextContent(text)}, IsError: true}
}

// Unknown is the answer to a write whose outcome is unknown (SPEC §5a).
func Unknown(callID int64, key, reason string) *mcp.CallToolResult {
	why := "the server did not answer in time"
	switch reason {
	case guard.ReasonConnectionLost:
		why = "the connection to the server was lost"
	case guard.ReasonCancelled:
		why = "the call was cancelled after it was sent"
	case guard.ReasonInProgress:
		why = "the server reports it is still working on it"
	case "":
	default:
		why += " (" + reason + ")"
	}
	text := fmt.Sprintf("The outcome of this call is UNKNOWN: %s, and it may already have taken effect. "+
		"Do NOT retry it or send it again, not even with other wording: that could do it twice. "+
		"It has been recorded as call %d (idempotency key %s), and an operator will review it in mcp-confirm "+
		"and decide whether it took effect. Tell the user it is pending review.", why, callID, key)
	return &mcp.CallToolResult{
		Content:           []mcp.Content{mcp.NewTextContent(text)},
		StructuredContent: map[string]any{StatusField: "unknown", "call_id": callID, "key": key},
		IsError:           true,
	}
}

// Held is the answer to a resend of a call that is still in flight or
// unknown: nothing was sent (SPEC §5a).
func Held(callID int64, state pending.State) *mcp.CallToolResult {
	text := fmt.Sprintf("NOT SENT: an identical call (call %d) is already %s, so this one was held back "+
		"to avoid doing it twice. Do NOT retry it: an operator will review call %d in mcp-confirm. "+
		"If this is deliberately a second, separate operation, tell the user; they can send it from mcp-confirm.",
		callID, stateWords(state), callID)
	return &mcp.CallToolResult{
		Content:           []mcp.Content{mcp.NewTextContent(text)},
		StructuredContent: map[string]any{StatusField: "held", "call_id": callID},
		IsError:           true,
	}
}

func stateWords(s pending.State) string {
	switch s {
	case pending.StateInFlight:
		return "in flight"
	case pending.StateUnknown:
		return "waiting for review (its outcome is unknown)"
	}
	return string(s)
}
