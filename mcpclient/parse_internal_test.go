package mcpclient

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// responseReference is what parseResponse's fast paths stand in for:
// encoding/json's decode of the whole line. A response is a line with an
// id and no method.
func responseReference(line []byte) (id string, result json.RawMessage, ok bool) {
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Result json.RawMessage `json:"result"`
	}
	if json.Unmarshal(line, &m) != nil || m.Method != "" || len(m.ID) == 0 {
		return "", nil, false
	}
	return string(bytes.TrimSpace(m.ID)), bytes.TrimSpace(m.Result), true
}

// jsonRPCMessage: line is a JSON-RPC message as any encoder writes one, the
// lines the fast paths are for: a JSON object whose members have distinct
// names, even ignoring case, written without escapes; not both a request
// (method) and a response (result, error); an id, if any, a number or a
// string of letters, digits, '-' and '_', as mcp-go's and the tap's are.
// For other lines the fast paths and encoding/json may disagree, which is
// harmless: no id of ours can be read from one, so it is never taken for
// one of our answers.
func jsonRPCMessage(line []byte) bool {
	var m map[string]json.RawMessage
	if json.Unmarshal(line, &m) != nil || m == nil {
		return false
	}
	seen := map[string]bool{}
	it := members{b: line, i: skipSpace(line, 0) + 1}
	for it.next() {
		name := it.key[1 : len(it.key)-1]
		lower := strings.ToLower(string(name))
		if bytes.IndexByte(name, '\\') >= 0 || seen[lower] {
			return false
		}
		seen[lower] = true
	}
	if !it.ok {
		return false
	}
	if _, method := m["method"]; method {
		if _, r := m["result"]; r {
			return false
		}
		if _, e := m["error"]; e {
			return false
		}
	}
	if id, ok := m["id"]; ok {
		return plainTestID(id)
	}
	return true
}

func plainTestID(id []byte) bool {
	s := string(id)
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		s = s[1 : len(s)-1]
		return s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_") == ""
	}
	return s != "" && strings.Trim(s, "-0123456789") == "" && json.Valid(id)
}

var responseLines = []string{
	`{"jsonrpc":"2.0","id":4,"result":{"content":[]}}`,
	`{"jsonrpc":"2.0","id":"mcp-confirm-abc-1","result":{"content":[{"type":"text","text":"}\"x"}],"isError":false}}`,
	`{"jsonrpc":"2.0","id":5,"error":{"code":-32603,"message":"x"}}`,
	`{"result":{"content":[]},"jsonrpc":"2.0","id":7}`,
	`{"result":{"a":{"jsonrpc":"2.0","id":5}},"jsonrpc":"2.0","id":"mcp-confirm-x-3"}`,
	`{"jsonrpc":"2.0","id":4,"result":{"content":[]},"extra":1}`,
	`{"result":{"content":[]},"extra":1,"jsonrpc":"2.0","id":4}`,
	`{"id":"a-1","jsonrpc":"2.0","result":{"content":[]}}`,
	`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t"}}`,
	`{"jsonrpc":"2.0","id":1,"method":"ping"}`,
	`{"method":"notifications/message","jsonrpc":"2.0","params":{"id":3}}`,
	`{"jsonrpc": "2.0", "id": 9, "result": {"content": []}}`,
	`{"jsonrpc":"2.0","id":3,"result":null,"error":{"code":1,"message":"m"}}`,
	// mcp-go's field order with spaces around the id: the fast path once
	// read it with the spaces, and matched no request.
	`{"jsonrpc":"2.0","id": "mcp-confirm-abc-2","result":{"content":[]}}`,
	`{"jsonrpc":"2.0","id":7 ,"error":{"code":1,"message":"m"}}`,
}

// TestParseResponseMatchesEncodingJSON and FuzzParseResponse hold
// parseResponse's fast paths (field order matching) to encoding/json: on a
// JSON-RPC message (jsonRPCMessage), both find the same response and id,
// and the result sliced out of a known layout, once judged, is the one the
// whole line's decode finds.
func TestParseResponseMatchesEncodingJSON(t *testing.T) {
	for _, line := range responseLines {
		if !jsonRPCMessage([]byte(line)) {
			t.Errorf("not a JSON-RPC message by the test's own rules: %s", line)
			continue
		}
		checkParseResponse(t, []byte(line))
	}
}

// go test -run '^$' -fuzz FuzzParseResponse -fuzztime 60s ./mcpclient/
func FuzzParseResponse(f *testing.F) {
	for _, line := range responseLines {
		f.Add([]byte(line))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		if !jsonRPCMessage(line) {
			return
		}
		checkParseResponse(t, line)
	})
}

func checkParseResponse(t *testing.T, line []byte) {
	t.Helper()
	id, result, ok := parseResponse(line)
	wantID, wantResult, wantOK := responseReference(line)
	if id != wantID || ok != wantOK {
		t.Fatalf("%s:\nfast path (%q, %v), encoding/json (%q, %v)", line, id, ok, wantID, wantOK)
	}
	if !ok {
		return
	}
	// The sliced result is checked when the answer is judged; judged, it
	// is what the judge finds reading the whole line (its slow path), and
	// that is what encoding/json finds.
	fast := &wireResp{line: line, result: result}
	full := &wireResp{line: line}
	fc, uc := fast.classify(), full.classify()
	if fc != uc || fast.isError != full.isError || !bytes.Equal(fast.result, full.result) || fast.why != full.why {
		t.Fatalf("%s:\njudged from the slice %s %v %q (%s)\njudged from the line  %s %v %q (%s)",
			line, fc, fast.isError, fast.result, fast.why, uc, full.isError, full.result, full.why)
	}
	if uc == AnswerResult && !bytes.Equal(full.result, wantResult) {
		t.Fatalf("%s: result %q, encoding/json %q", line, full.result, wantResult)
	}
}
