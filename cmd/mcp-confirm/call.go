package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/spf13/cobra"

	"github.com/mcp-confirm/mcp-confirm/guard"
	"github.com/mcp-confirm/mcp-confirm/pending"
	"github.com/mcp-confirm/mcp-confirm/termtext"
	"github.com/mcp-confirm/mcp-confirm/toolschema"
)

// callFlags are call's own flags.
type callFlags struct {
	args, argsFile, key string
	argsGiven           bool // --args was given, even as ''
	isNew, noValidate   bool
}

func (c *cli) callCommand() *cobra.Command {
	var f callFlags
	cmd := c.leaf(&cobra.Command{
		Use:   "call TOOL [--args JSON | --args - | --args-file FILE] [-- SERVER_COMMAND [ARGS...]]",
		Short: "one guarded call: journaled before it is sent, never resent",
		Long: `Call one tool. A write gets an idempotency key and is committed to the journal
before it is sent; if its answer does not come it is unknown (exit 3), and it
is not sent again until you decide (query, retry, abandon).`,
		Example: `  mcp-confirm call create_order --args '{"item":"widget","quantity":2}'
  mcp-confirm --db j.db call create_order --args-file order.json -- node orders-server.js`,
	}, "calls", withServer, func(pos []string) int { return runCall(c.ctx, c.env, &c.g, f, pos) })
	fl := cmd.Flags()
	fl.StringVar(&f.args, "args", "", "the tool's arguments as a JSON object, or - to read them from stdin")
	fl.StringVar(&f.argsFile, "args-file", "", "read the arguments (a JSON object) from this file")
	fl.StringVar(&f.key, "key", "", "your own idempotency key (1-255 printable ASCII characters, no spaces)")
	fl.BoolVar(&f.isNew, "new", false, "a deliberately new operation: send even if an identical call is in flight or unknown")
	fl.BoolVar(&f.noValidate, "no-validate", false, "send even if the arguments do not match the tool's input schema")
	cmd.PreRun = func(cmd *cobra.Command, _ []string) { f.argsGiven = cmd.Flags().Changed("args") }
	cmd.ValidArgsFunction = cobra.NoFileCompletions
	return cmd
}

func runCall(ctx context.Context, e *env, g *globalOpts, f callFlags, pos []string) int {
	if len(pos) != 1 {
		fmt.Fprintf(e.stderr, "mcp-confirm call: give exactly one tool name (got %d)\nExample: mcp-confirm call create_order --args '{\"item\":\"widget\"}'\n", len(pos))
		return exitBadInput
	}
	if f.argsGiven && f.args == "" {
		fmt.Fprintln(e.stderr, "mcp-confirm call: --args is empty\nGive a JSON object, e.g. --args '{}' for no arguments; nothing was sent.")
		return exitBadInput
	}
	callArgs, err := readArgs(e, f.args, f.argsFile)
	if err != nil {
		fmt.Fprintf(e.stderr, "mcp-confirm call: %v\nGive the arguments as one JSON object; nothing was sent.\n", err)
		return exitBadInput
	}
	if f.key != "" {
		if err := guard.ValidateKey(f.key); err != nil {
			fmt.Fprintf(e.stderr, "mcp-confirm call: --key: %v\nNothing was sent.\n", err)
			return exitBadInput
		}
	}
	en, code := openEngine(ctx, e, g, "call", 0)
	if en == nil {
		return code
	}
	if code := checkCall(ctx, e, g, en, pos[0], callArgs, f.noValidate); code != exitOK {
		en.close()
		return code
	}
	res, err := en.guard.Call(ctx, guard.Request{Tool: pos[0], Args: callArgs, Key: f.key, New: f.isNew})
	// Closing the session lets an answer still on its way arrive and be
	// journaled; what the call came to is read once more after that.
	en.client.Close()
	res = settledMeanwhile(ctx, e, "call", en.journal, res, err)
	en.journal.Close()
	if err == nil || res.Call.ID != 0 {
		printResult(e, res, heldBy(err))
	}
	code = exitFor(e, g, "call", res, err)
	en.waitNotified() // the answer is out; the notification may still be on its way
	return code
}

// checkCall lists the server's tools (the guard keeps them, so the call
// lists none again), warns of policy sections that do not apply, and
// refuses arguments that do not fit the tool's input schema, as the
// console's editor does, unless noValidate. A refusal is exit 2 with
// nothing journaled or sent.
func checkCall(ctx context.Context, e *env, g *globalOpts, en *engine, tool string, args map[string]any, noValidate bool) int {
	tools, err := en.guard.ListTools(ctx)
	if err != nil {
		return exitFor(e, g, "call", guard.Result{}, err)
	}
	warnPolicy(e, "call", en.policy, tools)
	i := slices.IndexFunc(tools, func(t mcp.Tool) bool { return t.Name == tool })
	if i < 0 || noValidate {
		return exitOK // an unknown tool is the guard's to refuse, with its hint
	}
	keyArg := en.guard.KeyArg(tools[i])
	probs := toolschema.Check(tools[i], keyArg, args)
	if len(probs) == 0 {
		return exitOK
	}
	fmt.Fprintf(e.stderr, "mcp-confirm call: the arguments do not fit %s's input schema: %s\n"+
		"Fix them (mcp-confirm tools --json shows the schema), or pass --no-validate to send anyway; nothing was sent.\n",
		termtext.Name(tool), strings.Join(probs, "; "))
	return exitBadInput
}

// settledMeanwhile re-reads the call before it is reported, so that what
// is printed is what the journal says (guard.AsJournaled); an answer that
// arrived as the session closed and settled a call that was unknown is
// said to have done so, rather than "unknown".
func settledMeanwhile(ctx context.Context, e *env, cmd string, j *pending.Journal, res guard.Result, err error) guard.Result {
	if err != nil {
		return res
	}
	out := guard.AsJournaled(ctx, j, res)
	if res.State == pending.StateUnknown && (out.State == pending.StateSucceeded || out.State == pending.StateFailed) {
		fmt.Fprintf(e.stderr, "mcp-confirm %s: call %d's answer arrived as the session closed: it %s (nothing was resent).\n", cmd, out.Call.ID, out.State)
	}
	return out
}

// maxArgsBytes bounds the arguments read from stdin or a file: a mistaken
// "--args -" on a stream must not fill the memory.
const maxArgsBytes = 16 << 20

// readFileLimited reads a file of at most limit bytes.
func readFileLimited(path string, limit int) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, int64(limit)+1))
	if err != nil {
		return nil, err
	}
	if len(b) > limit {
		return nil, fmt.Errorf("%s is over the %d MiB limit", path, limit>>20)
	}
	return b, nil
}

// readArgs reads --args JSON, --args - (stdin) or --args-file F: one JSON
// object, nothing else.
func readArgs(e *env, inline, file string) (map[string]any, error) {
	var data []byte
	switch {
	case inline != "" && file != "":
		return nil, fmt.Errorf("give --args or --args-file, not both")
	case inline == "-":
		b, err := io.ReadAll(io.LimitReader(e.stdin, maxArgsBytes+1))
		if err != nil {
			return nil, fmt.Errorf("read arguments from stdin: %v", err)
		}
		if len(b) > maxArgsBytes {
			return nil, fmt.Errorf("the arguments on stdin are over the %d MiB limit", maxArgsBytes>>20)
		}
		data = b
	case inline != "":
		data = []byte(inline)
	case file != "":
		b, err := readFileLimited(file, maxArgsBytes)
		if err != nil {
			return nil, fmt.Errorf("--args-file: %v", err)
		}
		data = b
	default:
		return map[string]any{}, nil
	}
	obj, err := guard.DecodeObject(data)
	if err != nil {
		return nil, fmt.Errorf("--args: %v", err)
	}
	return obj, nil
}

// callOutput is what call, retry and query print (SPEC §4).
type callOutput struct {
	ID       int64           `json:"id,omitempty"`
	State    string          `json:"state"`
	Reason   string          `json:"reason,omitempty"`
	Key      string          `json:"key,omitempty"`
	Result   json.RawMessage `json:"result,omitempty"`
	Error    json.RawMessage `json:"error,omitempty"`
	Replayed bool            `json:"replayed,omitempty"`
	// ReplayedFrom: nothing was sent; this is the stored outcome of that
	// earlier identical call, which settled late (SPEC §9).
	ReplayedFrom int64 `json:"replayed_from,omitempty"`
	// Held: nothing was sent; the record printed is that of call HeldBy,
	// which is in flight or unknown (an identical call, or this key's).
	Held   bool  `json:"held,omitempty"`
	HeldBy int64 `json:"held_by,omitempty"`
}

// printResult prints what a call came to; heldBy, when not 0, is the open
// call that held it (the record printed is that call's).
func printResult(e *env, res guard.Result, heldBy int64) {
	out := callOutput{ID: res.Call.ID, State: string(res.State), Reason: res.Call.Reason, Key: res.Key,
		Result: res.Result, Error: res.Error, Replayed: res.Replayed, ReplayedFrom: res.ReplayedFrom,
		Held: heldBy != 0, HeldBy: heldBy}
	json.NewEncoder(inertJSON{e.stdout}).Encode(out)
}

// heldBy is the call that held this one back (exit 4), or 0.
func heldBy(err error) int64 {
	var held *guard.HeldError
	var pendingKey *guard.KeyPendingError
	switch {
	case errors.As(err, &held):
		return held.CallID
	case errors.As(err, &pendingKey):
		return pendingKey.CallID
	}
	return 0
}
