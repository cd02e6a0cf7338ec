package mcpclient

import (
	"encoding/json"
	"io"
	"strings"
	"testing"
)

func TestParseResponse(t *testing.T) {
	tests := []struct {
		name, line, id, result string
		ok                     bool
	}{
		{"mcp-go layout", `{"jsonrpc":"2.0","id":4,"result":{"content":[]}}`, "4", `{"content":[]}`, true},
		{"mcp-go error", `{"jsonrpc":"2.0","id":5,"error":{"code":-32603,"message":"x"}}`, "5", "", true},
		{"ts layout", `{"result":{"content":[]},"jsonrpc":"2.0","id":7}`, "7", `{"content":[]}`, true},
		{"ts string id", `{"result":{"a":{"jsonrpc":"2.0","id":5}},"jsonrpc":"2.0","id":"mcp-confirm-x-3"}`, `"mcp-confirm-x-3"`, `{"a":{"jsonrpc":"2.0","id":5}}`, true},
		{"ts error", `{"jsonrpc":"2.0","id":8,"error":{"code":-32602,"message":"x"}}`, "8", "", true},
		{"ts odd id", `{"result":{},"jsonrpc":"2.0","id":"a\"b"}`, `"a\"b"`, "", true},
		{"string id", `{"jsonrpc":"2.0","id":"a-1","result":{}}`, `"a-1"`, `{}`, true},
		{"notification", `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t"}}`, "", "", false},
		{"server request", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, "", "", false},
		{"other notification order", `{"method":"notifications/message","jsonrpc":"2.0","params":{"id":3}}`, "", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id, result, ok := parseResponse([]byte(tt.line))
			if id != tt.id || string(result) != tt.result || ok != tt.ok {
				t.Errorf("got (%q, %q, %v), want (%q, %q, %v)", id, result, ok, tt.id, tt.result, tt.ok)
			}
		})
	}
}

// A result sliced out of the fast layout but followed by other fields is
// caught when validated, and read from the whole line instead.
func TestResultJSONFallsBackToFullDecode(t *testing.T) {
	line := []byte(`{"jsonrpc":"2.0","id":4,"result":{"content":[]},"extra":1}`)
	_, result, ok := parseResponse(line)
	if !ok {
		t.Fatal("not a response")
	}
	r := &wireResp{line: line, result: result}
	if got := string(r.resultJSON()); got != `{"content":[]}` {
		t.Errorf("result = %s", got)
	}
}

// The TypeScript layout with fields between the result and the tail: the
// slice is not one value, and the whole line is read instead.
func TestResultJSONFallsBackOnTSLayoutWithExtras(t *testing.T) {
	line := []byte(`{"result":{"content":[]},"extra":1,"jsonrpc":"2.0","id":4}`)
	_, result, ok := parseResponse(line)
	if !ok {
		t.Fatal("not a response")
	}
	r := &wireResp{line: line, result: result}
	if got := string(r.resultJSON()); got != `{"content":[]}` {
		t.Errorf("result = %s", got)
	}
}

func TestParseToolsCall(t *testing.T) {
	tp := newTap(1, "mcp-confirm-abc-", newLateQueue())
	modern := `{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"_meta":{"progressToken":"mcp-confirm-abc-3"},"arguments":{"progressToken":"evil"},"name":"x"}}`
	legacy := `{"jsonrpc":"2.0","id":13,"method":"tools/call","params":{"name":"x","arguments":{"progressToken":"evil"},"_meta":{"progressToken":"mcp-confirm-abc-4"}}}`
	other := `{"method":"tools/call","id":14,"jsonrpc":"2.0","params":{"_meta":{"progressToken":"mcp-confirm-abc-5"}}}`
	for _, tc := range []struct{ line, id, tok string }{
		{modern, "12", "mcp-confirm-abc-3"},
		{legacy, "13", "mcp-confirm-abc-4"},
		{other, "14", "mcp-confirm-abc-5"},
	} {
		id, tok, ok := tp.parseToolsCall([]byte(tc.line))
		if !ok || id != tc.id || tok != tc.tok {
			t.Errorf("%s: got (%q, %q, %v)", tc.line, id, tok, ok)
		}
	}
}

// BenchmarkTapLine is the tap's cost per round trip on mcp-go's layout: one
// outgoing tools/call and one incoming response for a tracked call.
func BenchmarkTapLine(b *testing.B) {
	tp := newTap(1, "mcp-confirm-abc-", newLateQueue())
	req := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"io.github.mcp-confirm/idempotency-key":"k","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"mcp-confirm","version":"dev"},"io.modelcontextprotocol/protocolVersion":"2026-07-28","progressToken":"mcp-confirm-abc-1"},"arguments":{"text":"hello"},"name":"echo"}}`)
	resp := []byte(`{"jsonrpc":"2.0","id":1,"result":{"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"fixture","version":"1.2.3"}},"content":[{"type":"text","text":"echo"}],"resultType":"complete","structuredContent":{"args":{"text":"hello"},"has_token":true,"meta_key":"k"}}}`)
	b.ReportAllocs()
	for b.Loop() {
		c := &wireCall{token: "mcp-confirm-abc-1", cancel: func(error) {}}
		tp.register(c)
		undo, commit := tp.outgoing(req)
		if commit == nil || undo == nil {
			b.Fatal("request not recognised")
		}
		commit()
		tp.incoming(resp)
		if c.reqs[0].resp == nil {
			b.Fatal("response not captured")
		}
		if json.RawMessage(c.reqs[0].resp.resultJSON()) == nil {
			b.Fatal("no result")
		}
		tp.finish(c, nil, nil, nil, nil, func() {})
	}
}

// chunks is a reader that returns its pieces one Read at a time, as a pipe
// may split lines anywhere.
type chunks struct{ parts []string }

func (c *chunks) Read(p []byte) (int, error) {
	if len(c.parts) == 0 {
		return 0, io.EOF
	}
	n := copy(p, c.parts[0])
	if n < len(c.parts[0]) {
		c.parts[0] = c.parts[0][n:]
	} else {
		c.parts = c.parts[1:]
	}
	return n, nil
}

// The answer to a tracked tools/call is the tap's: mcp-go gets every other
// line, whole and in order, however the pipe split them; the line cut off
// by the end of the stream is not passed on (mcp-go would drop it too).
func TestTapReaderTakesOnlyOurAnswers(t *testing.T) {
	tp := newTap(1, "mcp-confirm-abc-", newLateQueue())
	c := &wireCall{token: "mcp-confirm-abc-1", cancel: func(error) {}}
	tp.register(c)
	req := `{"jsonrpc":"2.0","id":"mcp-confirm-abc-1","method":"tools/call","params":{"name":"x","arguments":{},"_meta":{"progressToken":"mcp-confirm-abc-1"}}}`
	if _, commit := tp.outgoing([]byte(req)); commit == nil {
		t.Fatal("request not recognised")
	}
	note := `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"mcp-confirm-abc-1","progress":1}}` + "\n"
	other := `{"jsonrpc":"2.0","id":3,"result":{"tools":[]}}` + "\n"
	ours := `{"jsonrpc":"2.0","id":"mcp-confirm-abc-1","result":{"content":[]}}` + "\n"
	stream := note + ours + other + `{"jsonrpc":"2.0","id":4`
	var eof bool
	r := &tapReader{t: tp, r: &chunks{parts: []string{stream[:10], stream[10:130], stream[130:131], stream[131:]}}, eof: func() { eof = true }}
	got, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != note+other {
		t.Errorf("mcp-go read:\n%s\nwant:\n%s", got, note+other)
	}
	if !eof {
		t.Error("the end of the stream was not reported")
	}
	select {
	case <-c.reqs[0].answered:
		if res := c.reqs[0].resp.resultJSON(); string(res) != `{"content":[]}` {
			t.Errorf("the tap's answer = %s", res)
		}
	default:
		t.Error("the answer did not reach the call")
	}
}

// A line longer than the tap buffers goes to mcp-go as it arrives,
// uninspected, and the lines after it are read as usual.
func TestTapReaderPassesOverlongLines(t *testing.T) {
	tp := newTap(1, "p-", newLateQueue())
	long := `{"jsonrpc":"2.0","method":"x","params":"` + strings.Repeat("a", maxLine) + `"}` + "\n"
	next := `{"jsonrpc":"2.0","id":1,"result":{}}` + "\n"
	r := &tapReader{t: tp, r: &chunks{parts: []string{long[:1000], long[1000:], next}}, eof: func() {}}
	got, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != long+next {
		t.Errorf("read %d bytes, want %d", len(got), len(long)+len(next))
	}
}

// appendString's fast path writes what encoding/json writes.
func TestAppendStringMatchesEncodingJSON(t *testing.T) {
	for _, s := range []string{"", "mcp-confirm-abc-12", "get_budget", `a"b`, `a\b`, "<x>&", "tab\there", "é", "\x7f", "\u2028"} {
		want, _ := json.Marshal(s)
		if got := appendString(nil, s); string(got) != string(want) {
			t.Errorf("appendString(%q) = %s, want %s", s, got, want)
		}
	}
}
