package mcpclient_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/mcp-confirm/mcp-confirm/mcpclient"
)

// nested is a result whose structuredContent nests n arrays deep, so that
// the result as a whole nests n+2 levels.
func nested(n int) string {
	return `{"content":[],"structuredContent":{"x":` + strings.Repeat("[", n) + strings.Repeat("]", n) + `}}`
}

// ClassifyResult takes a result as usable only when nothing about it is
// left to a decoder's leniency.
func TestClassifyResult(t *testing.T) {
	const (
		result   = mcpclient.AnswerResult
		unusable = mcpclient.AnswerUnusable
	)
	tests := []struct {
		name    string
		raw     string
		class   mcpclient.AnswerClass
		isError bool
		why     string // for unusable: a part of why
	}{
		{"empty object", `{}`, result, false, ""},
		{"content", `{"content":[{"type":"text","text":"ok"}]}`, result, false, ""},
		{"isError false", `{"content":[],"isError":false}`, result, false, ""},
		{"isError true", `{"content":[],"isError":true}`, result, true, ""},
		{"complete", `{"content":[],"resultType":"complete"}`, result, false, ""},
		{"whitespace", " \n{ \"isError\" : true ,\t\"content\" : [ ] }\r\n", result, true, ""},
		{"structured only", `{"structuredContent":{"isError":"no","content":1,"resultType":"task"}}`, result, false, ""},
		{"strings that look like members", `{"content":[{"type":"text","text":"\"isError\":\"x\", \\"}],"isError":true}`, result, true, ""},
		{"name spelled with escapes", `{"is\u0045rror":true,"content":[]}`, result, true, ""},
		{"resultType spelled with escapes", `{"resultType":"compl\u0065te"}`, result, false, ""},
		{"unknown members", `{"content":[],"_meta":{"isError":"x"},"extra":null}`, result, false, ""},
		{"depth 10000", nested(9998), result, false, ""},

		{"nothing", ``, unusable, false, "not valid JSON"},
		{"malformed", `{"content":[],}`, unusable, false, "not valid JSON"},
		{"cut", `{"content":[{"type":"te`, unusable, false, "not valid JSON"},
		{"two values", `{} {}`, unusable, false, "not valid JSON"},
		{"depth 10001", nested(9999), unusable, false, "nested too deep"},
		{"depth 20002", nested(20000), unusable, false, "nested too deep"},
		{"null", `null`, unusable, false, "result is null"},
		{"string", `"a string"`, unusable, false, "result is not an object"},
		{"number", `5`, unusable, false, "result is not an object"},
		{"array", `[{"content":[]}]`, unusable, false, "result is not an object"},
		{"input_required", `{"resultType":"input_required","inputRequests":{}}`, unusable, false, "input_required"},
		{"input_required with escapes", `{"resultType":"input\u005frequired"}`, unusable, false, "input_required"},
		{"task", `{"resultType":"task","task":{"taskId":"t"}}`, unusable, false, "task"},
		{"other resultType", `{"resultType":"partial"}`, unusable, false, `resultType "partial"`},
		{"resultType not a string", `{"resultType":1}`, unusable, false, "resultType 1"},
		{"isError a string", `{"content":[],"isError":"false"}`, unusable, false, "isError is not a boolean"},
		{"isError null", `{"content":[],"isError":null}`, unusable, false, "isError is not a boolean"},
		{"isError a number", `{"isError":0}`, unusable, false, "isError is not a boolean"},
		{"content a number", `{"content":5,"isError":true}`, unusable, false, "content is not an array"},
		{"content an object", `{"content":{"type":"text"}}`, unusable, false, "content is not an array"},
		{"content null", `{"content":null}`, unusable, false, "content is not an array"},
		{"isError twice", `{"isError":false,"isError":true}`, unusable, false, "isError appears twice"},
		{"isError twice, once escaped", `{"isError":false,"\u0069sError":true}`, unusable, false, "isError appears twice"},
		{"content twice", `{"content":[],"content":[]}`, unusable, false, "content appears twice"},
		// encoding/json matches member names case-insensitively: a reader
		// of the stored result would see isError true.
		{"isError in other case", `{"content":[],"IsError":true}`, unusable, false, `"IsError"`},
		{"isError beside its other case", `{"isError":false,"ISERROR":true}`, unusable, false, `"ISERROR"`},
		{"isError with a long s", `{"content":[],"i\u017fError":true}`, unusable, false, "would be read as"},
		{"Content", `{"Content":5}`, unusable, false, `"Content"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			class, isError, why := mcpclient.ClassifyResult(json.RawMessage(tt.raw))
			if class != tt.class || isError != tt.isError {
				t.Fatalf("ClassifyResult(%.80s) = %s, isError %v, %q; want %s, isError %v", tt.raw, class, isError, why, tt.class, tt.isError)
			}
			if class == unusable && (why == "" || !strings.Contains(why, tt.why)) {
				t.Errorf("why = %q, want it to say %q", why, tt.why)
			}
			if class != unusable && why != "" {
				t.Errorf("why = %q for a usable result", why)
			}
		})
	}
}

func BenchmarkClassifyResult(b *testing.B) {
	for _, bc := range []struct{ name, raw string }{
		{"small", `{"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"fixture","version":"1.2.3"}},"content":[{"type":"text","text":"echo"}],"resultType":"complete","structuredContent":{"args":{"text":"hello"},"has_token":true,"meta_key":"k"}}`},
		{"64KiB", `{"content":[{"type":"text","text":"` + strings.Repeat("lorem ipsum ", 64<<10/12) + `"}],"structuredContent":{"rows":[` + strings.Repeat(`{"id":1,"name":"x"},`, 100) + `{}]}}`},
	} {
		raw := json.RawMessage(bc.raw)
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(raw)))
			b.ReportAllocs()
			for b.Loop() {
				if class, _, _ := mcpclient.ClassifyResult(raw); class != mcpclient.AnswerResult {
					b.Fatal(class)
				}
			}
		})
	}
}
