package guard

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/mcp-confirm/mcp-confirm/canonical"
	"github.com/mcp-confirm/mcp-confirm/mcpclient"
	"github.com/mcp-confirm/mcp-confirm/pending"
)

// RetryOptions tune an operator's retry.
type RetryOptions struct {
	Note string
	// AnyServer sends even when the server's name differs from the one the
	// call was made on; the override is recorded with the decision.
	AnyServer bool
	// Redacted supplies the values of redacted arguments, which the journal
	// never stored, nested as in the call ({"payment":{"card_number":…}});
	// with them the arguments' fingerprint must match the original call's.
	Redacted   map[string]any
	OnProgress func(mcpclient.Progress)
	// PastRetention sends even when the policy's key_retention for the
	// tool has passed since the call was made (the operator was told the
	// server may no longer recognise the key).
	PastRetention bool
}

// Retry resends a failed or unknown write with its own key, as a new
// attempt. The decision and the attempt are durable before anything is
// sent. This is the only way a write is ever sent a second time.
func (g *Guard) Retry(ctx context.Context, id int64, o RetryOptions) (Result, error) {
	c, err := g.j.Get(ctx, id)
	if err != nil {
		return Result{}, journalErr(err)
	}
	if !c.State.Allows(pending.EventRetry) {
		return Result{Call: c, State: c.State, Key: c.Key}, fmt.Errorf("%w: call %d is %s; only unknown or failed calls can be retried", ErrNotAllowed, id, c.State)
	}
	if c.Kind == pending.KindRead {
		return Result{}, fmt.Errorf("%w: call %d is a read", ErrNotAllowed, id)
	}
	tool, err := g.Tool(ctx, c.Tool)
	if err != nil {
		return Result{}, err
	}
	evidence, err := g.checkServer(c, o.AnyServer)
	if err != nil {
		return Result{Call: c, State: c.State, Key: c.Key}, err
	}
	// On the journal's clock, the one the call's time was stamped with.
	if now := g.j.Now(); !o.PastRetention {
		if left, ok := g.opts.Policy.KeyRetentionLeft(c, now); ok && left <= 0 {
			return Result{Call: c, State: c.State, Key: c.Key}, &KeyRetentionError{CallID: id,
				Retention: g.opts.Policy.KeyRetention(c.Tool), Since: now.Sub(c.CreatedAt)}
		}
	}
	keyArg := KeyArg(tool, g.opts.Policy.tool(tool.Name).KeyArg)
	args, err := restoreArgs(c, keyArg, o.Redacted, g.j.Seal)
	if err != nil {
		return Result{Call: c, State: c.State, Key: c.Key}, err
	}
	_, secrets := redact(args, g.opts.Policy.tool(tool.Name).Redact, keyArg)
	g.secrets.remember(sendingKey(tool.Name, c.Key), secrets)
	kind, src := g.Classify(tool)
	call, at, err := g.j.Retry(ctx, id, pending.RetryInput{
		Operator: g.opts.Operator, Note: o.Note, Evidence: evidence, Session: g.srv.Session(), Kind: kind, KindSource: src,
	})
	if err != nil {
		return Result{}, journalErr(err)
	}
	// resend: a call that already had its one automatic resend after a 404
	// does not get another on this retry.
	return g.send(ctx, &attempt{call: call, n: at.N, prior: c.State, resend: autoResent(c), tool: tool, keyArg: keyArg,
		args: args, onProgress: o.OnProgress})
}

// checkServer refuses a call made on another server unless overridden:
// another declared name, or another way of reaching it (the identity); the
// override becomes the decision's evidence.
func (g *Guard) checkServer(c pending.Call, anyServer bool) (json.RawMessage, error) {
	now := serverName(g.srv.ServerInfo())
	recorded, hasIdentity := ParseServerIdentity(c.ServerIdentity)
	sameIdentity := !hasIdentity || recorded.Same(g.opts.Server)
	if now == c.Server && sameIdentity {
		return nil, nil
	}
	if !anyServer {
		e := &ServerMismatchError{CallID: c.ID, Recorded: c.Server, Now: now}
		if !sameIdentity {
			e.RecordedIdentity, e.NowIdentity = recorded.String(), g.opts.Server.String()
		}
		return nil, e
	}
	ev := map[string]any{"any_server": true, "recorded_server": c.Server, "server": now}
	if !sameIdentity {
		ev["recorded_identity"], ev["identity"] = recorded.masked(), g.opts.Server.masked()
	}
	return json.Marshal(ev)
}

// restoreArgs rebuilds the arguments of a journaled call: the stored
// object, the operator's values for redacted fields at any depth, at the
// same path in redacted (checked against the fingerprint), and nothing else. The key argument is added by the session.
func restoreArgs(c pending.Call, keyArg string, redacted map[string]any, seal func(string) string) (map[string]any, error) {
	args, err := decodeObject(c.Args)
	if err != nil {
		return nil, fmt.Errorf("%w: call %d has unreadable arguments: %v", ErrUnavailable, c.ID, err)
	}
	var missing []string
	restoreRedacted(args, redacted, "", &missing)
	if len(missing) > 0 {
		sort.Strings(missing)
		return nil, badInput("call %d has redacted arguments (%s) that the journal never stored; give their values with --args, "+
			"nested as in the call (%s)", c.ID, strings.Join(missing, ", "), example(missing[0]))
	}
	if !sameOperation(c.Fingerprint, args, keyArg, seal) {
		return nil, badInput("the arguments rebuilt for call %d do not match its fingerprint; check the redacted values", c.ID)
	}
	return args, nil
}

// QueryOptions pick the read tool a query runs.
type QueryOptions struct {
	Tool string         // empty: the policy's query_tool for the call's tool
	Args map[string]any // with Tool: its arguments ({key} and {arg.NAME} expanded)
	Note string
	// AnyServer queries even when the server's name differs from the one
	// the call was made on (--any-server); the override is recorded in the
	// query's evidence.
	AnyServer bool
}

// Query runs a read tool to learn what became of a call, and stores its
// result as evidence with a proposed resolution. It never changes the
// call's state and never sends the write itself.
func (g *Guard) Query(ctx context.Context, id int64, o QueryOptions) (Result, error) {
	c, err := g.j.Get(ctx, id)
	if err != nil {
		return Result{}, journalErr(err)
	}
	return g.query(ctx, c, o, g.opts.Operator)
}

func (g *Guard) query(ctx context.Context, c pending.Call, o QueryOptions, operator string) (Result, error) {
	res, _, err := g.queryEvidence(ctx, c, o, operator)
	if err == nil {
		res.Call, _ = g.j.Get(ctx, c.ID)
	}
	return res, err
}

// queryEvidence is query, also giving the evidence it stored with the
// query decision (a mark that follows from it keeps the same); it does not
// read the call again, so res.Call is c.
func (g *Guard) queryEvidence(ctx context.Context, c pending.Call, o QueryOptions, operator string) (Result, json.RawMessage, error) {
	a, err := g.askQuery(ctx, c, o, operator)
	if err != nil {
		return a.res, nil, err
	}
	return g.keepQuery(ctx, a)
}

// queryAnswer is a query's answer before the journal keeps it.
type queryAnswer struct {
	c        pending.Call
	res      Result
	evidence json.RawMessage
	proposal string
	note     string
	operator string
}

// askQuery runs the query's read and makes its evidence; keepQuery keeps
// it. Apart, a bulk query need not hold a read back while the journal
// commits the last answer.
func (g *Guard) askQuery(ctx context.Context, c pending.Call, o QueryOptions, operator string) (queryAnswer, error) {
	tp := g.opts.Policy.tool(c.Tool)
	toolName, template := o.Tool, o.Args
	if toolName == "" {
		toolName, template = tp.QueryTool, tp.QueryArgs
	}
	if toolName == "" {
		return queryAnswer{}, &NoQueryError{Tool: c.Tool}
	}
	tool, err := g.Tool(ctx, toolName) // starts the session, so the server's name is known
	if err != nil {
		return queryAnswer{}, err
	}
	override, err := g.checkServer(c, o.AnyServer)
	if err != nil {
		return queryAnswer{}, err
	}
	if kind, _ := g.Classify(tool); kind != pending.KindRead {
		return queryAnswer{}, badInput("%s is classed as a write; a query must be a read tool (set kind = \"read\" in the policy if it is one)", toolName)
	}
	args, err := expandQueryArgs(template, c)
	if err != nil {
		return queryAnswer{}, err
	}
	res, err := g.read(ctx, tool.Name, Request{Args: args})
	if err != nil {
		return queryAnswer{res: res}, err
	}
	// The query's answer may name the call's redacted fields (an order
	// echoing its card number): masked by the call's rules and, where this
	// process sent the call, its values.
	mask := g.masker(c)
	res.Result, res.Error, o.Note = mask.json(res.Result), mask.json(res.Error), mask.text(o.Note)
	ev := map[string]any{"tool": tool.Name, "args": args, "result": res.Result, "error": res.Error}
	if override != nil {
		ev["server_override"] = override
	}
	evidence, _ := json.Marshal(ev)
	return queryAnswer{c: c, res: res, evidence: evidence, proposal: proposalFrom(res), note: o.Note, operator: operator}, nil
}

// keepQuery records a query's answer as a query decision, with its
// proposal.
func (g *Guard) keepQuery(ctx context.Context, a queryAnswer) (Result, json.RawMessage, error) {
	if err := g.j.Decide(context.WithoutCancel(ctx), a.c.ID, pending.DecisionInput{
		Action: pending.ActionQuery, Operator: a.operator, Note: a.note, Evidence: a.evidence, Proposal: a.proposal,
	}); err != nil {
		return Result{}, nil, journalErr(err)
	}
	res := a.res
	res.Call, res.Key = a.c, a.c.Key
	if a.proposal != "" {
		res.Call.Proposal = a.proposal
	}
	return res, a.evidence, nil
}

// Proposals a query can make. They are shown; only auto_resolve acts on
// "applied", and nothing ever acts on "not found" (that would be a resend).
const (
	ProposalApplied  = "applied: the query found it"
	ProposalNotFound = "not found: the query found nothing"
)

// proposalFrom reads a query result: a non-empty list anywhere in its
// structured content is a match ({"orders": [...]}); structured content
// without one is "not found"; an error or an unstructured answer proposes
// nothing. Deliberately narrow, because auto_resolve acts on "applied".
func proposalFrom(r Result) string {
	if r.State != pending.StateSucceeded || len(r.Result) == 0 {
		return ""
	}
	var v struct {
		StructuredContent any `json:"structuredContent"`
	}
	if json.Unmarshal(r.Result, &v) != nil || v.StructuredContent == nil {
		return ""
	}
	if found(v.StructuredContent) {
		return ProposalApplied
	}
	return ProposalNotFound
}

func found(v any) bool {
	switch x := v.(type) {
	case []any:
		return len(x) > 0
	case map[string]any:
		for _, e := range x {
			switch e.(type) {
			case []any, map[string]any:
				if found(e) {
					return true
				}
			}
		}
	}
	return false
}

var placeholder = regexp.MustCompile(`\{(key|arg\.[A-Za-z0-9_.-]+)\}`)

// expandQueryArgs fills {key} and {arg.NAME} in a query template. A value
// that is exactly one placeholder keeps the argument's JSON type.
func expandQueryArgs(template map[string]any, c pending.Call) (map[string]any, error) {
	// Numbers as written: a float64 would round an id like
	// 12345678901234567890 and query for another record.
	args, _ := decodeObject(c.Args)
	var missing []string
	lookup := func(name string) (any, bool) {
		if name == "key" {
			return c.Key, true
		}
		v, ok := args[strings.TrimPrefix(name, "arg.")]
		if s, _ := v.(string); s == Redacted {
			return nil, false
		}
		return v, ok
	}
	var expand func(v any) any
	expand = func(v any) any {
		switch x := v.(type) {
		case string:
			if m := placeholder.FindStringSubmatch(x); m != nil && m[0] == x {
				val, ok := lookup(m[1])
				if !ok {
					missing = append(missing, m[1])
				}
				return val
			}
			return placeholder.ReplaceAllStringFunc(x, func(p string) string {
				val, ok := lookup(p[1 : len(p)-1])
				if !ok {
					missing = append(missing, p)
				}
				return fmt.Sprint(val)
			})
		case map[string]any:
			out := make(map[string]any, len(x))
			for k, e := range x {
				out[k] = expand(e)
			}
			return out
		case []any:
			out := make([]any, len(x))
			for i, e := range x {
				out[i] = expand(e)
			}
			return out
		}
		return v
	}
	out, _ := expand(template).(map[string]any)
	if out == nil {
		out = map[string]any{}
	}
	if len(missing) > 0 {
		return nil, badInput("the query for call %d needs %s, which the call does not have (or is redacted)", c.ID, strings.Join(missing, ", "))
	}
	return out, nil
}

// autoQuery runs the configured query once when a write becomes unknown.
// It is a read, so it is safe; its failure is logged, not fatal. With
// auto_resolve and a definite match, the call is marked applied.
func (g *Guard) autoQuery(ctx context.Context, c pending.Call) {
	tp := g.opts.Policy.tool(c.Tool)
	if tp.QueryTool == "" {
		return
	}
	res, err := g.query(ctx, c, QueryOptions{}, "mcp-confirm (automatic query)")
	if err != nil {
		g.log.Warn("automatic query failed", "call", c.ID, "err", err)
		return
	}
	if tp.AutoResolve && proposalFrom(res) == ProposalApplied {
		err := g.j.Decide(ctx, c.ID, pending.DecisionInput{
			Action: pending.ActionMark, Operator: "mcp-confirm (auto_resolve)",
			Note: "the automatic query found the operation applied", Evidence: res.Result,
		})
		if err != nil && !errors.Is(err, pending.ErrIllegalTransition) {
			g.log.Warn("auto_resolve failed", "call", c.ID, "err", err)
		}
	}
}

// Abandon records that the operator gave up on an unknown call.
func (g *Guard) Abandon(ctx context.Context, id int64, note string) error {
	return journalErr(g.j.Decide(ctx, id, pending.DecisionInput{Action: pending.ActionAbandon, Operator: g.opts.Operator, Note: note}))
}

// MarkApplied records that the operator confirmed the call took effect.
func (g *Guard) MarkApplied(ctx context.Context, id int64, note string) error {
	return journalErr(g.j.Decide(ctx, id, pending.DecisionInput{Action: pending.ActionMark, Operator: g.opts.Operator, Note: note}))
}

// Note appends an operator's note to a call in any state.
func (g *Guard) Note(ctx context.Context, id int64, note string) error {
	if strings.TrimSpace(note) == "" {
		return badInput("the note is empty")
	}
	return journalErr(g.j.Decide(ctx, id, pending.DecisionInput{Action: pending.ActionNote, Operator: g.opts.Operator, Note: note}))
}

// handleSecond keeps a further answer to a request already answered: an
// event, and a conflict when it says something other than the answer the
// attempt was recorded with. The first answer stands either way.
func (g *Guard) handleSecond(lr mcpclient.LateResult) {
	ctx := context.Background()
	k := sendingKey(lr.Tool, lr.Key)
	g.sendMu.Lock()
	if st := g.sending[k]; st != nil && st.ids[wireID(lr.Session, lr.RPCID)] {
		st.early = append(st.early, lr) // its attempt's outcome is not recorded yet
		g.sendMu.Unlock()
		return
	}
	g.sendMu.Unlock()
	c, err := g.j.FindByKey(ctx, serverName(g.srv.ServerInfo()), lr.Tool, lr.Key)
	if err != nil {
		g.log.Warn("second answer for an unknown key", "tool", lr.Tool, "err", err)
		return
	}
	var a pending.Attempt
	for _, x := range c.Attempts {
		if x.Session == lr.Session && (x.RPCID == lr.RPCID || a.N == 0) {
			a = x
		}
	}
	_ = g.j.RecordEvent(ctx, pending.EventSecondAnswer, c.ID, g.masker(c).detail(answerDetail(a.N, lr)))
	if note := secondContradicts(a, lr); note != "" {
		if err := g.j.FlagConflict(ctx, c.ID, note); err != nil {
			g.log.Warn("flag conflict", "call", c.ID, "err", err)
		}
	}
}

// secondContradicts says how a second answer contradicts the outcome its
// attempt was recorded with, or "". An unusable second answer says nothing.
func secondContradicts(a pending.Attempt, lr mcpclient.LateResult) string {
	var ev pending.Event
	switch {
	case lr.Class == mcpclient.AnswerRPCError:
		ev = pending.EventFailed
	case lr.Class == mcpclient.AnswerResult && readSignals(lr.ResultJSON).isError:
		ev = pending.EventFailed
	case lr.Class == mcpclient.AnswerResult:
		ev = pending.EventSucceeded
	default:
		return ""
	}
	if a.Outcome != pending.OutcomeSucceeded && a.Outcome != pending.OutcomeFailed {
		return ""
	}
	if string(ev) != string(a.Outcome) {
		return fmt.Sprintf("attempt %d was answered twice: first %s, then %s", a.N, a.Outcome, ev)
	}
	if ev == pending.EventSucceeded && !sameJSON(a.Result, lr.ResultJSON) {
		return fmt.Sprintf("attempt %d was answered twice, with two different results", a.N)
	}
	return ""
}

func sameJSON(a, b json.RawMessage) bool {
	ca, errA := canonical.Transform(a)
	cb, errB := canonical.Transform(b)
	if errA != nil || errB != nil {
		return bytes.Equal(a, b)
	}
	return bytes.Equal(ca, cb)
}

// answerDetail is an answer kept as evidence in an event's detail.
func answerDetail(n int, lr mcpclient.LateResult) string {
	d := map[string]any{"attempt": n, "class": lr.Class, "after_cancel": lr.AfterCancel}
	if lr.ResultJSON != nil {
		d["result"] = lr.ResultJSON
	}
	if lr.RPCError != nil {
		d["error"] = lr.RPCError
	}
	if lr.Class == mcpclient.AnswerUnusable {
		d["why"], d["raw"], d["raw_truncated"] = lr.Why, string(lr.Raw), lr.RawTruncated
	}
	b, err := json.Marshal(d)
	if err != nil {
		delete(d, "result")
		b, _ = json.Marshal(d)
	}
	return string(b)
}

// Ack records that the operator has seen a call that settled late after
// its caller was told it was unknown; identical calls are sent again from
// then on (SPEC §9).
func (g *Guard) Ack(ctx context.Context, id int64, note string) error {
	return journalErr(g.j.Ack(ctx, id, g.opts.Operator, note))
}

// HandleLateResult records an answer that arrived after its attempt ended
// unknown (wire it to mcpclient.Options.OnLateResult). It never sends. The
// call's caller had been told it was unknown by then, so a result that
// settles the call starts the late-settle hold.
func (g *Guard) HandleLateResult(lr mcpclient.LateResult) { g.handleLate(lr, true) }

// handleLate records a late answer; told says whether the call's caller had
// already been told the call was unknown (false for an answer that came
// while send was still recording the outcome: send returns it itself).
func (g *Guard) handleLate(lr mcpclient.LateResult, told bool) {
	if lr.Second {
		g.handleSecond(lr)
		return
	}
	ctx := context.Background()
	k := sendingKey(lr.Tool, lr.Key)
	var c pending.Call
	n := 0
	// Twice at most: an attempt this process is sending may have its
	// outcome recorded between the journal read and the look at g.sending.
	for try := 0; ; try++ {
		var err error
		c, err = g.j.FindByKey(ctx, serverName(g.srv.ServerInfo()), lr.Tool, lr.Key)
		if err != nil {
			g.log.Warn("late result for an unknown key", "tool", lr.Tool, "err", err)
			return
		}
		n = 0
		for _, a := range c.Attempts {
			if a.Outcome == pending.OutcomeUnknown && a.Session == lr.Session {
				n = a.N // the latest unknown attempt on that session
			}
		}
		g.sendMu.Lock()
		st := g.sending[k]
		if st != nil && (n == 0 || st.ids[wireID(lr.Session, lr.RPCID)]) {
			// The answer to the attempt being sent, come before its
			// outcome is recorded: send records it right after.
			st.early = append(st.early, lr)
			g.sendMu.Unlock()
			return
		}
		g.sendMu.Unlock()
		if n != 0 || try == 1 {
			break
		}
	}
	if n == 0 {
		g.log.Warn("late result matches no unknown attempt", "call", c.ID, "session", lr.Session)
		return
	}
	mask := g.masker(c)
	if lr.Class == mcpclient.AnswerUnusable || (lr.ResultJSON == nil && lr.RPCError == nil) {
		// Not a usable answer: evidence, never an outcome (SPEC §9).
		_ = g.j.RecordEvent(ctx, pending.EventUnusableAnswer, c.ID, mask.detail(answerDetail(n, lr)))
		return
	}
	var o pending.Outcome
	switch {
	case lr.RPCError != nil && lr.AfterCancel:
		// The answer to a cancel, not to the work: evidence only.
		detail, _ := json.Marshal(map[string]any{"attempt": n, "error": lr.RPCError, "after_cancel": true})
		_ = g.j.RecordEvent(ctx, pending.EventCancelAnswer, c.ID, mask.detail(string(detail)))
		return
	case lr.RPCError != nil:
		e, _ := json.Marshal(lr.RPCError)
		o = pending.Outcome{Event: pending.EventFailed, Error: e}
	default:
		sig := readSignals(lr.ResultJSON)
		switch {
		case sig.inProgress:
			_ = g.j.RecordEvent(ctx, pending.EventLateResult, c.ID, "late answer: server reports in progress")
			return
		case sig.isError && lr.AfterCancel:
			// A tool error that answers our cancel ("stopped", "context
			// canceled") says how the handler ended after we asked it to,
			// not that the work never took effect: a handler may commit and
			// then see the cancel. Evidence only; the call stays unknown.
			detail, _ := json.Marshal(map[string]any{"attempt": n, "result": lr.ResultJSON, "after_cancel": true})
			_ = g.j.RecordEvent(ctx, pending.EventCancelAnswer, c.ID, mask.detail(string(detail)))
			return
		case sig.isError:
			o = pending.Outcome{Event: pending.EventFailed, Result: lr.ResultJSON}
		default:
			o = pending.Outcome{Event: pending.EventSucceeded, Result: lr.ResultJSON}
		}
	}
	o = mask.outcome(o)
	o.CallerToldUnknown = told
	if err := g.j.RecordLateResult(ctx, c.ID, n, o); err != nil {
		g.log.Warn("record late result", "call", c.ID, "err", err)
		return
	}
	if told && g.opts.Notify != nil {
		if settled, err := g.j.Get(ctx, c.ID); err == nil && settled.State != pending.StateUnknown {
			g.opts.Notify(NoticeLateSettled, settled)
		}
	}
}
