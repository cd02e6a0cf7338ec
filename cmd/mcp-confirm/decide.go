package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/mcp-confirm/mcp-confirm/guard"
)

func runRetry(ctx context.Context, e *env, args []string) int {
	var g globalOpts
	fs := newFlagSet("retry", &g)
	note := fs.String("note", "", "why you retry (kept with the decision)")
	anyServer := fs.Bool("any-server", false, "send even if the server's name differs from the call's (recorded)")
	redacted := fs.String("args", "", "values of redacted arguments, as a JSON object")
	pos, done := parseFlags(fs, args, e)
	if done >= 0 {
		return done
	}
	id, ok := callIDArg("retry", pos, e)
	if !ok {
		return exitBadInput
	}
	values, err := readArgs(e, *redacted, "")
	if err != nil {
		fmt.Fprintf(e.stderr, "mcp-confirm retry: %v\nNothing was sent.\n", err)
		return exitBadInput
	}
	en, code := openEngine(ctx, e, &g, "retry", id)
	if en == nil {
		return code
	}
	defer en.close()
	res, err := en.guard.Retry(ctx, id, guard.RetryOptions{Note: *note, AnyServer: *anyServer, Redacted: values})
	if err == nil {
		printResult(e, res, 0)
	}
	return exitFor(e, &g, "retry", res, err)
}

func runQuery(ctx context.Context, e *env, args []string) int {
	var g globalOpts
	fs := newFlagSet("query", &g)
	tool := fs.String("tool", "", "the read tool to run (default: the policy's query_tool)")
	qargs := fs.String("args", "", "its arguments as a JSON object; {key} and {arg.NAME} are filled in")
	note := fs.String("note", "", "a note kept with the evidence")
	anyServer := fs.Bool("any-server", false, "query even if the server's name differs from the call's (recorded)")
	pos, done := parseFlags(fs, args, e)
	if done >= 0 {
		return done
	}
	id, ok := callIDArg("query", pos, e)
	if !ok {
		return exitBadInput
	}
	if *qargs != "" && *tool == "" {
		fmt.Fprintln(e.stderr, "mcp-confirm query: --args needs --tool\nName the read tool to run with them.")
		return exitBadInput
	}
	values, err := readArgs(e, *qargs, "")
	if err != nil {
		fmt.Fprintf(e.stderr, "mcp-confirm query: %v\nNothing was sent.\n", err)
		return exitBadInput
	}
	en, code := openEngine(ctx, e, &g, "query", id)
	if en == nil {
		return code
	}
	defer en.close()
	res, err := en.guard.Query(ctx, id, guard.QueryOptions{Tool: *tool, Args: values, Note: *note, AnyServer: *anyServer})
	if err != nil {
		return exitFor(e, &g, "query", res, err)
	}
	// Print the call's state, not the read's: a query never changes it, and
	// {"id":1,"state":"succeeded"} for a call that is still unknown would
	// tell a script the write went through. The read's own failure is the
	// exit code (1), and its answer is "result".
	out := res
	out.State = res.Call.State
	printResult(e, out, 0)
	if res.Call.Proposal != "" && res.Call.State == "unknown" {
		fmt.Fprintf(e.stderr, "Proposed: %s. Call %d stays unknown until you decide (retry, mark applied, abandon).\n", res.Call.Proposal, id)
	}
	if res.State == "failed" {
		return exitFailed
	}
	return exitOK
}

func runAbandon(ctx context.Context, e *env, args []string) int {
	return decide(ctx, e, args, "abandon", func(en *engine, id int64, note string) error {
		return en.guard.Abandon(ctx, id, note)
	})
}

func runMark(ctx context.Context, e *env, args []string) int {
	return decide(ctx, e, args, "mark", func(en *engine, id int64, note string) error {
		return en.guard.MarkApplied(ctx, id, note)
	})
}

func runNote(ctx context.Context, e *env, args []string) int {
	return decide(ctx, e, args, "note", func(en *engine, id int64, note string) error {
		return en.guard.Note(ctx, id, note)
	})
}

func runAck(ctx context.Context, e *env, args []string) int {
	return decide(ctx, e, args, "ack", func(en *engine, id int64, note string) error {
		return en.guard.Ack(ctx, id, note)
	})
}

// decide runs abandon, mark, note and ack: journal-only decisions that need no
// server, so none is started.
func decide(ctx context.Context, e *env, args []string, cmd string, do func(*engine, int64, string) error) int {
	var g globalOpts
	fs := newFlagSet(cmd, &g)
	note := fs.String("note", "", "why (kept with the decision)")
	pos, done := parseFlags(fs, args, e)
	if done >= 0 {
		return done
	}
	id, ok := callIDArg(cmd, pos, e)
	if !ok {
		return exitBadInput
	}
	rest := pos[1:]
	switch cmd {
	case "mark":
		if len(rest) != 1 || rest[0] != "applied" {
			fmt.Fprintf(e.stderr, "mcp-confirm mark: say what to mark: 'mcp-confirm mark %d applied [--note TEXT]'\n", id)
			return exitBadInput
		}
	case "note":
		text := strings.TrimSpace(strings.Join(rest, " "))
		if text == "" && *note == "" {
			fmt.Fprintf(e.stderr, "mcp-confirm note: the note is empty\nExample: mcp-confirm note %d \"checked with finance\"\n", id)
			return exitBadInput
		}
		if text != "" {
			*note = strings.TrimSpace(text + " " + *note)
		}
	default:
		if len(rest) > 0 {
			fmt.Fprintf(e.stderr, "mcp-confirm %s: unexpected argument %q\nPut the note in --note \"...\".\n", cmd, rest[0])
			return exitBadInput
		}
	}
	j, code := openJournal(ctx, e, &g)
	if j == nil {
		return code
	}
	defer j.Close()
	en := &engine{journal: j, guard: guard.New(j, nil, guard.Options{})}
	if err := do(en, id, *note); err != nil {
		return exitFor(e, &g, cmd, guard.Result{}, err)
	}
	c, err := j.Get(ctx, id)
	switch {
	case err != nil:
	case cmd == "ack":
		fmt.Fprintf(e.stdout, "call %d is %s, acknowledged: identical calls are sent again\n", c.ID, c.State)
	default:
		fmt.Fprintf(e.stdout, "call %d is %s\n", c.ID, c.State)
	}
	return exitOK
}
