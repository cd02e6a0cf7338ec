package proxy

import (
	"bytes"
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

// decodeToolCallReflect is what decodeToolCall replaced: encoding/json's
// decode of the whole line. It is the reference the one-pass read is held
// to.
func decodeToolCallReflect(line []byte) (m message, ok bool) {
	var tc struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params *toolCallParams `json:"params"`
	}
	if json.Unmarshal(line, &tc) != nil || tc.Method != string(mcp.MethodToolsCall) || tc.Params == nil {
		return message{}, false
	}
	return message{ID: tc.ID, Method: tc.Method, toolCall: tc.Params}, true
}

var toolCallLines = []string{
	`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"get_budget","arguments":{"buyer":"alice","n":1.50},"_meta":{"progressToken":"p1","io.github.mcp-confirm/idempotency-key":"k-1","io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"h","version":"1"}}}}`,
	// Spaces everywhere JSON allows them, members in another order,
	// strings that look like structure, a repeated key (the last wins).
	" { \"params\" : { \"_meta\" : { \"progressToken\" : 12 } , \"arguments\" : { \"s\" : \"}],{\\\"name\\\":\\\"x\\\"\" , \"a\" : [ 1 , { \"name\" : \"inner\" } ] } , \"name\" : \"first\" , \"name\" : \"echo\" } , \"method\" : \"tools/call\" , \"id\" : \"a-1\" } ",
	`{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{"name":"t","arguments":null,"_meta":null}}`,
	`{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"t","_meta":{"progressToken":null,"io.github.mcp-confirm/idempotency-key":5}}}`,
	`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"t","arguments":{"k":true,"e":"\u00e9\n","f":-1.5e+10}}}`,
	`{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"t","extra":{"deep":[[[{}]]]},"arguments":{}}}`,
	`{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"arguments":{"s":"a\\\"}"},"name":"echo","_meta":{"progressToken":"\\\\"}}}`,
}

// The one-pass read of a tools/call line gives what encoding/json gives;
// lines it does not take are left to the general path.
func TestDecodeToolCall(t *testing.T) {
	for _, line := range toolCallLines {
		m, ok := decodeToolCall([]byte(line))
		if !ok {
			t.Errorf("a tools/call line was not taken: %s", line)
			continue
		}
		want, _ := decodeToolCallReflect([]byte(line))
		if !sameToolCall(m, want) {
			t.Errorf("%s:\ngot  id %s params %+v\nwant id %s params %+v", line, m.ID, *m.toolCall, want.ID, *want.toolCall)
		}
	}
	m, _ := decodeToolCall([]byte(toolCallLines[0]))
	if string(m.toolCall.Arguments) != `{"buyer":"alice","n":1.50}` {
		t.Errorf("arguments not kept as written: %s", m.toolCall.Arguments)
	}
	for _, other := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":2,"method":"prompts/get","params":{"name":"tools/call"}}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":5}}`,
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":null}`,
		`{"jsonrpc":"2.0","id":5,"method":"tools/call"`,
		`{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"t","_meta":[]}}`,
		`["tools/call"]`,
		`"tools/call"`,
		// Escapes and case variants are the general path's to read.
		`{"jsonrpc":"2.0","id":7,"method":"tools\/call","params":{"name":"t"}}`,
		// encoding/json merges repeated objects: the general path's too.
		`{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"r","arguments":{"a":1}},"params":{"name":"r"}}`,
		`{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"name":"r","_meta":{"io.github.mcp-confirm/idempotency-key":"k"},"_meta":{}}}`,
		`{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"n\u0061me":"t"}}`,
		`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"caf\u00e9"}}`,
		"{\"jsonrpc\":\"2.0\",\"id\":10,\"method\":\"tools/call\",\"params\":{\"name\":\"\xff\"}}",
	} {
		if _, ok := decodeToolCall([]byte(other)); ok {
			t.Errorf("took %s", other)
		}
	}
}

func sameToolCall(a, b message) bool {
	return bytes.Equal(a.ID, b.ID) && a.Method == b.Method && reflect.DeepEqual(*a.toolCall, *b.toolCall)
}

// FuzzDecodeToolCall: whatever line the one-pass read takes, encoding/json
// takes too, with the same result. (The other way round is not needed: a
// line it declines goes the general way.)
//
//	go test -run '^$' -fuzz FuzzDecodeToolCall -fuzztime 60s ./proxy/
func FuzzDecodeToolCall(f *testing.F) {
	for _, line := range toolCallLines {
		f.Add([]byte(line))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		m, ok := decodeToolCall(line)
		if !ok {
			return
		}
		want, wok := decodeToolCallReflect(line)
		if wok && sameToolCall(m, want) {
			return
		}
		if caseVariantKeys(line) {
			t.Skip("encoding/json matches keys without regard to case; the one-pass read does not")
		}
		t.Fatalf("%q: one-pass %v %+v, encoding/json %v", line, ok, m, wok)
	})
}

// caseVariantKeys: the line spells one of the keys read in another case.
func caseVariantKeys(line []byte) bool {
	lower := bytes.ToLower(line)
	for _, k := range []string{"id", "method", "params", "name", "arguments", "_meta", "progressToken", mcpclient.KeyMetaField, mcp.MetaKeyProtocolVersion} {
		quoted := []byte(`"` + k + `"`)
		if bytes.Count(lower, bytes.ToLower(quoted)) != bytes.Count(line, quoted) {
			return true
		}
	}
	return false
}
