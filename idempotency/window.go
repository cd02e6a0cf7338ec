package idempotency

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/mcp-confirm/mcp-confirm/canonical"
)

// The dedupe window (SPEC §9) judges calls that arrive without a key: two
// identical keyless calls inside the window are taken for a resend, and the
// second is answered with the first one's result instead of running again.
// It is weaker than a key (two legitimate identical writes look like a
// resend), so it is off unless WithDedupeWindow turns it on, it never
// applies to a call with a key, and a caller who means a second identical
// write says so with MetaIntentionalRepeat or IntentionalRepeatArg.

const (
	// MetaDeduplicatedBy is "window" on an answer the dedupe window gave
	// instead of running the call: a replay of the first identical call's
	// result, or the in-progress answer while it runs.
	MetaDeduplicatedBy = "io.github.mcp-confirm/deduplicated-by"
	// MetaIntentionalRepeat true in a request's _meta lets a keyless call
	// through the dedupe window: the caller means a second identical write.
	MetaIntentionalRepeat = "io.github.mcp-confirm/intentional-repeat"
	// IntentionalRepeatArg is the tool argument that does the same as
	// MetaIntentionalRepeat when it is the boolean true. It is never part of
	// the window's fingerprint. A tool that takes it should list it in its
	// input schema.
	IntentionalRepeatArg = "intentional_repeat"
)

// windowKeyPrefix starts the store key of a window record. A caller's key
// never has a space (keyValue refuses it), so window records and keyed
// records share the table without ever meeting; windowKeyEnd is the first
// string after every key with the prefix, for range scans.
const (
	windowKeyPrefix = "window "
	windowKeyEnd    = "window!"
)

// purgeBatch bounds the expired window records one purge deletes, so the
// write that triggers it waits for a bounded amount of work.
const purgeBatch = 500

// Option is an optional behaviour given to New.
type Option func(*Middleware) error

// WithDedupeWindow makes the middleware judge calls that carry no key: a call
// identical to one that arrived less than d ago (same tool, same canonical
// arguments without IntentionalRepeatArg, same scope) is not executed; it is
// answered with the first call's stored result, marked replayed and
// deduplicated-by "window", or with the in-progress answer while the first
// still runs. The window runs from the first call's arrival; repeats do not
// extend it. Records live in the Store, so the window outlasts a restart and
// does not depend on the MCP session.
//
// It is right for a tool whose identical writes within d are never
// legitimate (one payment per invoice, one ticket per incident), and wrong
// where a client may really mean the same write twice, unless it is told to
// send MetaIntentionalRepeat then.
func WithDedupeWindow(d time.Duration, scope DedupeScope) Option {
	return func(m *Middleware) error {
		if d <= 0 {
			return fmt.Errorf("idempotency: the dedupe window must be longer than 0, not %v", d)
		}
		if scope.kind == scopeArg && scope.arg == "" {
			return errors.New("idempotency: a dedupe scope by argument needs the argument's name")
		}
		m.window, m.scope = d, scope
		m.purgeEvery = min(d, time.Minute)
		return nil
	}
}

// DedupeScope says what, besides the tool and its arguments, two keyless
// calls must share to be one call for the dedupe window. The zero value is
// ScopeNone.
type DedupeScope struct {
	kind scopeKind
	arg  string
}

type scopeKind uint8

const (
	scopeNone scopeKind = iota
	scopeClient
	scopeArg
)

var (
	// ScopeNone: the tool and its arguments only; identical calls from any
	// client, on any session, are one.
	ScopeNone = DedupeScope{}
	// ScopeClient: also the name the client declared in initialize
	// (clientInfo.name), so two programs that happen to send the same write
	// are not merged, while one client's resend on a new session still is.
	ScopeClient = DedupeScope{kind: scopeClient}
)

// ScopeArg scopes the window by the value of the tool argument name (a
// buyer, an account): the value is part of the fingerprint under its own
// name, absent counting as null. The arguments are in the fingerprint
// anyway, so this judges the same calls as ScopeNone; it states the scope,
// and keeps calls apart from those of a server configured with another one.
func ScopeArg(name string) DedupeScope { return DedupeScope{kind: scopeArg, arg: name} }

// ParseDedupeScope reads a scope as String writes it: "none", "client" or
// "arg:NAME".
func ParseDedupeScope(s string) (DedupeScope, error) {
	switch {
	case s == "none":
		return ScopeNone, nil
	case s == "client":
		return ScopeClient, nil
	case strings.HasPrefix(s, "arg:") && len(s) > len("arg:"):
		return ScopeArg(strings.TrimPrefix(s, "arg:")), nil
	}
	return DedupeScope{}, fmt.Errorf("dedupe scope %q: want none, client or arg:NAME", s)
}

// String is "none", "client" or "arg:NAME".
func (s DedupeScope) String() string {
	switch s.kind {
	case scopeClient:
		return "client"
	case scopeArg:
		return "arg:" + s.arg
	}
	return "none"
}

// windowFingerprint is the SHA-256 (hex) of the canonical JSON object
// {"args": A, "scope": S, "tool": T}: A the canonical arguments without the
// key argument and IntentionalRepeatArg (also returned), and, when declared
// is not nil (WrapTool), without those the tool does not declare; S the
// scope's part (null for ScopeNone), T the tool's name.
func (m *Middleware) windowFingerprint(req mcp.CallToolRequest, client string, declared map[string]bool) (string, []byte, error) {
	v, args, err := canonicalArgs(req.GetRawArguments(), m.opts.KeyArg, IntentionalRepeatArg)
	if err != nil {
		return "", nil, err
	}
	if obj, ok := v.(map[string]any); ok && declared != nil {
		undeclared := false
		for name := range obj {
			if !declared[name] {
				delete(obj, name)
				undeclared = true
			}
		}
		if undeclared {
			if args, err = canonical.Marshal(obj); err != nil {
				return "", nil, fmt.Errorf("canonical arguments: %w", err)
			}
		}
	}
	var scope any
	switch m.scope.kind {
	case scopeClient:
		scope = map[string]any{"client": client}
	case scopeArg:
		obj, _ := v.(map[string]any)
		scope = map[string]any{"arg": m.scope.arg, "value": obj[m.scope.arg]}
	}
	scopeJSON, err := canonical.Marshal(scope)
	if err != nil {
		return "", nil, fmt.Errorf("canonical scope: %w", err)
	}
	tool, _ := canonical.Marshal(req.Params.Name) // a string always encodes
	// Each part is canonical and the names are in canonical order, so the
	// whole is the canonical form of the object without a second pass.
	whole := make([]byte, 0, len(args)+len(scopeJSON)+len(tool)+26)
	whole = append(append(whole, `{"args":`...), args...)
	whole = append(append(whole, `,"scope":`...), scopeJSON...)
	whole = append(append(whole, `,"tool":`...), tool...)
	whole = append(whole, '}')
	sum := sha256.Sum256(whole)
	return hex.EncodeToString(sum[:]), args, nil
}

// intentionalRepeat says how the call asked to pass the window ("meta",
// "argument"), or "" when it did not.
func intentionalRepeat(req mcp.CallToolRequest) string {
	if req.Params.Meta.GetMetaField(MetaIntentionalRepeat) == true {
		return "meta"
	}
	if args := req.GetArguments(); args != nil && args[IntentionalRepeatArg] == true {
		return "argument"
	}
	return ""
}

// keyless handles a call without a key: run as it is when the window is
// off or bypassed, otherwise claim its window record as a key's.
func (m *Middleware) keyless(ctx context.Context, req mcp.CallToolRequest, next server.ToolHandlerFunc, w *write) *mcp.CallToolResult {
	if m.window <= 0 {
		return m.runUnprotected(ctx, req, next, w)
	}
	fp, args, err := m.windowFingerprint(req, w.client, w.declared)
	if err != nil {
		w.outcome = OutcomeInvalid
		return decorate(refusal("invalid_arguments", "the arguments are not a JSON value: "+err.Error(), nil), false, ptr(false))
	}
	w.window = fp
	if w.bypass = intentionalRepeat(req); w.bypass != "" {
		// No record: a forced takeover would fence off an identical call
		// still running, and roll back its commit.
		res := m.runUnprotected(ctx, req, next, w)
		if w.outcome == OutcomeExecuted {
			w.outcome = OutcomeBypassed
		}
		return res
	}
	now := w.arrived
	m.maybePurge(ctx, now)
	rec := Record{
		Key: windowKeyPrefix + fp, Tool: req.Params.Name, Fingerprint: fp, Args: args,
		State: StateProcessing, Owner: m.opts.NewOwner(), LeaseUntil: now.Add(m.opts.Lease),
		Attempts: 1, CreatedAt: now, UpdatedAt: now, ExpiresAt: now.Add(m.window),
	}
	prev, claimed, err := m.opts.Store.Claim(ctx, rec, func(p Record) bool { return m.mayTakeOver(p, rec, now) })
	if err != nil {
		w.outcome = OutcomeStoreFailed
		m.event(Event{Kind: EventStoreFailed, Window: fp, Tool: rec.Tool, Err: err, At: now})
		return decorate(refusal("unavailable", "the idempotency store is unavailable, nothing was executed: "+err.Error(), nil), false, ptr(true))
	}
	if !claimed {
		return m.windowRepeat(*prev, rec, now, w)
	}
	if prev != nil && now.Before(prev.ExpiresAt) {
		w.tookOver = prev.State
		kind := EventRerun
		if prev.State == StateProcessing {
			kind = EventReclaimed
		}
		m.event(Event{Kind: kind, Window: fp, Tool: rec.Tool, State: prev.State, At: now})
	}
	return m.run(ctx, req, next, &call{store: m.opts.Store, recordKey: rec.Key, owner: rec.Owner, now: m.opts.Now}, w)
}

// windowRepeat answers a keyless call that found an identical one inside
// the window and did not take its record over. Nothing is executed.
func (m *Middleware) windowRepeat(p, rec Record, now time.Time, w *write) *mcp.CallToolResult {
	w.outcome = OutcomeDeduplicatedWindow
	ev := Event{Window: rec.Fingerprint, Tool: rec.Tool, State: p.State, At: now}
	defer func() { m.event(ev) }()
	var res *mcp.CallToolResult
	switch {
	case p.State == StateCompleted || (p.State == StateFailed && !p.Retryable):
		ev.Kind = EventReplayed
		var stored mcp.CallToolResult
		if err := json.Unmarshal(p.Result, &stored); err != nil {
			ev.Kind, ev.Err = EventStoreFailed, fmt.Errorf("decode stored result: %w", err)
			res = decorate(refusal("unreadable", "an identical call sent without a key already ran, but its stored result cannot be read: "+err.Error(), nil), false, nil)
			break
		}
		res = decorate(&stored, true, ptr(false))
	case p.State == StateProcessing && !now.Before(p.LeaseUntil):
		ev.Kind = EventLeaseExpired
		res = decorate(windowInProgress(p, m.window, true), false, nil)
	default:
		ev.Kind = EventInProgress
		res = decorate(windowInProgress(p, m.window, false), false, ptr(true))
	}
	w.answer = ev.Kind
	meta := res.Meta
	if meta == nil {
		meta = &mcp.Meta{}
		res.Meta = meta
	}
	meta.SetMetaField(MetaDeduplicatedBy, "window")
	return res
}

// windowInProgress is the in-progress signal for a keyless call whose
// identical twin is still running (or whose lease expired).
func windowInProgress(p Record, window time.Duration, leaseExpired bool) *mcp.CallToolResult {
	since := p.CreatedAt.UTC().Format(time.RFC3339)
	extra := map[string]any{"deduplicated_by": "window", "since": since}
	text := fmt.Sprintf("an identical %s call sent without an idempotency key at %s is still in progress; this one was not executed "+
		"(the server treats identical keyless calls within %v as one). Resend later to get its result, "+
		"or set %s true if you mean a second, separate %s", p.Tool, since, window, IntentionalRepeatArg, p.Tool)
	if leaseExpired {
		extra["lease_expired"] = true
		text = fmt.Sprintf("an identical %s call sent without an idempotency key at %s is in progress or its outcome is unknown: "+
			"its lease expired %s, so the server running it may have stopped. This one was not executed; "+
			"check with a read whether the first took effect before deciding", p.Tool, since, p.LeaseUntil.UTC().Format(time.RFC3339))
	}
	return refusal("in_progress", text, extra)
}

// windowPurger is a Store that can delete expired window records.
type windowPurger interface {
	PurgeWindow(ctx context.Context, before time.Time, limit int) (int64, error)
}

// maybePurge deletes expired window records, at most purgeBatch of them,
// at most once per purgeEvery (sooner while a full batch came back), on the
// arrival of a keyless call. Claim treats expired records as absent already;
// this keeps the table from growing with every distinct keyless call.
func (m *Middleware) maybePurge(ctx context.Context, now time.Time) {
	p, ok := m.opts.Store.(windowPurger)
	if !ok {
		return
	}
	due := m.nextPurge.Load()
	next := now.Add(m.purgeEvery).UnixNano()
	if now.UnixNano() < due || !m.nextPurge.CompareAndSwap(due, next) {
		return
	}
	n, err := p.PurgeWindow(context.WithoutCancel(ctx), now, m.purgeBatch)
	if err != nil {
		m.event(Event{Kind: EventStoreFailed, Err: fmt.Errorf("purge expired window records: %w", err), At: now})
		return
	}
	if n >= int64(m.purgeBatch) {
		m.nextPurge.CompareAndSwap(next, 0) // more left: purge again on the next arrival
	}
}
