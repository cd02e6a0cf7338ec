package guard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/mcp-confirm/mcp-confirm/pending"
)

// NotFoundByQueryError refuses AcceptFound: the call's latest query did not
// find it (or it was never queried), so there is no finding to accept.
// Nothing was written.
type NotFoundByQueryError struct {
	CallID int64
	Why    string // what the latest query came to, in short
}

func (e *NotFoundByQueryError) Error() string {
	return fmt.Sprintf("not allowed: call %d has no query that found it (%s); nothing was marked", e.CallID, e.Why)
}
func (e *NotFoundByQueryError) Unwrap() error { return ErrNotAllowed }

// AcceptFound records "mark applied" on call id with the evidence of its
// latest query, when that query found it: what ReconcileOptions.ApplyFound
// records in the same step as the query, taken later, once an operator has
// read the finding (the console's bulk accept). The finding is read back
// from the journal, not taken from the caller, so a call queried again
// meanwhile with another answer is refused (*NotFoundByQueryError); one no
// longer unknown is refused by the journal (ErrNotAllowed wrapping
// pending.ErrIllegalTransition). Either way nothing is written. It returns
// the call as the journal has it after the mark, and the evidence in short
// (EvidenceSummary). An empty note gets one that names the finding.
func (g *Guard) AcceptFound(ctx context.Context, id int64, note string) (pending.Call, string, error) {
	c, err := g.j.Get(ctx, id)
	if err != nil {
		return pending.Call{}, "", journalErr(err)
	}
	var last *pending.Decision
	for i := range c.Decisions {
		if c.Decisions[i].Action == pending.ActionQuery {
			last = &c.Decisions[i]
		}
	}
	if last == nil {
		return c, "", &NotFoundByQueryError{CallID: id, Why: "never queried"}
	}
	res, ok := queryResultOf(last.Evidence)
	if !ok {
		return c, "", &NotFoundByQueryError{CallID: id, Why: "its latest query's evidence is not a query answer"}
	}
	summary := EvidenceSummary(res)
	if proposalFrom(res) != ProposalApplied {
		return c, summary, &NotFoundByQueryError{CallID: id, Why: "its latest query: " + summary}
	}
	if note == "" {
		note = "accepted in bulk: the query found it (" + summary + ")"
	}
	err = g.j.Decide(context.WithoutCancel(ctx), id, pending.DecisionInput{
		Action: pending.ActionMark, Operator: g.opts.Operator, Note: note, Evidence: last.Evidence,
	})
	if err != nil {
		if errors.Is(err, pending.ErrIllegalTransition) {
			if now, gerr := g.j.Get(ctx, id); gerr == nil {
				c = now
			}
		}
		return c, summary, journalErr(err)
	}
	c.State = pending.StateApplied
	return c, summary, nil
}

// queryResultOf is the read a query decision's evidence (askQuery's
// {"tool","args","result","error"}) kept, as the Result it came from.
func queryResultOf(evidence json.RawMessage) (Result, bool) {
	var ev struct {
		Tool   string          `json:"tool"`
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	if json.Unmarshal(evidence, &ev) != nil || ev.Tool == "" {
		return Result{}, false
	}
	r := Result{State: pending.StateSucceeded, Result: ev.Result}
	if isNullJSON(ev.Result) {
		r.Result = nil
	}
	if len(ev.Error) > 0 && !isNullJSON(ev.Error) {
		r.State, r.Error = pending.StateFailed, ev.Error
	}
	if r.State == pending.StateSucceeded && (r.Result == nil || readSignals(r.Result).isError) {
		r.State = pending.StateFailed
	}
	return r, true
}
