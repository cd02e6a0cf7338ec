package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/mcp-confirm/mcp-confirm/guard"
	"github.com/mcp-confirm/mcp-confirm/termtext"
)

type retryFlags struct {
	note, redacted string
	anyServer      bool
	pastRetention  bool
}

func (c *cli) retryCommand() *cobra.Command {
	var f retryFlags
	cmd := c.leaf(&cobra.Command{
		Use:   "retry ID",
		Short: "send a call once more, with the same idempotency key",
		Long: `Send call ID once more with the key it was first sent with, so a server that
honours keys does it at most once. Only for a call that is unknown or failed;
the decision is kept in the journal with --note.`,
		Example: `  mcp-confirm retry 17 --note "the shop says no order 17"
  mcp-confirm retry 17 --args '{"card":"4111..."}'   # values of redacted arguments`,
	}, "decide", withServer, func(pos []string) int { return runRetry(c.ctx, c.env, &c.g, f, pos) })
	fl := cmd.Flags()
	fl.StringVar(&f.note, "note", "", "why you retry (kept with the decision)")
	fl.BoolVar(&f.anyServer, "any-server", false, "send even if the server's name differs from the call's (recorded)")
	fl.StringVar(&f.redacted, "args", "", "values of redacted arguments, as a JSON object")
	fl.BoolVar(&f.pastRetention, "past-retention", false, "retry even though the policy's key_retention has passed (the server may have forgotten the key)")
	cmd.ValidArgsFunction = c.completeCalls(decidable)
	return cmd
}

func runRetry(ctx context.Context, e *env, g *globalOpts, f retryFlags, pos []string) int {
	id, ok := callIDArg("retry", pos, e, 0)
	if !ok {
		return exitBadInput
	}
	values, err := readArgs(e, f.redacted, "")
	if err != nil {
		fmt.Fprintf(e.stderr, "mcp-confirm retry: %v\nNothing was sent.\n", err)
		return exitBadInput
	}
	en, code := openEngine(ctx, e, g, "retry", id)
	if en == nil {
		return code
	}
	defer en.close()
	res, err := en.guard.Retry(ctx, id, guard.RetryOptions{Note: f.note, AnyServer: f.anyServer, Redacted: values, PastRetention: f.pastRetention})
	res = settledMeanwhile(ctx, e, "retry", en.journal, res, err)
	if err == nil {
		printResult(e, res, 0)
	}
	return exitFor(e, g, "retry", res, err)
}

type compensateFlags struct {
	note string
}

func (c *cli) compensateCommand() *cobra.Command {
	var f compensateFlags
	cmd := c.leaf(&cobra.Command{
		Use:   "compensate ID",
		Short: "undo a call with the policy's cancel_tool, as a guarded write of its own",
		Long: `Undo call ID by calling the cancel_tool the policy names for its tool, with
its cancel_args ({key} and {arg.NAME} filled in from call ID). The decision is
recorded on call ID first; the cancel is then a new write with its own key,
journaled before it is sent and linked to call ID, and never resent on its own.
For a call that succeeded, was marked applied, is unknown or was abandoned.
Exit codes are those of call, for the cancel.`,
		Example: `  mcp-confirm compensate 17 --note "duplicate order, customer asked"`,
	}, "decide", withServer, func(pos []string) int { return runCompensate(c.ctx, c.env, &c.g, f, pos) })
	cmd.Flags().StringVar(&f.note, "note", "", "why you undo it (kept with the decision)")
	cmd.ValidArgsFunction = c.completeCalls(compensable)
	return cmd
}

func runCompensate(ctx context.Context, e *env, g *globalOpts, f compensateFlags, pos []string) int {
	id, ok := callIDArg("compensate", pos, e, 0)
	if !ok {
		return exitBadInput
	}
	en, code := openEngine(ctx, e, g, "compensate", id)
	if en == nil {
		return code
	}
	defer en.close()
	res, err := en.guard.Compensate(ctx, id, guard.CompensateOptions{Note: f.note})
	var held *guard.HeldError
	if errors.As(err, &held) {
		// exitFor's advice (--new) is for call; a cancel is held by the
		// identical cancel before it, which is decided first.
		printResult(e, res, held.CallID)
		fmt.Fprintf(e.stderr, "mcp-confirm compensate: held: cancel call %d with the same arguments is %s; nothing was sent.\n"+
			"Decide that call first ('%s show %d').\n", held.CallID, held.State, g.self(), held.CallID)
		return exitHeld
	}
	// Only the cancel's own result goes to stdout: a refusal carries call
	// ID itself, and {"id":17,"state":"succeeded"} would read as the undo.
	made := res.Call.ID != 0 && res.Call.Compensates == id
	if made {
		printResult(e, res, 0)
	}
	if err == nil && made {
		fmt.Fprintf(e.stderr, "Call %d (%s) was made to undo call %d: %s.\n", res.Call.ID, termtext.Name(res.Call.Tool), id, res.State)
	}
	return exitFor(e, g, "compensate", res, err)
}

type queryFlags struct {
	tool, args, note string
	anyServer        bool
}

func (c *cli) queryCommand() *cobra.Command {
	var f queryFlags
	cmd := c.leaf(&cobra.Command{
		Use:   "query ID [--tool READ_TOOL --args JSON]",
		Short: "ask the server whether a call took effect; the answer is kept as evidence",
		Long: `Run a read tool to find out what became of call ID: the policy's query_tool
for its tool, or the one given with --tool. The answer is kept with the call
as evidence, with a proposal; the call's state does not change until you
decide.`,
		Example: `  mcp-confirm query 17
  mcp-confirm query 17 --tool find_orders --args '{"idempotency_key":"{key}"}'`,
	}, "decide", withServer, func(pos []string) int { return runQuery(c.ctx, c.env, &c.g, f, pos) })
	fl := cmd.Flags()
	fl.StringVar(&f.tool, "tool", "", "the read tool to run (default: the policy's query_tool)")
	fl.StringVar(&f.args, "args", "", "its arguments as a JSON object; {key} and {arg.NAME} are filled in")
	fl.StringVar(&f.note, "note", "", "a note kept with the evidence")
	fl.BoolVar(&f.anyServer, "any-server", false, "query even if the server's name differs from the call's (recorded)")
	cmd.ValidArgsFunction = c.completeCalls(decidable)
	return cmd
}

func runQuery(ctx context.Context, e *env, g *globalOpts, f queryFlags, pos []string) int {
	id, ok := callIDArg("query", pos, e, 0)
	if !ok {
		return exitBadInput
	}
	if f.args != "" && f.tool == "" {
		fmt.Fprintln(e.stderr, "mcp-confirm query: --args needs --tool\nName the read tool to run with them.")
		return exitBadInput
	}
	values, err := readArgs(e, f.args, "")
	if err != nil {
		fmt.Fprintf(e.stderr, "mcp-confirm query: %v\nNothing was sent.\n", err)
		return exitBadInput
	}
	en, code := openEngine(ctx, e, g, "query", id)
	if en == nil {
		return code
	}
	defer en.close()
	res, err := en.guard.Query(ctx, id, guard.QueryOptions{Tool: f.tool, Args: values, Note: f.note, AnyServer: f.anyServer})
	if err != nil {
		return exitFor(e, g, "query", res, err)
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

// decisions are the journal-only decisions: they need no server, so none
// is started.
var decisions = map[string]func(g *guard.Guard, ctx context.Context, id int64, note string) error{
	"abandon": (*guard.Guard).Abandon,
	"mark":    (*guard.Guard).MarkApplied,
	"note":    (*guard.Guard).Note,
	"ack":     (*guard.Guard).Ack,
}

func (c *cli) decideCommand(name, args, short, example string) *cobra.Command {
	var note string
	cmd := c.leaf(&cobra.Command{Use: name + " " + args, Short: short, Example: example},
		"decide", journalOnly, func(pos []string) int { return runDecision(c.ctx, c.env, &c.g, name, note, pos) })
	cmd.Flags().StringVar(&note, "note", "", "why (kept with the decision)")
	which := decidable
	switch name {
	case "note":
		which = anyCall
	case "ack":
		which = settledLate
	}
	cmd.ValidArgsFunction = c.completeCalls(which)
	if name == "mark" {
		cmd.ValidArgsFunction = func(cmd *cobra.Command, args []string, word string) ([]string, cobra.ShellCompDirective) {
			if len(args) == 1 {
				return []string{"applied\tit took effect"}, cobra.ShellCompDirectiveNoFileComp
			}
			return c.completeCalls(decidable)(cmd, args, word)
		}
	}
	return cmd
}

// runDecision runs abandon, mark, note and ack.
func runDecision(ctx context.Context, e *env, g *globalOpts, cmd, note string, pos []string) int {
	extra := 0
	switch cmd {
	case "mark":
		extra = 1
	case "note":
		extra = -1 // the note's words
	}
	id, ok := callIDArg(cmd, pos, e, extra)
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
		if text == "" && note == "" {
			fmt.Fprintf(e.stderr, "mcp-confirm note: the note is empty\nExample: mcp-confirm note %d \"checked with finance\"\n", id)
			return exitBadInput
		}
		if text != "" {
			note = strings.TrimSpace(text + " " + note)
		}
	}
	j, code := openJournal(ctx, e, g)
	if j == nil {
		return code
	}
	defer j.Close()
	en := &engine{journal: j, guard: guard.New(j, nil, guard.Options{})}
	if err := decisions[cmd](en.guard, ctx, id, note); err != nil {
		return exitFor(e, g, cmd, guard.Result{}, err)
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
