package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-confirm/mcp-confirm/guard"
	"github.com/mcp-confirm/mcp-confirm/mcpclient"
	"github.com/mcp-confirm/mcp-confirm/pending"
)

// StatusField is the structuredContent field of the proxy's own answers
// (SPEC §5a): "unknown" or "held".
const StatusField = "mcp-confirm"

// toolCallParams are what the proxy reads of a tools/call's params. The
// _meta members it needs are named fields, not a map, so the others (a
// 2026-07-28 host's client info and capabilities, on every call) are
// skipped, not copied. Values are kept raw: a member of the wrong type is
// then ignored rather than failing the whole decode. The names are checked
// against mcpclient's and mcp-go's constants by a test.
type toolCallParams struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
	Meta      struct {
		ProgressToken   json.RawMessage `json:"progressToken"`
		Key             json.RawMessage `json:"io.github.mcp-confirm/idempotency-key"`
		ProtocolVersion json.RawMessage `json:"io.modelcontextprotocol/protocolVersion"`
	} `json:"_meta"`
}

// toolCall answers the host's tools/call through the guard. The host's
// progress token gets the server's progress; the host's cancel ends the
// call, which is then journaled unknown unless an answer came (and the
// host, having cancelled, gets no answer).
func (p *Proxy) toolCall(ctx context.Context, m message) {
	params := m.toolCall
	if params == nil {
		params = new(toolCallParams)
		if json.Unmarshal(m.Params, params) != nil {
			params.Name = ""
		}
	}
	if params.Name == "" {
		p.write(response{JSONRPC: mcp.JSONRPC_VERSION, ID: m.ID, Error: &mcpclient.RPCError{
			Code: mcp.INVALID_PARAMS, Message: "tools/call needs params with a tool name"}})
		return
	}
	if !p.tools.serves(params.Name) {
		p.write(response{JSONRPC: mcp.JSONRPC_VERSION, ID: m.ID, Error: &mcpclient.RPCError{
			Code: mcp.INVALID_PARAMS, Message: "Unknown tool: " + params.Name}})
		return
	}
	var key string
	_ = json.Unmarshal(params.Meta.Key, &key)
	var onProgress func(mcpclient.Progress)
	if token := params.Meta.ProgressToken; !isNull(token) {
		onProgress = func(pr mcpclient.Progress) { p.progressUp(token, pr) }
	}
	// A read's answer is passed on by the session's reader the moment it
	// comes (one goroutine hand-off less per read: BenchmarkReadThroughProxy),
	// unless the host asked for progress, which must all come before the
	// answer and goes through this goroutine. passed makes sure the host
	// gets one answer, from there or from here. The cost: a host that
	// stops reading its stdin stalls the server's reader on this write, and
	// answers to other calls wait in the server's pipe meanwhile; a write
	// among them can then time out and become unknown (never resent). A
	// host that does not read gets no answers either way.
	var passed atomic.Bool
	var onAnswer func(json.RawMessage, *mcpclient.RPCError)
	if onProgress == nil {
		onAnswer = func(result json.RawMessage, rpcErr *mcpclient.RPCError) {
			if rpcErr != nil && rpcErr.Code == 0 {
				return // not an error the host could read: answered below
			}
			if ctx.Err() == nil && passed.CompareAndSwap(false, true) {
				p.reply(m.ID, params, result, rpcErr)
			}
		}
	}
	// The host's arguments as written: a read sends them byte for byte; a
	// write decodes them with numbers kept as written, so the fingerprint
	// of a resend equals the first one's.
	res, err := p.fitted().Call(ctx, guard.Request{Tool: params.Name, RawArgs: params.Arguments, Key: key,
		OnProgress: onProgress, OnReadAnswer: onAnswer})
	if passed.Load() {
		return
	}
	result, rpcErr := p.answer(params.Name, res, err)
	// The host cancelled (or is gone): it expects no answer.
	if ctx.Err() == nil && passed.CompareAndSwap(false, true) {
		p.reply(m.ID, params, result, rpcErr)
	}
	// Logged once the answer is written: the host does not wait on the
	// log line, a fifth of the proxy's CPU for a guarded write
	// (BenchmarkInProcessProxyWrite's profile). The journal has it first.
	if err == nil && res.Call.ID != 0 {
		p.log.Info("call", "id", res.Call.ID, "tool", params.Name, "state", res.State, "reason", res.Call.Reason, "key", res.Key)
	}
}

// reply writes the answer to the host's tools/call: the error, or the
// result with resultType added for a 2026-07-28 host.
func (p *Proxy) reply(id json.RawMessage, params *toolCallParams, result json.RawMessage, rpcErr *mcpclient.RPCError) {
	if rpcErr != nil {
		p.write(response{JSONRPC: mcp.JSONRPC_VERSION, ID: id, Error: rpcErr})
		return
	}
	var version string
	_ = json.Unmarshal(params.Meta.ProtocolVersion, &version)
	if mcp.IsModernProtocol(version) {
		result = withResultType(result)
	}
	p.writeResult(id, result)
}

// unreachable is the handler registered with mcp-go's server, which never
// sees a tools/call: the proxy answers them all itself (toolCall).
func unreachable(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	return nil, errors.New("mcp-confirm proxy: tools/call took an unexpected path; nothing was sent")
}

// progressUp sends the server's progress to the host under the host's own
// token, exactly as the host wrote it. Written directly, before the call
// returns, so it always precedes the answer.
func (p *Proxy) progressUp(token json.RawMessage, pr mcpclient.Progress) {
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

// answer turns what the guard came to into the host's tools/call result,
// or a JSON-RPC error when the server answered with one.
func (p *Proxy) answer(tool string, res guard.Result, err error) (json.RawMessage, *mcpclient.RPCError) {
	var late *guard.LateSettledError
	if errors.As(err, &late) {
		p.log.Info("not sent: an identical call settled late and is not yet acknowledged; answered with its outcome",
			"call", late.CallID, "tool", tool, "state", late.State)
		return ReplayLate(late.CallID, late.State, res.Result, res.Error), nil
	}
	if err != nil {
		return encode(p.refusal(tool, res, err))
	}
	res = p.asJournaled(res)
	switch res.State {
	case pending.StateUnknown, pending.StateInFlight:
		if res.State == pending.StateInFlight {
			// Another process took this attempt for lost, and the call was
			// sent again from there. What the server answered this host's
			// request is still its answer; without one, the outcome is
			// coming elsewhere, not ours to say.
			p.log.Warn("a call this proxy sent was sent again by another process meanwhile",
				"call", res.Call.ID, "tool", tool, "answered", len(res.Result) > 0)
			if len(res.Result) > 0 {
				return res.Result, nil
			}
			return encode(Unknown(res.Call.ID, res.Key, reasonSentElsewhere))
		}
		if res.Call.Reason == string(mcpclient.ReasonConnectionLost) {
			msg := "the MCP server went away during a call; answered unknown, and it restarts on the next call"
			if p.opts.Server.URL != "" { // nothing to restart: a new session
				msg = "the connection to the MCP server was lost during a call; answered unknown, and the next call starts a new session"
			}
			p.log.Warn(msg, "call", res.Call.ID, "tool", tool)
		}
		if res.Refusal != nil && errors.Is(res.Refusal, mcpclient.ErrAuthorization) {
			p.log.Warn("the server answered 401 to a write: answered unknown; run 'mcp-confirm login --url "+p.opts.Server.URL+
				"' in a terminal (or fix the Authorization header), then decide the call", "call", res.Call.ID, "tool", tool)
		}
		return encode(Unknown(res.Call.ID, res.Key, res.Call.Reason))
	}
	if len(res.Result) > 0 {
		return res.Result, nil // as the server wrote it
	}
	if len(res.Error) > 0 {
		var e mcpclient.RPCError
		if json.Unmarshal(res.Error, &e) == nil && e.Code != 0 {
			return nil, &e // the server's own error, code and all
		}
		// A read that got no answer at all (the guard's own error).
		return encode(toolError(fmt.Sprintf("mcp-confirm: %s gave no answer: %s", tool, e.Message)))
	}
	return encode(toolError("mcp-confirm: the MCP server gave no answer."))
}

// reasonSentElsewhere is the reason given to the host for a call that,
// when its attempt here ended, was in flight again from another process.
const reasonSentElsewhere = "while it was on its way, another process took it for lost and it was sent again from there"

// asJournaled reads an unknown or in-flight call again before the host is
// told of it (guard.AsJournaled), so that what the host is told is what the
// journal says: another process may have recovered the call while this one
// waited on the server, and an operator retried it. Settled answers are
// not read again: the hot path of a write stays one journal write.
func (p *Proxy) asJournaled(res guard.Result) guard.Result {
	if res.State != pending.StateUnknown && res.State != pending.StateInFlight {
		return res
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return guard.AsJournaled(ctx, p.opts.Journal, res)
}

func encode(r *mcp.CallToolResult) (json.RawMessage, *mcpclient.RPCError) {
	b, err := json.Marshal(r)
	if err != nil {
		return nil, &mcpclient.RPCError{Code: mcp.INTERNAL_ERROR, Message: "mcp-confirm proxy: " + err.Error()}
	}
	return b, nil
}

// refusal answers a call the guard returned an error for: one it did not
// send, or (OutcomeNotRecordedError) one whose outcome is unknown.
func (p *Proxy) refusal(tool string, res guard.Result, err error) *mcp.CallToolResult {
	var held *guard.HeldError
	var pendingKey *guard.KeyPendingError
	var notRecorded *guard.OutcomeNotRecordedError
	switch {
	case errors.As(err, &notRecorded):
		// Sent, but not journaled how it ended: unknown, and the host must
		// hear so; "could not be sent" would invite a resend.
		p.log.Error("call sent, outcome not journaled; answered unknown", "call", notRecorded.CallID, "tool", tool, "err", err)
		return Unknown(notRecorded.CallID, res.Key, "outcome not journaled")
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
	switch r := mcpclient.UnknownReason(reason); {
	case r.Refused():
		// An HTTP status by which the server says it did not run it: its
		// word, not proof.
		why = reason + ", but that is only its word"
	case r == mcpclient.ReasonConnectionLost:
		why = "the connection to the server was lost"
	case r == mcpclient.ReasonCancelled:
		why = "the call was cancelled after it was sent"
	case r == guard.ReasonInProgress:
		why = "the server reports it is still working on it"
	case reason == reasonSentElsewhere:
		why = reason
	case r == "":
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

// ReplayedFromField is the _meta field naming the call whose stored outcome
// answers a resend (SPEC §9).
const ReplayedFromField = "io.github.mcp-confirm/replayed-from"

// ReplayLate answers a resend of a call that its caller was told was
// unknown and that then settled late: nothing is sent, and the host gets
// the stored outcome, marked in _meta and, first, in words (a model reads
// the text, not _meta).
func ReplayLate(callID int64, state pending.State, result, rpcErr json.RawMessage) json.RawMessage {
	text := fmt.Sprintf("NOT SENT AGAIN: an identical call (call %d) was reported as unknown earlier, and its answer "+
		"then arrived: it %s. Below is that call's stored result; nothing was sent now, so this did not happen twice. "+
		"If this is deliberately a second, separate operation, tell the user; they can send it from mcp-confirm.", callID, state)
	obj := map[string]json.RawMessage{}
	if json.Unmarshal(result, &obj) != nil || obj == nil {
		obj = map[string]json.RawMessage{}
		detail := "the stored answer is a JSON-RPC error: " + string(rpcErr)
		if len(rpcErr) == 0 {
			detail = "no stored result"
		}
		obj["content"], _ = json.Marshal([]mcp.Content{mcp.NewTextContent(detail)})
		obj["isError"] = json.RawMessage(`true`)
	}
	var content []json.RawMessage
	_ = json.Unmarshal(obj["content"], &content)
	first, _ := json.Marshal(mcp.NewTextContent(text))
	obj["content"], _ = json.Marshal(append([]json.RawMessage{first}, content...))
	meta := map[string]json.RawMessage{}
	_ = json.Unmarshal(obj["_meta"], &meta)
	if meta == nil {
		meta = map[string]json.RawMessage{}
	}
	meta[ReplayedFromField], _ = json.Marshal(callID)
	meta["io.github.mcp-confirm/replayed"] = json.RawMessage(`true`)
	obj["_meta"], _ = json.Marshal(meta)
	b, _ := json.Marshal(obj)
	return b
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
