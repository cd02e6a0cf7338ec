package main

import (
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// globalOpts are the flags every command accepts, before or after its name.
type globalOpts struct {
	db      string
	policy  string
	timeout time.Duration
	json    bool
	config  string
	server  string
}

// valueFlags are the global flags that take a value; splitCommand needs them
// to tell "--db x list" (x is a value) from "list" (a command).
var valueFlags = map[string]bool{"db": true, "policy": true, "timeout": true, "config": true, "server": true}

// self is "mcp-confirm" with the journal and policy flags this command was
// given, so that a command printed as a hint works when pasted as is.
func (g *globalOpts) self() string {
	words := []string{"mcp-confirm"}
	if g.db != "" {
		words = append(words, "--db", shellQuote(g.db))
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

func splitCommand(args []string) (name string, rest, globals []string) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") || a == "-" {
			return a, args[i+1:], args[:i]
		}
		f := strings.TrimLeft(a, "-")
		if !strings.Contains(f, "=") && valueFlags[f] {
			i++ // skip the value
		}
	}
	return "", nil, args
}

func hasFlag(args []string, names ...string) bool {
	for _, a := range args {
		f := strings.TrimLeft(a, "-")
		for _, n := range names {
			if strings.HasPrefix(a, "-") && (f == n || f == n+"=true") {
				return true
			}
		}
	}
	return false
}

// newFlagSet makes a flag set for one command with the global flags already
// registered. Errors are reported by parseFlags, not by the flag package.
func newFlagSet(name string, g *globalOpts) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&g.db, "db", "", "journal file (else $MCP_CONFIRM_DB, else the XDG state dir)")
	fs.StringVar(&g.policy, "policy", "", "policy file (TOML)")
	fs.DurationVar(&g.timeout, "timeout", 0, "write timeout per attempt (default 30s)")
	fs.BoolVar(&g.json, "json", false, "machine-readable output")
	fs.StringVar(&g.config, "config", "", "mcpServers/servers JSON config file")
	fs.StringVar(&g.server, "server", "", "server name in --config")
	return fs
}

// parseFlags parses flags interspersed with positional arguments ("show 5
// --json" as well as "show --json 5") and returns the positionals. done is
// -1 to go on, or the exit code when parsing ended the command: 0 after
// --help, 2 after a bad flag (reported in two lines).
func parseFlags(fs *flag.FlagSet, args []string, e *env) (positional []string, done int) {
	for {
		if err := fs.Parse(args); err != nil {
			if err == flag.ErrHelp {
				printFlagHelp(e.stdout, fs)
				return nil, exitOK
			}
			fmt.Fprintf(e.stderr, "mcp-confirm %s: %v\nRun 'mcp-confirm %s --help' for its flags.\n", fs.Name(), err, fs.Name())
			return nil, exitBadInput
		}
		args = fs.Args()
		if len(args) == 0 {
			return positional, -1
		}
		positional = append(positional, args[0])
		args = args[1:]
	}
}

func printFlagHelp(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprintf(w, "Usage: mcp-confirm %s [flags]\n\nFlags:\n", fs.Name())
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fs.VisitAll(func(f *flag.Flag) {
		fmt.Fprintf(tw, "  --%s\t%s\n", f.Name, f.Usage)
	})
	tw.Flush()
}

func usage(w io.Writer) {
	fmt.Fprint(w, `mcp-confirm — an MCP host that never resends a write whose outcome is unknown.

Usage:
  mcp-confirm [flags] [COMMAND] [-- SERVER_COMMAND [ARGS...]]

Commands:
`)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "  (none), tui\tthe operator console\n")
	for _, name := range sortedCommandNames() {
		fmt.Fprintf(tw, "  %s\t%s\n", name, commands()[name].summary)
	}
	tw.Flush()
	fmt.Fprint(w, `
Global flags:
  --db PATH        journal file (else $MCP_CONFIRM_DB, else $XDG_STATE_HOME/mcp-confirm/journal.db)
  --policy FILE    policy file (TOML)
  --timeout DUR    write timeout per attempt (default 30s)
  --config FILE --server NAME   server from a mcpServers/servers JSON config
  --json           machine-readable output
  --help, --version

Exit codes: 0 ok/succeeded, 1 failed, 2 bad input, 3 unknown, 4 held, 5 server or journal unavailable.
`)
}
