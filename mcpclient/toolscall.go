package mcpclient

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// A tools/call is written on the child's stdin directly, and its answer is
// taken off the child's stdout by the tap, not through mcp-go's Client or
// transport, for four reasons:
//
//   - On a 2026-07-28 connection CallTool marshals and re-parses the params
//     several times per call to derive HTTP headers (and re-encodes the
//     tool's input schema for x-mcp-header bindings) that stdio never
//     sends, then parses the whole result, which the engine keeps as the
//     server's raw JSON anyway. That topped the proxy's CPU profile for a
//     small read (BenchmarkInProcessProxyRead, proxy/prof_test.go).
//   - The transport re-encodes the request and decodes every answer twice,
//     which the tap has already sliced out of the line.
//   - CallTool resends a request on its own when the server answers
//     input_required with nothing asked (load shedding). A write must never
//     be resent by anything but the guard.
//   - One call is one wire request, whose id is the call's own progress
//     token: unique per client, so it cannot collide with the ids mcp-go
//     gives its own requests (handshake, tools/list).

// cancelNotifyTimeout bounds writing notifications/cancelled, which is
// best effort and must not hold up the caller.
const cancelNotifyTimeout = 5 * time.Second

// toolsCall writes the call's one tools/call request, whose id and
// progress token are both the call's token, and waits for the answer, which
// it classifies: nil for a usable result; the JSON-RPC error object for an
// error; an error wrapping ErrUnusableAnswer for anything else (the answer
// itself, kept by the tap, is what finish decides from). A failed write or
// ctx's end (which is also how a lost session ends a call, see tap.failAll)
// is a *transport.Error. When ctx ends after the write, the server is sent
// notifications/cancelled.
//
// An answer that asks for input (2026-07-28 multi round-trip) is unusable:
// mcp-confirm cannot supply it, and resending is the guard's decision alone.
// The call was received and did not complete; what it did before asking is
// the server's to say, so the outcome is unknown rather than failed.
func (s *session) toolsCall(ctx context.Context, wc *wireCall, args map[string]any, rawArgs json.RawMessage) error {
	params, err := s.toolsCallParams(wc.token, wc.tool, args, rawArgs, wc.key)
	if err != nil {
		return fmt.Errorf("encode the arguments: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return transport.NewError(err)
	}
	wireID := appendString(nil, wc.token)
	line := make([]byte, 0, len(params)+len(wireID)+64)
	line = append(line, `{"jsonrpc":"2.0","id":`...)
	line = append(line, wireID...)
	line = append(line, `,"method":"tools/call","params":`...)
	line = append(line, params...)
	line = append(line, "}\n"...)
	r, err := s.w.send(ctx, wc, string(wireID), line)
	if r != nil && wc.onSent != nil {
		wc.onSent(wc.session, rpcIDText(string(wireID))) // a byte of it reached the pipe
	}
	if err != nil {
		// finish tells "not sent" (r nil) from sent in part (unknown).
		return transport.NewError(fmt.Errorf("write the request: %w", err))
	}
	select {
	case <-r.answered:
	case <-ctx.Done():
		go s.sendCancel(s.mc.GetTransport(), mcp.NewRequestId(wc.token), context.Cause(ctx))
		return transport.NewError(ctx.Err())
	}
	switch resp := r.resp; resp.classify() {
	case AnswerResult:
		return nil
	case AnswerRPCError:
		return resp.rpcErr
	default:
		return fmt.Errorf("%w: %s", ErrUnusableAnswer, resp.why)
	}
}

// sendCancel tells the server that we gave up on a request. If the request
// was never written the server ignores an id it does not know.
func (s *session) sendCancel(tr transport.Interface, id mcp.RequestId, cause error) {
	ctx, cancel := context.WithTimeout(context.Background(), cancelNotifyTimeout)
	defer cancel()
	reason := "cancelled"
	if cause != nil {
		reason = cause.Error()
	}
	_ = tr.SendNotification(ctx, mcp.JSONRPCNotification{
		JSONRPC: mcp.JSONRPC_VERSION,
		Notification: mcp.Notification{Method: string(mcp.MethodNotificationCancelled),
			Params: mcp.NotificationParams{AdditionalFields: map[string]any{"requestId": id, "reason": reason}}},
	})
}

// toolsCallParams encodes {"name","arguments","_meta"}, with rawArgs as
// written when set, else args encoded; _meta holds the
// progress token, the idempotency key and, on 2026-07-28, the connection's
// own fields (protocol version, client info and capabilities).
func (s *session) toolsCallParams(token, tool string, args map[string]any, rawArgs json.RawMessage, key string) (json.RawMessage, error) {
	a := rawArgs
	if bytes.ContainsAny(a, "\r\n") {
		// Whitespace that would break the line framing.
		var c bytes.Buffer
		if err := json.Compact(&c, a); err != nil {
			return nil, err
		}
		a = c.Bytes()
	}
	if a == nil {
		var err error
		if a, err = json.Marshal(args); err != nil {
			return nil, err
		}
	}
	b := make([]byte, 0, len(a)+len(tool)+len(token)+len(key)+len(s.connMeta)+96)
	b = append(b, `{"name":`...)
	b = appendString(b, tool)
	b = append(b, `,"arguments":`...)
	b = append(b, a...)
	b = append(b, `,"_meta":{"progressToken":`...)
	b = appendString(b, token)
	if key != "" {
		b = append(b, ',')
		b = appendString(b, KeyMetaField)
		b = append(b, ':')
		b = appendString(b, key)
	}
	if len(s.connMeta) > 0 {
		b = append(b, ',')
		b = append(b, s.connMeta...)
	}
	b = append(b, "}}"...)
	return b, nil
}

// appendString appends s as a JSON string. Tokens, keys and tool names are
// almost always plain ASCII, written as they are; anything else is left to
// encoding/json (escapes, and its HTML-safe and UTF-8 rules).
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // a string always encodes
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// setConnMeta computes, once per session, the _meta members every request
// carries on a 2026-07-28 connection (none on a legacy one, where the
// handshake fixed them): as a JSON fragment for tools/call, and as fields
// for relayed requests.
func (s *session) setConnMeta() {
	v := s.mc.ProtocolVersion()
	if !mcp.IsModernProtocol(v) {
		return
	}
	fields := map[string]any{
		mcp.MetaKeyProtocolVersion:    v,
		mcp.MetaKeyClientCapabilities: s.mc.GetClientCapabilities(),
		mcp.MetaKeyClientInfo:         mcp.Implementation{Name: s.opts.ClientName, Version: s.opts.ClientVersion},
	}
	s.connFields = map[string]json.RawMessage{}
	var frag []byte
	for _, k := range connectionMeta {
		raw, err := json.Marshal(fields[k])
		if err != nil {
			continue
		}
		s.connFields[k] = raw
		if len(frag) > 0 {
			frag = append(frag, ',')
		}
		frag = appendString(frag, k)
		frag = append(frag, ':')
		frag = append(frag, raw...)
	}
	s.connMeta = frag
}
