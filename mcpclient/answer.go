package mcpclient

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// AnswerClass is what a server's answer to a tools/call is (SPEC §9).
type AnswerClass string

// Answer classes. Only the first two ever settle a call, live or late.
const (
	AnswerResult   AnswerClass = "result"    // a well-formed CallToolResult; isError true or false
	AnswerRPCError AnswerClass = "rpc_error" // a JSON-RPC error object
	AnswerUnusable AnswerClass = "unusable"  // anything else: not a usable answer
)

// maxRaw bounds the bytes of an unusable answer that Delivery.Raw and
// LateResult.Raw keep as evidence.
const maxRaw = 64 << 10

// maxJSONDepth is encoding/json's nesting limit, which json.Valid enforces.
const maxJSONDepth = 10000

// Why an answer is unusable, in a few words.
const (
	whyInvalid       = "not valid JSON"
	whyTooDeep       = "nested too deep"
	whyNull          = "result is null"
	whyNotObject     = "result is not an object"
	whyInputRequired = "asks for input (input_required), which mcp-confirm cannot supply"
	whyTask          = "is a task (resultType task), which mcp-confirm does not use"
	whyIsError       = "isError is not a boolean"
	whyContent       = "content is not an array"
	whyNeither       = "neither a result nor an error"
	whyBoth          = "both a result and an error"
	whyErrorObject   = "error is not a JSON-RPC error object"
)

// ClassifyResult classifies a tools/call "result" member as the server wrote
// it. why says, for AnswerUnusable, what is wrong in a few words ("result is
// null", "result is not an object", "nested too deep", "asks for input
// (input_required), which mcp-confirm cannot supply", "isError is not a
// boolean", "content is not an array", "not valid JSON").
//
// A usable result is valid JSON within encoding/json's nesting limit (10000),
// an object, whose isError is absent or a boolean, content absent or an
// array, and resultType absent or "complete" (a task is unusable too:
// mcp-confirm does not use tasks). Those three members must each appear once
// and be spelled exactly: a member that only a case-insensitive decoder (as
// encoding/json's) would take for one of them makes the result ambiguous,
// hence unusable. Nothing else in the result is looked at: its content is
// the server's business.
//
// It never returns AnswerRPCError: that is the class of an answer whose
// "error" member is a JSON-RPC error object, which the answer's line says.
//
// Cost: one json.Valid and one pass over the result's bytes that decodes
// nothing (strings are skipped by their quotes); no allocation unless a
// member name or resultType is written with escapes.
func ClassifyResult(raw json.RawMessage) (class AnswerClass, isError bool, why string) {
	if !json.Valid(raw) {
		return AnswerUnusable, false, invalidWhy(raw)
	}
	class, isError, why, _ = classifyValue(raw, skipSpace(raw, 0))
	return class, isError, why
}

// invalidWhy says why b is not valid JSON: too deep, or anything else.
func invalidWhy(b []byte) string {
	if nestedDeeper(b, maxJSONDepth) {
		return whyTooDeep
	}
	return whyInvalid
}

// nestedDeeper reports whether brackets outside strings nest deeper than max
// somewhere in b, valid JSON or not.
func nestedDeeper(b []byte, max int) bool {
	depth := 0
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case '"':
			i = skipString(b, i) - 1
		case '{', '[':
			if depth++; depth > max {
				return true
			}
		case '}', ']':
			depth--
		}
	}
	return false
}

// classifyValue classifies the result value that starts at b[i], within
// valid JSON, and returns where the value ends (where it stopped reading,
// for a result found unusable in the middle).
func classifyValue(b []byte, i int) (class AnswerClass, isError bool, why string, end int) {
	if i >= len(b) {
		return AnswerUnusable, false, whyInvalid, i
	}
	switch b[i] {
	case '{':
	case 'n':
		return AnswerUnusable, false, whyNull, skipValue(b, i)
	default:
		return AnswerUnusable, false, whyNotObject, skipValue(b, i)
	}
	var seenIsError, seenContent, seenType bool
	it := members{b: b, i: i + 1}
	for it.next() {
		key, val := it.key, it.val
		name, exact := memberName(key)
		switch exact {
		case "isError":
			if seenIsError {
				return AnswerUnusable, false, "isError appears twice", it.i
			}
			seenIsError = true
			switch string(val) {
			case "true":
				isError = true
			case "false":
			default:
				return AnswerUnusable, false, whyIsError, it.i
			}
		case "content":
			if seenContent {
				return AnswerUnusable, false, "content appears twice", it.i
			}
			seenContent = true
			if val[0] != '[' {
				return AnswerUnusable, false, whyContent, it.i
			}
		case "resultType":
			if seenType {
				return AnswerUnusable, false, "resultType appears twice", it.i
			}
			seenType = true
			if string(val) == `"complete"` {
				break
			}
			switch t, _ := jsonString(val); t {
			case "complete":
			case "input_required":
				return AnswerUnusable, false, whyInputRequired, it.i
			case "task":
				return AnswerUnusable, false, whyTask, it.i
			default:
				return AnswerUnusable, false, fmt.Sprintf("resultType %.40s is not \"complete\"", val), it.i
			}
		default:
			// A name that encoding/json would decode into one of the three.
			if why := foldsToMember(name); why != "" {
				return AnswerUnusable, false, why, it.i
			}
		}
	}
	if !it.ok {
		return AnswerUnusable, false, whyInvalid, it.i
	}
	return AnswerResult, isError, "", it.i
}

// foldsToMember says so when name is not one of the members the classifier
// reads but equals one under Unicode case folding (as encoding/json matches
// names), else "".
func foldsToMember(name []byte) string {
	for _, m := range [...]string{"isError", "content", "resultType"} {
		// m is ASCII: an ASCII name of another length cannot equal it
		// under folding (only non-ASCII letters, the Kelvin sign and the
		// long s, fold to ASCII ones, and they are longer).
		if len(name) != len(m) && !hasNonASCII(name) {
			continue
		}
		if bytes.EqualFold(name, []byte(m)) {
			return fmt.Sprintf("member %.40q is not %q but would be read as it", name, m)
		}
	}
	return ""
}

func hasNonASCII(b []byte) bool {
	for _, c := range b {
		if c >= 0x80 {
			return true
		}
	}
	return false
}

// memberName returns a member's name (key is its JSON string, quotes
// included), and that name again as exact when it is one the classifier
// reads, spelled exactly (escapes decoded).
func memberName(key []byte) (name []byte, exact string) {
	name = key[1 : len(key)-1]
	if bytes.IndexByte(name, '\\') >= 0 {
		s, ok := jsonString(key)
		if !ok {
			return name, ""
		}
		name = []byte(s)
	}
	switch string(name) {
	case "isError":
		return name, "isError"
	case "content":
		return name, "content"
	case "resultType":
		return name, "resultType"
	}
	return name, ""
}

// jsonString decodes a JSON string; ok is false for any other value.
func jsonString(val []byte) (s string, ok bool) {
	if len(val) == 0 || val[0] != '"' {
		return "", false
	}
	if bytes.IndexByte(val, '\\') < 0 {
		return string(val[1 : len(val)-1]), true
	}
	return s, json.Unmarshal(val, &s) == nil
}

// The walkers below read JSON that json.Valid has accepted: they find where
// values end, and decode nothing. On anything else they stop (ok false, or
// an end at len(b)) rather than loop or panic.

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index after the string whose opening quote is
// b[i].
func skipString(b []byte, i int) int {
	i++
	for {
		j := bytes.IndexByte(b[i:], '"')
		if j < 0 {
			return len(b)
		}
		i += j
		n := 0 // backslashes right before the quote
		for k := i - 1; k >= 0 && b[k] == '\\'; k-- {
			n++
		}
		i++
		if n%2 == 0 {
			return i
		}
	}
}

// skipValue returns the index after the value that starts at b[i].
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return i
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				i = skipString(b, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return i
	default: // a number, true, false or null
		for i < len(b) {
			switch b[i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return i
			}
			i++
		}
		return i
	}
}

// members walks the members of an object, from just after its opening
// brace (i): each next reads one, as its name (key: its JSON string, quotes
// included) and value (val: at least one byte). After the last, i is just
// after the closing brace and ok is true; ok false is a layout valid JSON
// does not have.
type members struct {
	b        []byte
	i        int
	key, val []byte
	ok       bool
}

func (m *members) next() bool {
	b, i := m.b, m.i
	for {
		i = skipSpace(b, i)
		if i >= len(b) {
			m.i = i
			return false
		}
		switch b[i] {
		case '}':
			m.i, m.ok = i+1, true
			return false
		case ',':
			i++
			continue
		case '"':
		default:
			m.i = i
			return false
		}
		ks := i
		i = skipString(b, i)
		m.key = b[ks:i]
		if i = skipSpace(b, i); i >= len(b) || b[i] != ':' {
			m.i = i
			return false
		}
		vs := skipSpace(b, i+1)
		if i = skipValue(b, vs); i == vs {
			m.i = i
			return false
		}
		m.val, m.i = b[vs:i], i
		return true
	}
}

// judge classifies the answer line of a wireResp (see classify).
func (r *wireResp) judge() (AnswerClass, bool, string) {
	line := r.line
	if !json.Valid(line) {
		return AnswerUnusable, false, invalidWhy(line)
	}
	if r.result != nil {
		// Sliced out of a known layout: the result when it is one value
		// that runs to the line's closing brace.
		x := r.result
		class, isError, why, end := classifyValue(x, skipSpace(x, 0))
		if skipSpace(x, end) == len(x) {
			r.result = bytes.TrimSpace(x)
			return class, isError, why
		}
		r.result = nil // members after it: read the whole line
	}
	// The whole line: exactly one of a result and an error object. A
	// member twice is ambiguous (decoders differ on which one counts).
	var result, errObj []byte
	var nResult, nError, nID int
	it := members{b: line, i: skipSpace(line, 0) + 1}
	for it.next() {
		name, _ := memberName(it.key)
		switch string(name) {
		case "result":
			nResult++
			result = it.val
		case "error":
			nError++
			errObj = it.val
		case "id":
			nID++
		}
	}
	ok := it.ok
	switch {
	case !ok:
		return AnswerUnusable, false, whyInvalid
	case nResult > 1:
		return AnswerUnusable, false, "result appears twice"
	case nError > 1:
		return AnswerUnusable, false, "error appears twice"
	case nID > 1:
		return AnswerUnusable, false, "id appears twice"
	}
	if string(errObj) == "null" {
		errObj = nil // "error":null beside a result: no error
	}
	if string(result) == "null" && errObj != nil {
		result = nil // "result":null beside an error: no result
	}
	switch {
	case result != nil && errObj != nil:
		return AnswerUnusable, false, whyBoth
	case errObj != nil:
		var e RPCError
		if errObj[0] != '{' || json.Unmarshal(errObj, &e) != nil {
			return AnswerUnusable, false, whyErrorObject
		}
		r.rpcErr = &e
		return AnswerRPCError, false, ""
	case result != nil:
		r.result = result
		class, isError, why, _ := classifyValue(result, 0)
		return class, isError, why
	}
	return AnswerUnusable, false, whyNeither
}

// bounded returns at most maxRaw bytes of b, and whether it cut.
func bounded(b []byte) (json.RawMessage, bool) {
	if len(b) <= maxRaw {
		return b, false
	}
	return bytes.Clone(b[:maxRaw]), true
}
