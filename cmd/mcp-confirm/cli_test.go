package main

import (
	"strings"
	"testing"
)

// The command line's manners: every refusal is two lines on stderr with
// exit 2, and nothing is opened or sent.
func TestCommandLineRefusals(t *testing.T) {
	db := seedJournal(t)
	cases := []struct {
		name string
		args []string
		want string // in stderr
	}{
		{"typo of a command", []string{"lsit"}, "Did you mean 'list'?"},
		{"typo of a flag", []string{"list", "--limt", "3", "--db", db}, "did you mean --limit?"},
		{"a global the command does not use", []string{"list", "--timeout", "3s", "--db", db}, "--timeout does not apply to list"},
		{"timeout 0", []string{"call", "create_order", "--timeout", "0", "--db", db}, "--timeout must be more than 0"},
		{"negative timeout", []string{"--timeout", "-1s", "tools", "--db", db}, "--timeout must be more than 0"},
		{"bad duration", []string{"call", "x", "--timeout", "soon", "--db", db}, "invalid argument \"soon\""},
		{"limit 0", []string{"list", "--limit", "0", "--db", db}, "--limit must be at least 1"},
		{"limit -1", []string{"list", "--limit", "-1", "--db", db}, "--limit must be at least 1"},
		{"show two ids", []string{"show", "1", "2", "--db", db}, `unexpected argument "2"`},
		{"abandon with words", []string{"abandon", "1", "because", "--db", db}, `put a note in --note`},
		{"mark without applied", []string{"mark", "2", "--db", db}, "mark 2 applied"},
		{"empty --args", []string{"call", "create_order", "--args", "", "--db", db}, "--args is empty"},
		{"tui stray word", []string{"tui", "stray"}, `unexpected argument "stray"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, errOut, code := runIn(t, tc.args...)
			lines := strings.Count(strings.TrimSpace(errOut), "\n") + 1
			if code != exitBadInput || !strings.Contains(errOut, tc.want) || lines > 2 {
				t.Errorf("%v: exit %d, stderr %q; want exit %d, %q, at most 2 lines", tc.args, code, errOut, exitBadInput, tc.want)
			}
		})
	}
}

// A global flag means the same before and after the command name, and a
// command's own flag may come first too (the example: --log given
// before "proxy").
func TestFlagsBeforeOrAfterCommand(t *testing.T) {
	db := seedJournal(t)
	before, _, c1 := runIn(t, "--db", db, "--json", "list")
	after, _, c2 := runIn(t, "list", "--json", "--db", db)
	if c1 != 0 || c2 != 0 || before != after || !strings.HasPrefix(before, "[") {
		t.Fatalf("before: %d %q\nafter: %d %q", c1, before, c2, after)
	}
	out, errOut, code := runIn(t, "--db", db, "--log", "/dev/null", "proxy", "--help")
	if code != 0 || !strings.Contains(out, "--log string") {
		t.Fatalf("--log before proxy: %d %s %s", code, out, errOut)
	}
}

func TestCommandHelp(t *testing.T) {
	cases := []struct {
		args    []string
		want    []string
		notWant []string
	}{
		{[]string{"show", "--help"}, []string{"mcp-confirm show ID", "Examples:", "--db", "--json", "--policy"}, []string{"--timeout", "--url"}},
		{[]string{"mark", "--help"}, []string{"mcp-confirm mark ID applied", "--note"}, []string{"--json"}},
		{[]string{"note", "--help"}, []string{"mcp-confirm note ID TEXT"}, nil},
		{[]string{"call", "--help"}, []string{"call TOOL", "--no-validate", "--timeout", "Exit codes"}, nil},
		{[]string{"help", "retry"}, []string{"retry ID", "with the key it was first sent with"}, nil},
		{[]string{"tui", "--help"}, []string{"mcp-confirm tui"}, nil},
	}
	for _, tc := range cases {
		out, errOut, code := runIn(t, tc.args...)
		if code != 0 {
			t.Errorf("%v: exit %d, %s", tc.args, code, errOut)
		}
		for _, w := range tc.want {
			if !strings.Contains(out, w) {
				t.Errorf("%v: help lacks %q:\n%s", tc.args, w, out)
			}
		}
		for _, w := range tc.notWant {
			if strings.Contains(out, w) {
				t.Errorf("%v: help lists %q, which the command does not use:\n%s", tc.args, w, out)
			}
		}
	}
}

// TAB after retry offers the calls a retry can act on (unknown or failed),
// with tool, state and age; after show, any call; --state its values.
func TestCompletion(t *testing.T) {
	db := seedJournal(t) // call 1 abandoned, call 2 unknown
	out, _, code := runIn(t, "__complete", "--db", db, "retry", "")
	if code != 0 || !strings.Contains(out, "2\tcreate_order, unknown, ") || strings.Contains(out, "1\tcreate_order") {
		t.Fatalf("retry <TAB>: %d %q", code, out)
	}
	out, _, _ = runIn(t, "__complete", "show", "--db", db, "")
	if !strings.Contains(out, "1\tcreate_order, abandoned") || !strings.Contains(out, "2\tcreate_order, unknown") {
		t.Fatalf("show <TAB>: %q", out)
	}
	out, _, _ = runIn(t, "__complete", "list", "--state", "")
	if !strings.Contains(out, "unknown\n") || !strings.Contains(out, "in_flight\n") {
		t.Fatalf("--state <TAB>: %q", out)
	}
	for _, shell := range []string{"bash", "zsh", "fish"} {
		out, _, code := runIn(t, "completion", shell)
		if code != 0 || !strings.Contains(out, "__complete") {
			t.Errorf("completion %s: %d, %d bytes", shell, code, len(out))
		}
	}
}
