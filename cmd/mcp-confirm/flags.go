package main

import (
	"strings"

	"github.com/mcp-confirm/mcp-confirm/pending"
)

// self is "mcp-confirm" with the journal and policy flags this command was
// given, so that a command printed as a hint works when pasted as is.
func (g *globalOpts) self() string {
	words := []string{"mcp-confirm"}
	if g.db != "" {
		words = append(words, "--db", shellQuote(pending.HidePassword(g.db)))
	}
	if g.policy != "" {
		words = append(words, "--policy", shellQuote(g.policy))
	}
	return strings.Join(words, " ")
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && !strings.ContainsAny(s, " \t\n'\"\\$`*?[]{}()<>|&;#~!") {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
