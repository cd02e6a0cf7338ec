package guard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/mcp-confirm/mcp-confirm/mcpclient"
	"github.com/mcp-confirm/mcp-confirm/pending"
	"github.com/mcp-confirm/mcp-confirm/termtext"
)

// Finding is what a reconciliation query came to for one call: the groups
// an operator accepts or works through (issue 21, "Reconciliation in bulk").
type Finding string

const (
	FindingFound       Finding = "found"               // the query found it: proposal "applied"
	FindingNotFound    Finding = "not found"           // the query found nothing
	FindingQueryFailed Finding = "query failed"        // no usable answer: the read failed, the server could not be reached, ...
	FindingNoQuery     Finding = "no query configured" // the policy names no query_tool for the call's tool
)

// Findings lists every finding in the order reports show them.
var Findings = []Finding{FindingFound, FindingNotFound, FindingQueryFailed, FindingNoQuery}

// Reconciled is one call after Reconcile.
type Reconciled struct {
	Call    pending.Call // as the journal has it after the query (and the mark)
	Finding Finding
	// Evidence is the query's answer in short, for a line of a report: the
	// full answer is kept with the query decision.
	Evidence string
	Err      error // why the query failed, when Finding is FindingQueryFailed
	// Applied: ReconcileOptions.ApplyFound marked the call applied now.
	Applied bool
	// AlreadyDecided: the call was no longer open to a mark when its turn
	// came (another process decided it meanwhile); nothing was marked.
	AlreadyDecided bool
}

// ReconcileOptions tune Reconcile.
type ReconcileOptions struct {
	// ApplyFound records "mark applied" for a found call still unknown,
	// with the query's evidence: the decision query and then mark would
	// record, taken in one step. Nothing else is ever decided: a call not
	// found stays unknown (acting on it would be a resend), and no call is
	// ever retried.
	ApplyFound bool
	Note       string // kept with the mark
}

// Reconcile queries what became of call c on this guard's server (its
// policy's query_tool, as Query runs it, storing the evidence) and sorts the
// answer into a Finding: ReconcileQuery, then Keep. It never sends the
// write. A failure to query is a finding, not an error: Reconcile returns
// one for every call it is given.
func (g *Guard) Reconcile(ctx context.Context, c pending.Call, o ReconcileOptions) Reconciled {
	return g.ReconcileQuery(ctx, c).Keep(ctx, o)
}

// Answer is a reconciliation query's answer that the journal does not
// keep yet: Keep keeps it. A bulk reconciliation runs its next query while
// the journal commits the answers before it.
type Answer struct {
	g      *Guard
	answer queryAnswer
	out    Reconciled // set when there is nothing to keep
	kept   bool
}

// ReconcileQuery runs the query for call c (its policy's query_tool) and
// returns the answer for Keep. c may come from a listing (Journal.List): a
// query is allowed in any state, and Keep's mark is refused, with nothing
// written, if the call was decided elsewhere meanwhile.
func (g *Guard) ReconcileQuery(ctx context.Context, c pending.Call) *Answer {
	a, err := g.askQuery(ctx, c, QueryOptions{}, g.opts.Operator)
	var noQuery *NoQueryError
	switch {
	case errors.As(err, &noQuery):
		return &Answer{out: Reconciled{Call: c, Finding: FindingNoQuery, Evidence: "no query_tool for " + termtext.Name(c.Tool) + " in the policy"}}
	case err != nil:
		return &Answer{out: Reconciled{Call: c, Finding: FindingQueryFailed, Err: err, Evidence: oneLineText(mcpclient.MaskURLsIn(err.Error()))}}
	}
	return &Answer{g: g, answer: a}
}

// Keep records the answer as the call's query decision (its evidence and
// proposal) and, with ApplyFound and a found call, marks it applied with
// that evidence. Keep it once.
func (a *Answer) Keep(ctx context.Context, o ReconcileOptions) Reconciled {
	if a.g == nil || a.kept {
		return a.out
	}
	a.kept = true
	g, c := a.g, a.answer.c
	res, evidence, err := g.keepQuery(ctx, a.answer)
	if err != nil {
		a.out = Reconciled{Call: c, Finding: FindingQueryFailed, Err: err, Evidence: oneLineText(mcpclient.MaskURLsIn(err.Error()))}
		return a.out
	}
	out := Reconciled{Call: res.Call, Evidence: EvidenceSummary(res)}
	switch proposalFrom(res) {
	case ProposalApplied:
		out.Finding = FindingFound
	case ProposalNotFound:
		out.Finding = FindingNotFound
	default:
		out.Finding = FindingQueryFailed
	}
	if out.Finding == FindingFound && o.ApplyFound {
		note := o.Note
		if note == "" {
			note = "reconcile: the query found it (" + out.Evidence + ")"
		}
		err = g.j.Decide(context.WithoutCancel(ctx), c.ID, pending.DecisionInput{
			Action: pending.ActionMark, Operator: g.opts.Operator, Note: note, Evidence: evidence,
		})
		switch {
		case errors.Is(err, pending.ErrIllegalTransition):
			out.AlreadyDecided = true
			if now, err := g.j.Get(ctx, c.ID); err == nil {
				out.Call = now
			}
		case err != nil:
			out.Err = journalErr(err)
		default:
			out.Applied = true
			out.Call.State = pending.StateApplied
		}
	}
	a.out = out
	return out
}

// EvidenceSummary is a query's answer in one short line: for structured
// content, each list with its length and the first item's id-like field
// ("orders: 1 (order_id 17)"); for an error, its message; else the text.
func EvidenceSummary(r Result) string {
	if r.State != pending.StateSucceeded {
		return "the read failed: " + readError(r)
	}
	var v struct {
		StructuredContent any `json:"structuredContent"`
		Content           []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	if json.Unmarshal(r.Result, &v) != nil {
		return "an answer that is not a tool result"
	}
	m, ok := v.StructuredContent.(map[string]any)
	if !ok {
		if len(v.Content) > 0 {
			return "no structured content: " + clip(oneLineText(v.Content[0].Text), 60)
		}
		return "no structured content"
	}
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	var parts []string
	for _, k := range names {
		list, ok := m[k].([]any)
		if !ok {
			continue
		}
		p := fmt.Sprintf("%s: %d", termtext.Name(k), len(list))
		if len(list) > 0 {
			if id := idOf(list[0]); id != "" {
				p += " (" + id + ")"
			}
		}
		parts = append(parts, p)
	}
	if len(parts) == 0 {
		return "no list in the answer"
	}
	return clip(strings.Join(parts, ", "), 100)
}

// idOf names the first field of an item that looks like its id.
func idOf(item any) string {
	m, ok := item.(map[string]any)
	if !ok {
		return ""
	}
	names := make([]string, 0, len(m))
	for k := range m {
		if k == "id" || strings.HasSuffix(k, "_id") || strings.HasSuffix(k, "Id") {
			names = append(names, k)
		}
	}
	if len(names) == 0 {
		return ""
	}
	sort.Strings(names)
	val := m[names[0]]
	if f, ok := val.(float64); ok && f == float64(int64(f)) {
		return fmt.Sprintf("%s %d", termtext.Name(names[0]), int64(f))
	}
	return termtext.Name(names[0]) + " " + clip(oneLineText(fmt.Sprint(val)), 40)
}

// readError is the message of a failed read's answer.
func readError(r Result) string {
	var e struct {
		Message string `json:"message"`
	}
	if len(r.Error) > 0 && json.Unmarshal(r.Error, &e) == nil && e.Message != "" {
		return clip(oneLineText(e.Message), 80)
	}
	var res struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	if json.Unmarshal(r.Result, &res) == nil && len(res.Content) > 0 {
		return clip(oneLineText(res.Content[0].Text), 80)
	}
	return "no message"
}

func oneLineText(s string) string { return strings.Join(strings.Fields(termtext.Line(s)), " ") }

func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
