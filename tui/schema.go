package tui

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-confirm/mcp-confirm/guard"
)

// schema is the part of a tool's input schema the new-call editor uses:
// its top-level properties in the server's order, which are required, and
// whether others are refused.
type schema struct {
	Order      []string
	Props      map[string]map[string]any
	Required   []string
	NoExtra    bool
	Unreadable bool
}

func schemaProps(t mcp.Tool) map[string]map[string]any { return schemaOf(t).Props }

func schemaOf(t mcp.Tool) schema {
	var s mcp.ToolInputSchema
	if len(t.RawInputSchema) > 0 {
		var a mcp.ToolArgumentsSchema
		if err := json.Unmarshal(t.RawInputSchema, &a); err != nil {
			return schema{Props: map[string]map[string]any{}, Unreadable: true}
		}
		s = mcp.ToolInputSchema(a)
	} else {
		s = t.InputSchema
	}
	out := schema{Props: map[string]map[string]any{}, Required: s.Required}
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

// prefill is the editor's first text: every property but the key argument
// (mcp-confirm supplies the key), in the server's order, with a value of
// the right type (the first enum value, the minimum, an empty string),
// then the operator's overrides.
func prefill(t toolInfo, over map[string]any) string {
	s := schemaOf(t.Tool)
	var b bytes.Buffer
	b.WriteString("{\n")
	n := 0
	for _, name := range s.Order {
		if name == t.KeyArg {
			continue
		}
		v, ok := over[name]
		if !ok {
			v = exampleValue(s.Props[name])
		}
		k, _ := json.Marshal(name)
		val, _ := json.Marshal(v)
		if n > 0 {
			b.WriteString(",\n")
		}
		fmt.Fprintf(&b, "  %s: %s", k, val)
		n++
	}
	if n > 0 {
		b.WriteString("\n")
	}
	b.WriteString("}")
	lines := strings.Split(b.String(), "\n") // names and enum values come from the server
	for i := range lines {
		lines[i] = clean(lines[i])
	}
	return strings.Join(lines, "\n")
}

func exampleValue(p map[string]any) any {
	if e, ok := p["enum"].([]any); ok && len(e) > 0 {
		return e[0]
	}
	if d, ok := p["default"]; ok {
		return d
	}
	switch p["type"] {
	case "number", "integer":
		if m, ok := p["minimum"].(float64); ok {
			return m
		}
		return 0
	case "boolean":
		return false
	case "array":
		return []any{}
	case "object":
		return map[string]any{}
	}
	return ""
}

// validate checks the editor's text before anything is sent: one JSON
// object, required properties present, types, enums and bounds as the
// schema states them. It returns the arguments or the problems, one a line.
func validate(t toolInfo, text string) (map[string]any, []string) {
	args, err := guard.DecodeObject([]byte(text))
	if err != nil {
		return nil, []string{err.Error()}
	}
	s := schemaOf(t.Tool)
	var probs []string
	for _, r := range s.Required {
		if r == t.KeyArg {
			continue
		}
		if _, ok := args[r]; !ok {
			probs = append(probs, fmt.Sprintf("%s is required", clean(r)))
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
				probs = append(probs, fmt.Sprintf("%s is not an argument of %s", clean(n), displayName(t.Name)))
			}
			continue
		}
		if msg := checkValue(args[n], p); msg != "" {
			probs = append(probs, clean(n)+" "+msg)
		}
	}
	return args, probs
}

func checkValue(v any, p map[string]any) string {
	if e, ok := p["enum"].([]any); ok && len(e) > 0 {
		vs, _ := json.Marshal(v)
		found := slices.ContainsFunc(e, func(x any) bool { xs, _ := json.Marshal(x); return string(xs) == string(vs) })
		if !found {
			var opts []string
			for _, x := range e {
				xs, _ := json.Marshal(x)
				opts = append(opts, string(xs))
			}
			return "must be one of " + clean(strings.Join(opts, ", "))
		}
	}
	typ, _ := p["type"].(string)
	switch typ {
	case "string":
		if _, ok := v.(string); !ok {
			return "must be a string"
		}
	case "number", "integer":
		num, ok := v.(json.Number)
		if !ok {
			return "must be a number"
		}
		f, err := num.Float64()
		if err != nil {
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
		if _, ok := v.([]any); !ok {
			return "must be an array"
		}
	case "object":
		if _, ok := v.(map[string]any); !ok {
			return "must be an object"
		}
	}
	return ""
}

// argsSummary lists a tool's arguments for the tools screen: name, * when
// required, type and enum or bounds.
func argsSummary(t toolInfo) string {
	s := schemaOf(t.Tool)
	if s.Unreadable {
		return "(the input schema cannot be read)"
	}
	var parts []string
	for _, n := range s.Order {
		p := s.Props[n]
		item := clean(n)
		if slices.Contains(s.Required, n) {
			item += "*"
		}
		typ, _ := p["type"].(string)
		detail := clean(typ)
		if e, ok := p["enum"].([]any); ok {
			var opts []string
			for _, x := range e {
				opts = append(opts, clean(fmt.Sprint(x)))
			}
			detail += " " + strings.Join(opts, "|")
		}
		if m, ok := p["minimum"].(float64); ok {
			detail += fmt.Sprintf(" ≥%v", m)
		}
		if n == t.KeyArg {
			detail += ", the key argument: mcp-confirm fills it"
		}
		parts = append(parts, item+" ("+strings.TrimSpace(detail)+")")
	}
	if len(parts) == 0 {
		return "no arguments"
	}
	return strings.Join(parts, ", ")
}
