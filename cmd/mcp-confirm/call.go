package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/mcp-confirm/mcp-confirm/guard"
	"github.com/mcp-confirm/mcp-confirm/pending"
)

func runCall(ctx context.Context, e *env, args []string) int {
	var g globalOpts
	fs := newFlagSet("call", &g)
	argsJSON := fs.String("args", "", "the tool's arguments as a JSON object, or - to read them from stdin")
	argsFile := fs.String("args-file", "", "read the arguments (a JSON object) from this file")
	key := fs.String("key", "", "your own idempotency key (1-255 printable ASCII characters, no spaces)")
	isNew := fs.Bool("new", false, "a deliberately new operation: send even if an identical call is in flight or unknown")
	pos, done := parseFlags(fs, args, e)
	if done >= 0 {
		return done
	}
	if len(pos) != 1 {
		fmt.Fprintf(e.stderr, "mcp-confirm call: give exactly one tool name (got %d)\nExample: mcp-confirm call create_order --args '{\"item\":\"widget\"}'\n", len(pos))
		return exitBadInput
	}
	callArgs, err := readArgs(e, *argsJSON, *argsFile)
	if err != nil {
		fmt.Fprintf(e.stderr, "mcp-confirm call: %v\nGive the arguments as one JSON object; nothing was sent.\n", err)
		return exitBadInput
	}
	if *key != "" {
		if err := guard.ValidateKey(*key); err != nil {
			fmt.Fprintf(e.stderr, "mcp-confirm call: --key: %v\nNothing was sent.\n", err)
			return exitBadInput
		}
	}
	en, code := openEngine(ctx, e, &g, "call", 0)
	if en == nil {
		return code
	}
	res, err := en.guard.Call(ctx, guard.Request{Tool: pos[0], Args: callArgs, Key: *key, New: *isNew})
	// Closing the session lets an answer still on its way arrive and be
	// journaled; what the call came to is read once more after that.
	en.client.Close()
	res = settledMeanwhile(ctx, e, en, res, err)
	en.journal.Close()
	if err == nil || res.Call.ID != 0 {
		printResult(e, res, heldBy(err))
	}
	return exitFor(e, &g, "call", res, err)
}

// settledMeanwhile re-reads a call that was unknown when Call returned: an
// answer that arrived as the session closed has settled it, and the
// caller is told that rather than "unknown".
func settledMeanwhile(ctx context.Context, e *env, en *engine, res guard.Result, err error) guard.Result {
	if err != nil || res.State != pending.StateUnknown || res.Call.ID == 0 {
		return res
	}
	c, gerr := en.journal.Get(ctx, res.Call.ID)
	if gerr != nil || (c.State != pending.StateSucceeded && c.State != pending.StateFailed) {
		return res
	}
	fmt.Fprintf(e.stderr, "mcp-confirm call: call %d's answer arrived as the session closed: it %s (nothing was resent).\n", c.ID, c.State)
	out := guard.Result{Call: c, State: c.State, Key: c.Key}
	for _, a := range c.Attempts {
		if a.Outcome == pending.OutcomeSucceeded || a.Outcome == pending.OutcomeFailed {
			out.Result, out.Error = a.Result, a.Error
		}
	}
	return out
}

// readArgs reads --args JSON, --args - (stdin) or --args-file F: one JSON
// object, nothing else.
func readArgs(e *env, inline, file string) (map[string]any, error) {
	var data []byte
	switch {
	case inline != "" && file != "":
		return nil, fmt.Errorf("give --args or --args-file, not both")
	case inline == "-":
		b, err := io.ReadAll(io.LimitReader(e.stdin, 16<<20))
		if err != nil {
			return nil, fmt.Errorf("read arguments from stdin: %v", err)
		}
		data = b
	case inline != "":
		data = []byte(inline)
	case file != "":
		b, err := os.ReadFile(file)
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
	json.NewEncoder(validUTF8{e.stdout}).Encode(out)
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
