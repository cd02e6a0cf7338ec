package proxy

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-confirm/mcp-confirm/mcpclient"
)

// A tools/call line is read by walking its JSON once, after json.Valid has
// said it is well formed, and keeping only the members the proxy needs as
// slices of the line. encoding/json's reflection decode of the same line
// was the largest single cost of a read through the proxy in its CPU
// profile (BenchmarkInProcessProxyRead): a 2026-07-28 host sends its client
// info and capabilities on every call, all of which had to be decoded to
// be skipped.
//
// Fast path and fallback: decodeToolCall is the fast path. It takes a line
// only when it reads it exactly as encoding/json would, and says no
// otherwise; route then reads the line the slow, obviously correct way,
// json.Unmarshal into message, and toolCall decodes its params the same
// way. What keeps the two equal: TestDecodeToolCall (a table of lines,
// each compared with decodeToolCallReflect, the encoding/json decode the
// walker replaced, and lines it must decline) and FuzzDecodeToolCall (any
// line the walker takes, encoding/json reads the same), both in
// call_internal_test.go.
//
// Keys are matched exactly, as JSON-RPC and MCP spell them (encoding/json
// would also take "Method" for "method"). A key or a string value written
// with escapes, or with bytes that are not UTF-8, is left to encoding/json:
// decodeToolCall then says no and route reads the line the general way, as
// it does for a repeated "params" or "_meta" (encoding/json merges repeated
// objects; a repeated scalar, the last one wins, is read the same here).

var markToolsCall = []byte(`"tools/call"`)

// decodeToolCall reads a tools/call line in one pass, the hot path of a
// proxy; ok is false for any other line, or one that does not read so
// (route then reads it the general way, and toolCall says what is wrong).
// The raw members of the result are slices of line, which the caller must
// not reuse.
func decodeToolCall(line []byte) (m message, ok bool) {
	if !bytes.Contains(line, markToolsCall) || !json.Valid(line) {
		return message{}, false
	}
	var params []byte
	ok = eachMember(line, func(key, value []byte) bool {
		switch string(key) {
		case "id":
			m.ID = value
		case "method":
			s, ok := plainString(value)
			m.Method = s
			return ok
		case "params":
			if params != nil {
				return false // encoding/json would merge the two objects
			}
			params = value
		}
		return true
	})
	if !ok || m.Method != string(mcp.MethodToolsCall) || len(params) == 0 || params[0] != '{' {
		return message{}, false
	}
	tc := new(toolCallParams)
	var meta []byte
	ok = eachMember(params, func(key, value []byte) bool {
		switch string(key) {
		case "name":
			s, ok := plainString(value)
			tc.Name = s
			return ok
		case "arguments":
			tc.Arguments = value
		case "_meta":
			if meta != nil {
				return false // as for params
			}
			meta = value
		}
		return true
	})
	if !ok {
		return message{}, false
	}
	if len(meta) > 0 && meta[0] != 'n' { // null is no _meta, as for encoding/json
		if meta[0] != '{' {
			return message{}, false
		}
		ok = eachMember(meta, func(key, value []byte) bool {
			switch string(key) {
			case "progressToken":
				tc.Meta.ProgressToken = value
			case mcpclient.KeyMetaField:
				tc.Meta.Key = value
			case mcp.MetaKeyProtocolVersion:
				tc.Meta.ProtocolVersion = value
			}
			return true
		})
		if !ok {
			return message{}, false
		}
	}
	m.toolCall = tc
	return m, true
}

// eachMember calls f with each key and raw value of obj, a well-formed JSON
// object, in order (a repeated key is seen twice). It stops and says false
// when f does, at a key written with escapes or bytes that are not UTF-8,
// or when obj is not an object.
func eachMember(obj []byte, f func(key, value []byte) bool) bool {
	i := skipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return false
	}
	i = skipSpace(obj, i+1)
	if i < len(obj) && obj[i] == '}' {
		return true
	}
	for i < len(obj) {
		end := skipString(obj, i)
		key := obj[i+1 : end-1]
		if !plain(key) {
			return false
		}
		i = skipSpace(obj, end)
		i = skipSpace(obj, i+1) // past the colon
		end = skipValue(obj, i)
		if !f(key, obj[i:end]) {
			return false
		}
		i = skipSpace(obj, end)
		if i >= len(obj) || obj[i] != ',' {
			return true // the closing brace
		}
		i = skipSpace(obj, i+1)
	}
	return false
}

// plainString is a JSON string value with neither escapes nor bad UTF-8,
// as its Go string; ok is false for anything else.
func plainString(v []byte) (string, bool) {
	if len(v) < 2 || v[0] != '"' || !plain(v[1:len(v)-1]) {
		return "", false
	}
	return string(v[1 : len(v)-1]), true
}

// plain: the inside of a JSON string means exactly its bytes.
func plain(s []byte) bool {
	return bytes.IndexByte(s, '\\') < 0 && utf8.Valid(s)
}

// The skip functions walk well-formed JSON only (json.Valid has passed),
// which is why they need no error paths.

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index just past the string that starts at b[i].
func skipString(b []byte, i int) int {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++ // the escaped byte cannot end the string
		case '"':
			return j + 1
		}
	}
	return len(b)
}

// skipValue returns the index just past the value that starts at b[i].
func skipValue(b []byte, i int) int {
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				j = skipString(b, j) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1
				}
			}
		}
		return len(b)
	}
	for j := i; j < len(b); j++ { // a number, true, false or null
		switch b[j] {
		case ',', '}', ']', ' ', '\t', '\r', '\n':
			return j
		}
	}
	return len(b)
}
