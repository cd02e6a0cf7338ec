package guard

import (
	"fmt"
	"sort"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-confirm/mcp-confirm/internal/closest"
	"github.com/mcp-confirm/mcp-confirm/pending"
)

// PolicyProblem is one part of a policy that will not do what it says with
// this server's tools: a section for a tool the server does not list (its
// redact, kind and query never apply), a query_tool that is missing or is
// itself a write, a key_arg the tool does not take.
type PolicyProblem struct {
	Section string `json:"section"` // "tools.create_ordr"
	Problem string `json:"problem"` // what is wrong, in one sentence
	// Nearest is the tool or argument name the section most likely meant
	// ("create_order"), or "".
	Nearest string `json:"nearest,omitempty"`
	// Unlisted: the section is for a tool this server does not list. One
	// policy over several servers has sections for other servers' tools.
	Unlisted bool `json:"-"`
}

func (p PolicyProblem) String() string {
	s := fmt.Sprintf("[%s]: %s", p.Section, p.Problem)
	if p.Nearest != "" {
		s += fmt.Sprintf(" (did you mean %s?)", p.Nearest)
	}
	return s
}

// whyWrite says, by where a write's kind came from, why it is one.
var whyWrite = map[pending.KindSource]string{
	pending.KindFromPolicy:     "the policy says so",
	pending.KindFromAnnotation: "its readOnlyHint is false",
	pending.KindFromDefault:    "no readOnlyHint says it only reads",
}

// Check compares the policy with the server's tools. Names in problems are
// the policy's and the server's as written; callers make them safe to
// print.
func (p *Policy) Check(tools []mcp.Tool) []PolicyProblem {
	if p == nil {
		return nil
	}
	byName := make(map[string]mcp.Tool, len(tools))
	names := make([]string, 0, len(tools))
	for _, t := range tools {
		byName[t.Name] = t
		names = append(names, t.Name)
	}
	sections := make([]string, 0, len(p.Tools))
	for n := range p.Tools {
		sections = append(sections, n)
	}
	sort.Strings(sections)
	var out []PolicyProblem
	for _, name := range sections {
		tp, section := p.Tools[name], "tools."+name
		t, listed := byName[name]
		if !listed {
			near, _ := closest.Name(name, names)
			out = append(out, PolicyProblem{Section: section, Nearest: near, Unlisted: true,
				Problem: fmt.Sprintf("the server lists no tool %q, so this section never applies", name)})
		}
		if tp.QueryTool != "" {
			if q, ok := byName[tp.QueryTool]; !ok {
				near, _ := closest.Name(tp.QueryTool, names)
				out = append(out, PolicyProblem{Section: section, Nearest: near,
					Problem: fmt.Sprintf("query_tool %q is not a tool of the server", tp.QueryTool)})
			} else if kind, src := p.Classify(q); kind == pending.KindWrite {
				out = append(out, PolicyProblem{Section: section, Problem: fmt.Sprintf(
					"query_tool %q is a write (%s): a query must only read; say kind = \"read\" in [tools.%s] if it does",
					tp.QueryTool, whyWrite[src], tp.QueryTool)})
			}
		}
		if listed && tp.KeyArg != "" {
			props := schemaProperties(t)
			if _, ok := props[tp.KeyArg]; !ok && len(props) > 0 {
				args := make([]string, 0, len(props))
				for a := range props {
					args = append(args, a)
				}
				sort.Strings(args)
				near, _ := closest.Name(tp.KeyArg, args)
				out = append(out, PolicyProblem{Section: section, Nearest: near, Problem: fmt.Sprintf(
					"key_arg %q is not an argument of %s: the key would go where the server does not look", tp.KeyArg, name)})
			}
		}
	}
	return out
}
