package proxy

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-confirm/mcp-confirm/mcpclient"
)

// toolCallParams spells the _meta names out in struct tags; they must be
// the names the rest of the code (and mcp-go) use.
func TestToolCallParamsMetaNames(t *testing.T) {
	meta, _ := reflect.TypeOf(toolCallParams{}).FieldByName("Meta")
	for field, want := range map[string]string{
		"ProgressToken":   "progressToken",
		"Key":             mcpclient.KeyMetaField,
		"ProtocolVersion": mcp.MetaKeyProtocolVersion,
	} {
		f, ok := meta.Type.FieldByName(field)
		if !ok {
			t.Fatalf("no field %s", field)
		}
		if got := f.Tag.Get("json"); got != want {
			t.Errorf("%s is tagged %q, want %q", field, got, want)
		}
	}
}

// The one-pass read of a tools/call line gives what the general envelope
// and a separate decode of its params give; lines it does not take are
// left to the general path.
func TestDecodeToolCall(t *testing.T) {
	line := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"get_budget","arguments":{"buyer":"alice","n":1.50},"_meta":{"progressToken":"p1","io.github.mcp-confirm/idempotency-key":"k-1","io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"h","version":"1"}}}}`
	m, ok := decodeToolCall([]byte(line))
	if !ok {
		t.Fatal("a tools/call line was not taken")
	}
	var general message
	if err := json.Unmarshal([]byte(line), &general); err != nil {
		t.Fatal(err)
	}
	var want toolCallParams
	if err := json.Unmarshal(general.Params, &want); err != nil {
		t.Fatal(err)
	}
	if string(m.ID) != "7" || m.Method != "tools/call" || !reflect.DeepEqual(*m.toolCall, want) {
		t.Errorf("got id %s method %s params %+v, want %+v", m.ID, m.Method, *m.toolCall, want)
	}
	if string(m.toolCall.Arguments) != `{"buyer":"alice","n":1.50}` {
		t.Errorf("arguments not kept as written: %s", m.toolCall.Arguments)
	}
	for _, other := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":2,"method":"prompts/get","params":{"name":"tools/call"}}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":5}}`,
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":null}`,
		`{"jsonrpc":"2.0","id":5,"method":"tools/call"`,
	} {
		if _, ok := decodeToolCall([]byte(other)); ok {
			t.Errorf("took %s", other)
		}
	}
}

// A legacy server's result reaches a 2026-07-28 host with resultType
// added and everything else as the server wrote it.
func TestWithResultType(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"content":[{"type":"text","text":"<b>"}],"isError":false}`, `{"content":[{"type":"text","text":"<b>"}],"isError":false,"resultType":"complete"}`},
		{`{}`, `{"resultType":"complete"}`},
		{` { } `, `{ "resultType":"complete"}`},
		{`{"resultType":"complete","content":[]}`, `{"resultType":"complete","content":[]}`},
		{`{"result\u0054ype":"input_required"}`, `{"result\u0054ype":"input_required"}`},
		{`{"content":[{"text":"\u00e9"}]}`, `{"content":[{"text":"\u00e9"}],"resultType":"complete"}`},
		{`not json`, `not json`},
	} {
		if got := string(withResultType(json.RawMessage(tc.in))); got != tc.want {
			t.Errorf("withResultType(%s) = %s, want %s", tc.in, got, tc.want)
		}
	}
}
