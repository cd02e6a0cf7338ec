// Package toolschema reads the part of an MCP tool's input schema that
// mcp-confirm checks before it sends a call: the top-level properties in the
// server's order, which are required, whether others are refused, and each
// property's type, enum and bounds. Check says, one problem per line, why a
// set of arguments does not fit; the console's new-call editor and the CLI
// both use it, so a call is refused for the same reasons wherever it is
// typed.
//
// It is a leaf: it imports mcp-go, the standard library and termtext (to
// make names from the server safe to print), nothing of the console or the
// guard.
package toolschema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-confirm/mcp-confirm/termtext"
)

// Schema is the part of a tool's input schema mcp-confirm reads.
type Schema struct {
	// Order is every top-level property: the server's propertyOrder first,
	// then the others sorted by name.
	Order []string
	// Props is each property's schema as JSON reads it (numbers float64,
	// enums []any), never nil.
	Props map[string]map[string]any
	// Required are the properties the schema requires, as it lists them.
	Required []string
	// NoExtra: additionalProperties is false, so other names are refused.
	NoExtra bool
	// Unreadable: the tool's raw input schema is not a JSON schema object;
	// nothing else is known.
	Unreadable bool
}

// Of reads a tool's input schema, from its raw form when the server sent
// one, else from the parsed one.
func Of(t mcp.Tool) Schema {
	var s mcp.ToolInputSchema
	if len(t.RawInputSchema) > 0 {
		var a mcp.ToolArgumentsSchema
		if err := json.Unmarshal(t.RawInputSchema, &a); err != nil {
			return Schema{Props: map[string]map[string]any{}, Unreadable: true}
		}
		s = mcp.ToolInputSchema(a)
	} else {
		s = t.InputSchema
	}
	out := Schema{Props: map[string]map[string]any{}, Required: s.Required}
	// Through JSON, so a schema built in Go ([]string enums, int bounds)
	// reads like one that came over the wire.
	raw, _ := json.Marshal(s.Properties)
	var props map[string]any
	_ = json.Unmarshal(raw, &props)
	for name, p := range props {
		m, _ := p.(map[string]any)
		if m == nil {
			m = map[string]any{}
		}
		out.Props[name] = m
	}
	seen := map[string]bool{}
	for _, n := range s.PropertyOrder {
		if _, ok := out.Props[n]; ok && !seen[n] {
			out.Order, seen[n] = append(out.Order, n), true
		}
	}
	var rest []string
	for n := range out.Props {
		if !seen[n] {
			rest = append(rest, n)
		}
	}
	sort.Strings(rest)
	out.Order = append(out.Order, rest...)
	if b, ok := s.AdditionalProperties.(bool); ok && !b {
		out.NoExtra = true
	}
	return out
}

// Decode reads text as arguments: exactly one JSON object, its numbers
// kept as json.Number (so 10000000000000001 is not rounded). The error
// says what is wrong in one line, safe to print.
func Decode(text []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(text))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("not valid JSON: %s", termtext.Line(err.Error()))
	}
	if dec.More() {
		return nil, errors.New("not valid JSON: more than one value")
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("arguments must be a JSON object, not %s", jsonType(v))
	}
	return obj, nil
}

func jsonType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case []any:
		return "an array"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	}
	return "a number"
}

// Check lists why args do not fit t's input schema: a required property
// missing (the key argument keyArg excepted: mcp-confirm fills it), a name
// the schema refuses, a value of the wrong type, outside its enum or its
// bounds. Problems come sorted by property, one per entry, with the
// server's names made safe to print. No problems: nil.
//
// Numbers may be json.Number (Decode) or any Go number (json.Unmarshal's
// float64, a map built in Go).
func Check(t mcp.Tool, keyArg string, args map[string]any) []string {
	s := Of(t)
	var probs []string
	for _, r := range s.Required {
		if r == keyArg {
			continue
		}
		if _, ok := args[r]; !ok {
			probs = append(probs, fmt.Sprintf("%s is required", termtext.Line(r)))
		}
	}
	names := make([]string, 0, len(args))
	for n := range args {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		p, ok := s.Props[n]
		if !ok {
			if s.NoExtra {
				probs = append(probs, fmt.Sprintf("%s is not an argument of %s", termtext.Line(n), termtext.Name(t.Name)))
			}
			continue
		}
		if msg := CheckValue(args[n], p); msg != "" {
			probs = append(probs, termtext.Line(n)+" "+msg)
		}
	}
	return probs
}

// CheckValue says why v does not fit the property schema p ("must be a
// string", "must be one of …"), or "" when it fits. The text is safe to
// print.
func CheckValue(v any, p map[string]any) string {
	if e, ok := p["enum"].([]any); ok && len(e) > 0 {
		vs := canonJSON(v)
		found := slices.ContainsFunc(e, func(x any) bool { return canonJSON(x) == vs })
		if !found {
			var opts []string
			for _, x := range e {
				xs, _ := json.Marshal(x)
				opts = append(opts, string(xs))
			}
			return "must be one of " + termtext.Line(strings.Join(opts, ", "))
		}
	}
	typ, _ := p["type"].(string)
	switch typ {
	case "string":
		if _, ok := v.(string); !ok {
			return "must be a string"
		}
	case "number", "integer":
		f, ok := number(v)
		if !ok {
			return "must be a number"
		}
		if typ == "integer" && f != math.Trunc(f) {
			return "must be a whole number"
		}
		if m, ok := p["minimum"].(float64); ok && f < m {
			return fmt.Sprintf("must be at least %v", m)
		}
		if m, ok := p["maximum"].(float64); ok && f > m {
			return fmt.Sprintf("must be at most %v", m)
		}
	case "boolean":
		if _, ok := v.(bool); !ok {
			return "must be true or false"
		}
	case "array":
		if !isArray(v) {
			return "must be an array"
		}
	case "object":
		if _, ok := v.(map[string]any); !ok {
			return "must be an object"
		}
	}
	return ""
}

// number reads a JSON number however it was decoded.
func number(v any) (float64, bool) {
	switch n := v.(type) {
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	case float64:
		return n, !math.IsNaN(n) && !math.IsInf(n, 0)
	case float32:
		return float64(n), true
	case int:
		return float64(n), true
	case int8:
		return float64(n), true
	case int16:
		return float64(n), true
	case int32:
		return float64(n), true
	case int64:
		return float64(n), true
	case uint:
		return float64(n), true
	case uint8:
		return float64(n), true
	case uint16:
		return float64(n), true
	case uint32:
		return float64(n), true
	case uint64:
		return float64(n), true
	}
	return 0, false
}

func isArray(v any) bool {
	switch v.(type) {
	case []any, []string, []float64, []int, []map[string]any:
		return true
	}
	return false
}

// canonJSON is v as JSON, with numbers in one form, so that an enum's 1
// (float64 from the schema) matches an argument's 1 (json.Number "1" or
// "1.0", or an int).
func canonJSON(v any) string {
	if f, ok := number(v); ok {
		b, _ := json.Marshal(f)
		return string(b)
	}
	b, _ := json.Marshal(v)
	return string(b)
}
