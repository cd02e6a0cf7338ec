package idempotency

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/prometheus/client_golang/prometheus"
)

// Defaults for Options.
const (
	DefaultTTL   = 24 * time.Hour
	DefaultLease = 2 * time.Minute
)

// Options configure a Middleware. Only Store is required.
type Options struct {
	Store Store
	// KeyArg names a tool argument that may carry the key ("idempotency_key");
	// empty means the key is read from _meta only. It is left out of the
	// fingerprint.
	KeyArg string
	// TTL is how long a record is kept (default 24h). It must outlast the
	// longest period a client may resend over.
	TTL time.Duration
	// Lease is how long a processing claim is trusted (default 2m). It must
	// outlast the handler's longest run: it is not renewed while it runs.
	Lease time.Duration
	// ReclaimExpiredLeases lets a repeat run the handler again once a
	// processing record's lease has expired. Set it only when every effect of
	// the handler goes through Commit: then an unfinished record proves the
	// effect never committed, and a late Commit by the old execution fails
	// with ErrLeaseLost and rolls back. Off, an expired lease is answered as
	// in progress or unknown.
	ReclaimExpiredLeases bool
	// Now is the clock (default time.Now).
	Now func() time.Time
	// NewOwner makes the token that fences one execution's claim (default: 16
	// random bytes in hex).
	NewOwner func() string
	// OnEvent is called for every repeat of a key, or of a keyless call
	// inside the dedupe window (Event.Window set), and for store failures.
	// It must not block. WithLogger logs every write by itself.
	OnEvent func(Event)
}

// EventKind says what happened to a repeated key.
type EventKind string

// Event kinds. All but EventStoreFailed are dedupe hits: a repeat of a key
// that did not become a second, unguarded execution.
const (
	EventReplayed     EventKind = "replayed"      // stored result returned
	EventInProgress   EventKind = "in_progress"   // first execution still holds the key
	EventLeaseExpired EventKind = "lease_expired" // processing, lease expired: answered in progress or unknown
	EventKeyReused    EventKind = "key_reused"    // other arguments under the key: refused
	EventRerun        EventKind = "rerun"         // failed retryable: executed again
	EventReclaimed    EventKind = "reclaimed"     // expired lease taken over (ReclaimExpiredLeases)
	EventStoreFailed  EventKind = "store_failed"  // the store could not be read or written
)

// Event describes one dedupe hit or store failure.
type Event struct {
	Kind   EventKind
	Key    string // the caller's key; "" for a keyless call judged by the window
	Window string // the window fingerprint of a keyless call, or ""
	Tool   string
	State  State    // state of the record the repeat found
	Fields []string // differing arguments, for EventKeyReused
	Err    error    // for EventStoreFailed
	At     time.Time
}

// Middleware deduplicates tool calls by idempotency key. It is safe for
// concurrent use.
type Middleware struct {
	opts       Options
	dedupeHits atomic.Int64

	window     time.Duration // WithDedupeWindow; 0 is off
	scope      DedupeScope
	purgeEvery time.Duration
	purgeBatch int
	nextPurge  atomic.Int64 // unix nanoseconds of the next purge of window records

	log        *slog.Logger // WithLogger; nil logs nothing
	registerer prometheus.Registerer
	metrics    *Metrics // WithMetrics; nil counts nothing
}

// New returns a Middleware; it fails when opts.Store is missing or an
// option is refused.
func New(opts Options, with ...Option) (*Middleware, error) {
	if opts.Store == nil {
		return nil, errors.New("idempotency: Options.Store is required")
	}
	if opts.TTL <= 0 {
		opts.TTL = DefaultTTL
	}
	if opts.Lease <= 0 {
		opts.Lease = DefaultLease
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.NewOwner == nil {
		opts.NewOwner = randomOwner
	}
	m := &Middleware{opts: opts, purgeBatch: purgeBatch}
	for _, o := range with {
		if err := o(m); err != nil {
			return nil, err
		}
	}
	if m.registerer != nil {
		m.metrics = newMetrics(opts.Store, opts.Now)
		if err := m.registerer.Register(m.metrics); err != nil {
			return nil, fmt.Errorf("idempotency: register metrics: %w", err)
		}
	}
	return m, nil
}

// DedupeHits counts repeats (of a key, or of a keyless call inside the dedupe
// window) answered without a second unguarded execution since the
// middleware was made.
func (m *Middleware) DedupeHits() int64 { return m.dedupeHits.Load() }

// Wrap returns next guarded by the key store. It has the shape of a
// server.ToolHandlerMiddleware, so it can also be given to server.Use.
func (m *Middleware) Wrap(next server.ToolHandlerFunc) server.ToolHandlerFunc {
	return m.wrap(nil, next)
}

// WrapTool is Wrap for the one tool t, whose input schema says which
// arguments it takes: the dedupe window compares only those (and the
// scope), so a keyless resend that carries an argument the tool ignores (a
// client's note, its own request id) is still the same call. A schema
// that lists no properties leaves every argument counted. Keyed calls are
// judged as by Wrap.
func (m *Middleware) WrapTool(t mcp.Tool, next server.ToolHandlerFunc) server.ToolHandlerFunc {
	var declared map[string]bool
	if len(t.InputSchema.Properties) > 0 {
		declared = make(map[string]bool, len(t.InputSchema.Properties))
		for name := range t.InputSchema.Properties {
			declared[name] = true
		}
	}
	return m.wrap(declared, next)
}

func (m *Middleware) wrap(declared map[string]bool, next server.ToolHandlerFunc) server.ToolHandlerFunc {
	return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		w := write{tool: req.Params.Name, arrived: m.opts.Now(), declared: declared}
		w.session, w.client = sessionOf(ctx)
		// Deferred, so a handler that panics (to the server's recovery) is
		// still logged and counted.
		defer m.observe(ctx, &w)
		return m.handle(ctx, req, next, &w), nil
	}
}

// handle answers one call and fills in w.outcome.
func (m *Middleware) handle(ctx context.Context, req mcp.CallToolRequest, next server.ToolHandlerFunc, w *write) *mcp.CallToolResult {
	key, err := keyOf(req, m.opts.KeyArg)
	if err != nil {
		w.outcome = OutcomeInvalid
		return decorate(refusal("invalid_key", err.Error(), nil), false, ptr(false))
	}
	if key == "" {
		return m.keyless(ctx, req, next, w)
	}
	w.key = key
	fp, args, err := Fingerprint(req.GetRawArguments(), m.opts.KeyArg)
	if err != nil {
		w.outcome = OutcomeInvalid
		return decorate(refusal("invalid_arguments", "the arguments are not a JSON value: "+err.Error(), nil), false, ptr(false))
	}
	now := w.arrived
	rec := Record{
		Key: key, Tool: req.Params.Name, Fingerprint: fp, Args: args,
		State: StateProcessing, Owner: m.opts.NewOwner(), LeaseUntil: now.Add(m.opts.Lease),
		Attempts: 1, CreatedAt: now, UpdatedAt: now, ExpiresAt: now.Add(m.opts.TTL),
	}
	prev, claimed, err := m.opts.Store.Claim(ctx, rec, func(p Record) bool { return m.mayTakeOver(p, rec, now) })
	if err != nil {
		w.outcome = OutcomeStoreFailed
		m.event(Event{Kind: EventStoreFailed, Key: key, Tool: rec.Tool, Err: err, At: now})
		// Nothing ran, so a resend is safe.
		return decorate(refusal("unavailable", "the idempotency store is unavailable, nothing was executed: "+err.Error(), nil), false, ptr(true))
	}
	if !claimed {
		return m.repeat(*prev, rec, now, w)
	}
	if prev != nil && now.Before(prev.ExpiresAt) {
		w.tookOver = prev.State
		kind := EventRerun
		if prev.State == StateProcessing {
			kind = EventReclaimed
		}
		m.event(Event{Kind: kind, Key: key, Tool: rec.Tool, State: prev.State, At: now})
	}
	return m.run(ctx, req, next, &call{store: m.opts.Store, key: key, recordKey: key, owner: rec.Owner, now: m.opts.Now}, w)
}

// mayTakeOver decides, inside the claiming transaction, whether a new
// arrival replaces the record found.
func (m *Middleware) mayTakeOver(p, rec Record, now time.Time) bool {
	switch {
	case p.State == StateProcessing && now.Before(p.LeaseUntil) && p.Tool == rec.Tool && p.Fingerprint == rec.Fingerprint:
		// Still running, even past its expiry (a dedupe window shorter
		// than the handler's run): taking over would run it twice at once.
		return false
	case !now.Before(p.ExpiresAt):
		return true // an expired record is as good as absent
	case p.Tool != rec.Tool || p.Fingerprint != rec.Fingerprint:
		return false // key reuse: refused, never executed
	case p.State == StateFailed && p.Retryable:
		return true
	case p.State == StateProcessing && !now.Before(p.LeaseUntil) && m.opts.ReclaimExpiredLeases:
		return true
	}
	return false
}

// repeat answers an arrival that found the key held and did not take it.
func (m *Middleware) repeat(p, rec Record, now time.Time, w *write) *mcp.CallToolResult {
	ev := Event{Key: rec.Key, Tool: rec.Tool, State: p.State, At: now}
	defer func() { m.event(ev) }()
	if p.Tool != rec.Tool || p.Fingerprint != rec.Fingerprint {
		ev.Kind = EventKeyReused
		ev.Fields = differingFields(p.Args, rec.Args)
		if p.Tool != rec.Tool {
			ev.Fields = append([]string{"tool"}, ev.Fields...)
		}
		w.outcome, w.fields = OutcomeKeyReuseRefused, ev.Fields
		return decorate(keyReused(rec.Key, ev.Fields), false, ptr(false))
	}
	switch {
	case p.State == StateCompleted || (p.State == StateFailed && !p.Retryable):
		ev.Kind = EventReplayed
		w.outcome = OutcomeReplayed
		var res mcp.CallToolResult
		if err := json.Unmarshal(p.Result, &res); err != nil {
			ev.Kind, ev.Err = EventStoreFailed, fmt.Errorf("decode stored result: %w", err)
			// The call did run; only its answer is unreadable. Resending cannot help.
			return decorate(refusal("unreadable", "this key's call already ran, but its stored result cannot be read: "+err.Error(), nil), false, nil)
		}
		return decorate(&res, true, ptr(false))
	case p.State == StateProcessing && !now.Before(p.LeaseUntil):
		ev.Kind = EventLeaseExpired
		w.outcome = OutcomeLeaseExpired
		return decorate(inProgress(p, true), false, nil)
	default:
		// Processing with a live lease, or a retryable failure another
		// arrival took over a moment ago.
		ev.Kind = EventInProgress
		w.outcome = OutcomeInProgress
		return decorate(inProgress(p, false), false, ptr(true))
	}
}

// run executes the handler under a claim and records how it ended.
func (m *Middleware) run(ctx context.Context, req mcp.CallToolRequest, next server.ToolHandlerFunc, c *call, w *write) *mcp.CallToolResult {
	w.outcome = OutcomeExecuted
	res, err := next(withCall(ctx, c), req)
	if committed, out, ok := c.committedResult(); ok {
		// The handler stored its answer with its effect; that is the answer.
		return decorate(committed, false, shouldRetry(out))
	}
	// The store writes below must happen even when the client cancelled:
	// the handler has run and its outcome must not be lost with the request.
	storeCtx := context.WithoutCancel(ctx)
	var rej *rejectedError
	switch {
	case errors.As(err, &rej):
		w.outcome = OutcomeRejected
		if rerr := c.store.Release(storeCtx, c.recordKey, c.owner); rerr != nil {
			m.event(c.failed(req, rerr, m.opts.Now()))
		}
		return decorate(refusal("rejected", rej.Error(), nil), false, ptr(false))
	case err == nil && res != nil && len(res.InputRequests) > 0:
		// An input_required answer is not an outcome: the client will call
		// again with the answers, under the same key, and must be let in.
		if rerr := c.store.Release(storeCtx, c.recordKey, c.owner); rerr != nil {
			m.event(c.failed(req, rerr, m.opts.Now()))
		}
		return res
	}
	out, res := outcomeOf(res, err, m.opts.Now())
	ferr := c.store.Finish(storeCtx, c.recordKey, c.owner, func(*sql.Tx) (Outcome, error) { return out, nil })
	if errors.Is(ferr, ErrLeaseLost) {
		// Another execution reclaimed the key while this one ran long; its
		// answer is the one that counts.
		m.event(c.failed(req, ferr, m.opts.Now()))
		if c.key == "" {
			return decorate(refusal("in_progress", "an identical call sent without a key took over after this one's lease expired; resend later to get that execution's result",
				map[string]any{"deduplicated_by": "window"}), false, ptr(true))
		}
		return decorate(refusal("in_progress", fmt.Sprintf("idempotency key %q was taken over by a later execution after this one's lease expired; resend later with the same key to get that execution's result", c.key), map[string]any{"key": c.key}), false, ptr(true))
	}
	if ferr != nil {
		// The record stays processing and turns in-progress-or-unknown when
		// its lease ends; this caller still gets the real answer.
		m.event(c.failed(req, ferr, m.opts.Now()))
		return decorate(res, false, nil)
	}
	return decorate(res, false, shouldRetry(out))
}

// runUnprotected runs a call that carries no key: nothing is stored, but
// errors become results and Commit still works, so the handler needs one code
// path only.
func (m *Middleware) runUnprotected(ctx context.Context, req mcp.CallToolRequest, next server.ToolHandlerFunc, w *write) *mcp.CallToolResult {
	w.outcome = OutcomeExecuted
	c := &call{store: m.opts.Store, now: m.opts.Now}
	res, err := next(withCall(ctx, c), req)
	if committed, out, ok := c.committedResult(); ok {
		return decorate(committed, false, shouldRetry(out))
	}
	var rej *rejectedError
	if errors.As(err, &rej) {
		w.outcome = OutcomeRejected
		return decorate(refusal("rejected", rej.Error(), nil), false, ptr(false))
	}
	if err == nil && res != nil && len(res.InputRequests) > 0 {
		return res
	}
	out, res := outcomeOf(res, err, m.opts.Now())
	return decorate(res, false, shouldRetry(out))
}

// outcomeOf turns what a handler returned into the result to answer and the
// outcome to store. A handler error becomes an isError result, so that it can
// be stored, replayed, and carry _meta.
func outcomeOf(res *mcp.CallToolResult, err error, now time.Time) (Outcome, *mcp.CallToolResult) {
	out := Outcome{State: StateCompleted, At: now}
	switch {
	case err != nil:
		out.State, out.Retryable = StateFailed, IsRetryable(err)
		if !out.Retryable && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
			// Stopped midway without saying whether its effect happened: the
			// outcome is unknown, so keep the record processing, with its
			// lease ended so repeats are told so at once.
			out.State = StateProcessing
		}
		res = mcp.NewToolResultError(err.Error())
	case res == nil:
		out.State = StateFailed
		res = mcp.NewToolResultError("the tool handler returned no result")
	case res.IsError:
		out.State = StateFailed
	}
	b, merr := json.Marshal(res)
	if merr != nil {
		b, _ = json.Marshal(mcp.NewToolResultError("the tool's result could not be stored: " + merr.Error()))
	}
	out.Result = b
	return out, res
}

func shouldRetry(out Outcome) *bool {
	switch out.State {
	case StateCompleted:
		return ptr(false)
	case StateFailed:
		return ptr(out.Retryable)
	}
	return nil // unknown
}

func (m *Middleware) event(e Event) {
	if e.Kind != EventStoreFailed {
		m.dedupeHits.Add(1)
	}
	if m.metrics != nil {
		m.metrics.event(e)
	}
	if m.opts.OnEvent != nil {
		m.opts.OnEvent(e)
	}
}

func randomOwner() string {
	var b [16]byte
	rand.Read(b[:]) // never fails (crypto/rand, Go 1.24+)
	return hex.EncodeToString(b[:])
}

func ptr(b bool) *bool { return &b }
