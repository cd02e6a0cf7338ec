package toolschema

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

func ordersTool() mcp.Tool {
	return mcp.NewTool("create_order",
		mcp.WithString("item", mcp.Required(), mcp.Enum("widget", "gadget", "gizmo")),
		mcp.WithNumber("quantity", mcp.Required(), mcp.Min(1), mcp.Max(100)),
		mcp.WithString("buyer", mcp.Required()),
		mcp.WithString("idempotency_key", mcp.Required()),
		mcp.WithBoolean("gift"),
		mcp.WithArray("tags"),
		mcp.WithObject("address"))
}

// rawTool is a tool as a server sends it: the schema as JSON text.
func rawTool(name, schema string) mcp.Tool {
	return mcp.NewToolWithRawSchema(name, "", json.RawMessage(schema))
}

func TestOf(t *testing.T) {
	for _, tc := range []struct {
		name string
		tool mcp.Tool
		want Schema
	}{
		{"built in Go", mcp.NewTool("t", mcp.WithString("b", mcp.Required()), mcp.WithNumber("a", mcp.Min(2))),
			Schema{Order: []string{"a", "b"}, Required: []string{"b"},
				Props: map[string]map[string]any{"a": {"type": "number", "minimum": 2.0}, "b": {"type": "string"}}}},
		{"raw, in the server's order", rawTool("t", `{"type":"object","properties":{"z":{"type":"string"},"y":{},"x":{"enum":[1,2]}},"additionalProperties":false}`),
			Schema{Order: []string{"z", "y", "x"}, NoExtra: true,
				Props: map[string]map[string]any{"z": {"type": "string"}, "y": {}, "x": {"enum": []any{1.0, 2.0}}}}},
		{"raw, property not an object", rawTool("t", `{"type":"object","properties":{"p":true}}`),
			Schema{Order: []string{"p"}, Props: map[string]map[string]any{"p": {}}}},
		{"raw, additionalProperties true", rawTool("t", `{"type":"object","additionalProperties":true}`),
			Schema{Props: map[string]map[string]any{}}},
		{"raw, unreadable", rawTool("t", `["not", "a", "schema"]`),
			Schema{Props: map[string]map[string]any{}, Unreadable: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Of(tc.tool)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Of() =\n %#v\nwant\n %#v", got, tc.want)
			}
		})
	}
}

func TestDecode(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    map[string]any
		wantErr string
	}{
		{`{}`, map[string]any{}, ""},
		{` {"n": 10000000000000001, "s": "x"} `, map[string]any{"n": json.Number("10000000000000001"), "s": "x"}, ""},
		{``, nil, "not valid JSON: EOF"},
		{`{{`, nil, "not valid JSON: invalid character '{' looking for beginning of object key string"},
		{`{} {}`, nil, "not valid JSON: more than one value"},
		{`[1]`, nil, "arguments must be a JSON object, not an array"},
		{`null`, nil, "arguments must be a JSON object, not null"},
		{`"x"`, nil, "arguments must be a JSON object, not a string"},
		{`true`, nil, "arguments must be a JSON object, not a boolean"},
		{`3`, nil, "arguments must be a JSON object, not a number"},
		{"\x1b[2J", nil, `not valid JSON: invalid character '\x1b' looking for beginning of value`},
	} {
		got, err := Decode([]byte(tc.in))
		gotErr := ""
		if err != nil {
			gotErr = err.Error()
		}
		if gotErr != tc.wantErr || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Decode(%q) = %v, %q; want %v, %q", tc.in, got, gotErr, tc.want, tc.wantErr)
		}
	}
}

func TestCheck(t *testing.T) {
	ok := func(extra string) string {
		return `{"item": "widget", "quantity": 2, "buyer": "alice"` + extra + `}`
	}
	for _, tc := range []struct {
		name   string
		tool   mcp.Tool
		keyArg string
		args   string
		want   []string
	}{
		{"fits", ordersTool(), "idempotency_key", ok(""), nil},
		{"fits, every type", ordersTool(), "idempotency_key", ok(`, "gift": true, "tags": ["a"], "address": {"city": "x"}`), nil},
		{"key argument given anyway", ordersTool(), "idempotency_key", ok(`, "idempotency_key": "k"`), nil},
		{"missing, key argument excepted", ordersTool(), "idempotency_key", `{}`,
			[]string{"item is required", "quantity is required", "buyer is required"}},
		{"key argument required when it is not the key", ordersTool(), "", ok(""),
			[]string{"idempotency_key is required"}},
		{"below minimum", ordersTool(), "idempotency_key", `{"item": "widget", "quantity": 0, "buyer": "alice"}`,
			[]string{"quantity must be at least 1"}},
		{"above maximum", ordersTool(), "idempotency_key", `{"item": "widget", "quantity": 101, "buyer": "alice"}`,
			[]string{"quantity must be at most 100"}},
		{"not in enum", ordersTool(), "idempotency_key", `{"item": "sprocket", "quantity": 1, "buyer": "alice"}`,
			[]string{`item must be one of "widget", "gadget", "gizmo"`}},
		{"wrong types, sorted by name", ordersTool(), "idempotency_key",
			`{"item": "widget", "quantity": "2", "buyer": 7, "gift": "yes", "tags": "a", "address": []}`,
			[]string{"address must be an object", "buyer must be a string", "gift must be true or false", "quantity must be a number", "tags must be an array"}},
		{"unknown name allowed", ordersTool(), "idempotency_key", ok(`, "colour": "red"`), nil},
		{"unknown name refused", rawTool("t", `{"type":"object","properties":{"a":{}},"additionalProperties":false}`), "", `{"a": 1, "b": 2}`,
			[]string{"b is not an argument of t"}},
		{"integer", rawTool("t", `{"type":"object","properties":{"n":{"type":"integer"}}}`), "", `{"n": 1.5}`,
			[]string{"n must be a whole number"}},
		{"integer written 2.0", rawTool("t", `{"type":"object","properties":{"n":{"type":"integer"}}}`), "", `{"n": 2.0}`, nil},
		{"numeric enum", rawTool("t", `{"type":"object","properties":{"n":{"enum":[1,2]}}}`), "", `{"n": 1.0}`, nil},
		{"numeric enum, missed", rawTool("t", `{"type":"object","properties":{"n":{"enum":[1,2]}}}`), "", `{"n": 3}`,
			[]string{"n must be one of 1, 2"}},
		{"unreadable schema checks nothing", rawTool("t", `[]`), "", `{"a": 1}`, nil},
		// Names and enum values come from the server: shown inert.
		{"hostile names", rawTool("evil\x1b]0;t\x07", `{"type":"object","properties":{"a\u001b[2Jb":{"enum":["x\u001b]52;c;aGk=\u0007y"]}},"required":["r\u001b[31mq"],"additionalProperties":false}`), "",
			`{"a\u001b[2Jb": "z", "c\u202ed": 1}`,
			// JSON spells the enum's ESC and BEL as text (\u001b): inert.
			[]string{"rq is required", `ab must be one of "x\u001b]52;c;aGk=\u0007y"`, `cd is not an argument of evil\x1b]0;t\x07`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args, err := Decode([]byte(tc.args))
			if err != nil {
				t.Fatal(err)
			}
			got := Check(tc.tool, tc.keyArg, args)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Check() = %q, want %q", got, tc.want)
			}
			for _, p := range got {
				if strings.ContainsAny(p, "\x1b\x07\u202e") {
					t.Errorf("problem %q holds a control", p)
				}
			}
		})
	}
}

// Arguments built in Go, or decoded without UseNumber (a CLI reading a
// file with json.Unmarshal), are checked alike.
func TestCheckGoValues(t *testing.T) {
	for _, tc := range []struct {
		name string
		args map[string]any
		want []string
	}{
		{"float64", map[string]any{"item": "widget", "quantity": 2.0, "buyer": "a"}, nil},
		{"int", map[string]any{"item": "widget", "quantity": 2, "buyer": "a"}, nil},
		{"int below minimum", map[string]any{"item": "widget", "quantity": 0, "buyer": "a"}, []string{"quantity must be at least 1"}},
		{"[]string array", map[string]any{"item": "widget", "quantity": 2, "buyer": "a", "tags": []string{"x"}}, nil},
		{"nil map", nil, []string{"item is required", "quantity is required", "buyer is required"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Check(ordersTool(), "idempotency_key", tc.args); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Check() = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestCheckValue(t *testing.T) {
	for _, tc := range []struct {
		v    any
		p    map[string]any
		want string
	}{
		{"s", map[string]any{}, ""},
		{json.Number("5"), map[string]any{"type": "number", "minimum": 1.0, "maximum": 9.0}, ""},
		{json.Number("x"), map[string]any{"type": "number"}, "must be a number"},
		{json.Number("0.5"), map[string]any{"type": "integer"}, "must be a whole number"},
		{nil, map[string]any{"type": "string"}, "must be a string"},
		{false, map[string]any{"type": "boolean"}, ""},
		{"b", map[string]any{"enum": []any{"a", 1.0, nil}}, `must be one of "a", 1, null`},
		{nil, map[string]any{"enum": []any{"a", nil}}, ""},
	} {
		if got := CheckValue(tc.v, tc.p); got != tc.want {
			t.Errorf("CheckValue(%#v, %v) = %q, want %q", tc.v, tc.p, got, tc.want)
		}
	}
}
