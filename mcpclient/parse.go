package mcpclient

import (
	"bytes"
	"encoding/json"
)

// Which lines from the server are responses, and to which id: every line
// the server writes is asked (tap.incoming), so the common ones are read
// by field order, not decoded.
//
// Fast path and fallback: parseResponse matches mcp-go's layout
// ({"jsonrpc":"2.0","id":...} first) and the TypeScript SDK's
// ({"result":...,"jsonrpc":"2.0","id":N}) byte for byte, and slices the
// result out of them unchecked; any other line goes to decodeResponse, the
// slow and obviously correct path, encoding/json's decode of id and
// method. A sliced result has a fallback of its own: wireResp.judge checks
// that it runs to the line's closing brace, else reads the whole line
// (answer.go). What keeps them equal: TestParseResponse (a table of
// layouts, malformed lines among them), TestResultJSONFallsBackToFullDecode,
// and TestParseResponseMatchesEncodingJSON with FuzzParseResponse, which
// hold both paths, id, result and judgement, to encoding/json on any
// JSON-RPC message (parse_internal_test.go).

var (
	markID = []byte(`"id"`)
	// mcp-go marshals every message with these fields first, in this order.
	fastRequest  = []byte(`{"jsonrpc":"2.0","id":`)
	fastMethod   = []byte(`,"method":"`)
	fastResult   = []byte(`,"result":`)
	fastNotifRPC = []byte(`{"jsonrpc":"2.0","method":`)
	// The TypeScript SDK writes a response as {"result":...,"jsonrpc":"2.0","id":N}.
	tsResult = []byte(`{"result":`)
	tsTail   = []byte(`,"jsonrpc":"2.0","id":`)
)

// parseResponse returns the id of an incoming response and, on the fast
// paths (mcp-go's layout and the TypeScript SDK's), its raw result, a
// subslice of line. ok is false for anything that is not a
// response. With ok and neither result nor error, the caller decodes in full.
func parseResponse(line []byte) (id string, result json.RawMessage, ok bool) {
	if bytes.HasPrefix(line, fastNotifRPC) {
		return "", nil, false // a notification or a request from the server
	}
	if rest, found := bytes.CutPrefix(line, fastRequest); found {
		// An id with spaces around it, or a comma in it, is not cut out
		// right here: decodeResponse reads it.
		if i := bytes.IndexByte(rest, ','); i > 0 && plainID(rest[:i]) {
			after := rest[i:]
			if bytes.HasPrefix(after, fastResult) && after[len(after)-1] == '}' {
				return string(rest[:i]), after[len(fastResult) : len(after)-1], true
			}
			if !bytes.HasPrefix(after, fastMethod) {
				return string(rest[:i]), nil, true
			}
		}
	}
	if bytes.HasPrefix(line, tsResult) && line[len(line)-1] == '}' {
		if i := bytes.LastIndex(line, tsTail); i > len(tsResult) {
			if id := line[i+len(tsTail) : len(line)-1]; plainID(id) {
				return string(id), line[len(tsResult):i], true
			}
		}
	}
	if !bytes.Contains(line, markID) {
		return "", nil, false
	}
	return decodeResponse(line)
}

// decodeResponse is parseResponse's fallback: the line decoded by
// encoding/json, or, when it is not valid JSON, read up to the damage.
func decodeResponse(line []byte) (id string, result json.RawMessage, ok bool) {
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	if err := json.Unmarshal(line, &m); err != nil {
		return idBeforeDamage(line)
	}
	if m.Method != "" || len(m.ID) == 0 {
		return "", nil, false
	}
	return string(bytes.TrimSpace(m.ID)), nil, true
}

// idBeforeDamage reads the id of a line that is not valid JSON (or nests too
// deep) when it comes before the damage, and no method does: then the line
// is an answer to that id, unusable, rather than noise, so that its call
// ends with the bytes as evidence instead of waiting for its clock.
func idBeforeDamage(line []byte) (id string, result json.RawMessage, ok bool) {
	var idVal []byte
	it := members{b: line, i: 1}
	for it.next() {
		switch name, _ := memberName(it.key); string(name) {
		case "method":
			return "", nil, false
		case "id":
			idVal = it.val
		}
	}
	if !plainID(idVal) {
		return "", nil, false
	}
	return string(idVal), nil, true
}

// plainID: b is a JSON-RPC id as written by a server in its own layout: a
// number, or a string without escapes or quotes inside.
func plainID(b []byte) bool {
	if len(b) >= 2 && b[0] == '"' && b[len(b)-1] == '"' {
		return !bytes.ContainsAny(b[1:len(b)-1], `"\\`)
	}
	if len(b) == 0 {
		return false
	}
	for _, c := range b {
		if (c < '0' || c > '9') && c != '-' {
			return false
		}
	}
	return true
}
