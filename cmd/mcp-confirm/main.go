// Command mcp-confirm is an MCP host that never resends a write call whose
// outcome is unknown. See README.md for usage; this file only parses the
// command line and dispatches to one file per command.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"syscall"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "0.1.0-dev"

// Exit codes, as documented in SPEC §4 and the README.
const (
	exitOK          = 0 // done; for `call`: succeeded
	exitFailed      = 1 // the server answered with a failure
	exitBadInput    = 2 // bad flags, arguments, call id, or a decision not allowed
	exitUnknown     = 3 // the outcome of a write is unknown
	exitHeld        = 4 // an identical call is in flight or unknown: nothing sent
	exitUnavailable = 5 // server or journal unavailable: nothing sent
)

// command is one sub-command. run gets the arguments after the command name
// (the part after a bare "--" is in env.serverCmd) and returns the exit code.
type command struct {
	summary string
	run     func(ctx context.Context, env *env, args []string) int
}

// env is what every command needs from the outside world; tests and main
// fill it differently.
type env struct {
	stdin     io.Reader
	stdout    io.Writer
	stderr    io.Writer
	serverCmd []string // words after a bare "--", if any
	getenv    func(string) string
}

func commands() map[string]command {
	return map[string]command{
		"call":        {"one guarded call: call TOOL --args JSON", runCall},
		"query":       {"run the query for a call and store the evidence", runQuery},
		"retry":       {"resend a call with the same key", runRetry},
		"abandon":     {"give up on a call (--note)", runAbandon},
		"mark":        {"mark ID applied: it took effect (--note)", runMark},
		"note":        {"add a note to a call", runNote},
		"ack":         {"ack ID: you have seen a call that settled late; identical calls are sent again", runAck},
		"list":        {"list calls, newest first", runList},
		"tools":       {"the server's tools, each with its kind (read/write) and why", runTools},
		"show":        {"one call with its attempts and decisions", runShow},
		"export":      {"every call, attempt and decision as jsonl or csv", runExport},
		"stats":       {"calls by tool and state, unknowns, retries, dedupe hits", runStats},
		"demo-server": {"the built-in orders server (MCP over stdio)", runDemoServer},
		"proxy":       {"stdio MCP proxy for hosts: guards tool calls on the way to the server after --", runProxy},
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], &env{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv})
	stop()
	os.Exit(code)
}

// run dispatches: leading global flags, then a command name, then the
// command's own arguments. A bare "--" ends mcp-confirm's arguments; what
// follows is the server command.
func run(ctx context.Context, args []string, e *env) int {
	for i, a := range args {
		if a == "--" {
			e.serverCmd = args[i+1:]
			args = args[:i]
			break
		}
	}
	// Find the command: the first word that is not a flag or a flag's value.
	name, rest, globals := splitCommand(args)
	switch name {
	case "":
		if hasFlag(globals, "version") {
			fmt.Fprintf(e.stdout, "mcp-confirm %s\n", version)
			return exitOK
		}
		if hasFlag(globals, "help", "h") {
			usage(e.stdout)
			return exitOK
		}
		return runConsole(ctx, e, globals)
	case "tui":
		return runConsole(ctx, e, append(globals, rest...))
	case "help":
		usage(e.stdout)
		return exitOK
	case "version":
		fmt.Fprintf(e.stdout, "mcp-confirm %s\n", version)
		return exitOK
	}
	cmd, ok := commands()[name]
	if !ok {
		fmt.Fprintf(e.stderr, "mcp-confirm: unknown command %q\nRun 'mcp-confirm --help' for the list of commands.\n", name)
		return exitBadInput
	}
	return cmd.run(ctx, e, append(globals, rest...))
}

func sortedCommandNames() []string {
	names := make([]string, 0, len(commands()))
	for n := range commands() {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
