package tui

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-confirm/mcp-confirm/toolschema"
)

// schemaProps is a tool's top-level properties by name.
func schemaProps(t mcp.Tool) map[string]map[string]any { return toolschema.Of(t).Props }

// prefill is the editor's first text: every property but the key argument
// (mcp-confirm supplies the key), in the server's order, with a value of
// the right type (the first enum value, the minimum, an empty string),
// then the operator's overrides.
func prefill(t toolInfo, over map[string]any) string {
	s := toolschema.Of(t.Tool)
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
// object that fits the tool's schema (toolschema.Check). It returns the
// arguments or the problems, one a line, safe to print.
func validate(t toolInfo, text string) (map[string]any, []string) {
	args, err := toolschema.Decode([]byte(text))
	if err != nil {
		return nil, []string{err.Error()}
	}
	return args, toolschema.Check(t.Tool, t.KeyArg, args)
}

// argsSummary lists a tool's arguments for the tools screen: name, * when
// required, type and enum or bounds.
func argsSummary(t toolInfo) string {
	s := toolschema.Of(t.Tool)
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
