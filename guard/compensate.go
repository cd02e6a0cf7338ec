package guard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/mcp-confirm/mcp-confirm/mcpclient"
	"github.com/mcp-confirm/mcp-confirm/pending"
)

// CompensateOptions tune an operator's compensation.
type CompensateOptions struct {
	Note       string
	OnProgress func(mcpclient.Progress)
}

// Compensate undoes call id with the policy's cancel_tool for its tool
// (issue 21): as payment APIs offer a cancel by key for exactly the case of
// a charge whose outcome is unknown. The operator's decision is recorded
// on the call first (pending.ActionCompensate, with the cancel's tool and
// arguments as evidence); then the cancel is made as a guarded write of its
// own, with its own key, its intent durable before it is sent and linked
// to the call it undoes (pending.Call.Compensates). A crash between the
// two leaves the decision without a cancel: nothing was sent, and the
// operator may compensate again. An identical cancel in flight or unknown
// holds a second one back, as any resend is held. The call keeps its
// state: the cancel's own outcome says whether it was undone. What is sent
// is CompensationPreview's tool and arguments; a refusal of the call (one
// the preview gives, or a server mismatch) returns it as it stands.
func (g *Guard) Compensate(ctx context.Context, id int64, o CompensateOptions) (Result, error) {
	c, err := g.j.Get(ctx, id)
	if err != nil {
		return Result{}, journalErr(err)
	}
	name, args, err := g.CompensationPreview(c)
	if err != nil {
		return Result{Call: c, State: c.State, Key: c.Key}, err
	}
	// A call already undone is not undone again: the second cancel would
	// at best fail, at worst (a cancel that is not idempotent) act twice.
	// A cancel still in flight or unknown holds an identical one as any
	// resend is held.
	for _, by := range c.CompensatedBy {
		if prev, err := g.j.Get(ctx, by); err == nil && (prev.State == pending.StateSucceeded || prev.State == pending.StateApplied) {
			return Result{Call: c, State: c.State, Key: c.Key}, fmt.Errorf("%w: call %d was already undone by call %d (%s); nothing was sent",
				ErrNotAllowed, id, by, prev.State)
		}
	}
	// The tool first: it starts the server, whose name checkServer reads.
	tool, err := g.Tool(ctx, name)
	if err != nil {
		return Result{}, err
	}
	if _, err := g.checkServer(c, false); err != nil {
		return Result{Call: c, State: c.State, Key: c.Key}, err
	}
	if kind, _ := g.Classify(tool); kind == pending.KindRead {
		return Result{}, fmt.Errorf("%w: cancel_tool %s is a read here; a compensation must be a guarded write (set kind = \"write\" for it in the policy)",
			ErrNotAllowed, tool.Name)
	}
	evidence, err := json.Marshal(map[string]any{"cancel_tool": tool.Name, "args": args})
	if err != nil {
		return Result{}, err
	}
	if err := g.j.Decide(ctx, id, pending.DecisionInput{Action: pending.ActionCompensate, Operator: g.opts.Operator,
		Note: o.Note, Evidence: evidence}); err != nil {
		return Result{Call: c, State: c.State, Key: c.Key}, journalErr(err)
	}
	res, err := g.Call(ctx, Request{Tool: tool.Name, Args: args, OnProgress: o.OnProgress, compensates: id})
	if err != nil && (res.Call.ID == 0 || errors.Is(err, ErrHeld)) {
		// No cancel was journaled (held by an identical one, refused as
		// bad input, the journal unavailable): nothing was sent. The log
		// says so beside the decision, so that it does not read as done.
		_ = g.j.Decide(context.WithoutCancel(ctx), id, pending.DecisionInput{Action: pending.ActionNote, Operator: g.opts.Operator,
			Note: "the compensation was not made, nothing was sent: " + mcpclient.MaskURLsIn(err.Error())})
	}
	return res, err
}

// CompensationPreview is the cancel that Compensate would make for c: the
// policy's cancel_tool for c's tool, and its cancel_args with {key} and
// {arg.NAME} filled in from c, as they will be sent (the cancel's own key
// is added when it is journaled). It sends and records nothing, and reads
// nothing but the policy, so a console may call it to draw a dialog or to
// say why c cannot be compensated: ErrNotAllowed for a read, a state that
// may not be compensated (pending.Compensable) or a tool with no
// cancel_tool; ErrBadInput for cancel_args that need what c lacks (an
// argument it does not have, or one the journal keeps redacted). Whether
// the server lists the cancel_tool, as a write, Compensate checks.
func (g *Guard) CompensationPreview(c pending.Call) (tool string, args map[string]any, err error) {
	if c.Kind == pending.KindRead {
		return "", nil, fmt.Errorf("%w: call %d is a read; there is nothing to undo", ErrNotAllowed, c.ID)
	}
	if !pending.Compensable(c.State) {
		return "", nil, fmt.Errorf("%w: call %d is %s; only a call that succeeded, was marked applied, is unknown or was abandoned can be compensated",
			ErrNotAllowed, c.ID, c.State)
	}
	tp := g.opts.Policy.tool(c.Tool)
	if tp.CancelTool == "" {
		return "", nil, fmt.Errorf("%w: the policy names no cancel_tool for %s; add one under [tools.%s]",
			ErrNotAllowed, c.Tool, c.Tool)
	}
	args, err = expandQueryArgs(tp.CancelArgs, c)
	if err != nil {
		return "", nil, badInput("cancel_args for %s: %v", c.Tool, err)
	}
	return tp.CancelTool, args, nil
}
