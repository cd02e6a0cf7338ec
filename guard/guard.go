// Package guard is the one place that decides whether anything is sent to
// an MCP server. A write call is a durable record first and a message
// second: intent (key, arguments, fingerprint) committed with a full fsync,
// then one attempt sent, then its outcome recorded. No code path here sends
// a write attempt that an operator did not ask for: not on timeout, not on
// reconnect, not on restart, not on a late result. Only Call (a new
// operation) and Retry (an operator's decision) send writes, once each.
package guard

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"os"
	"os/user"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-confirm/mcp-confirm/mcpclient"
	"github.com/mcp-confirm/mcp-confirm/pending"
	"github.com/mcp-confirm/mcp-confirm/toolschema"
)

// Server is what the guard needs of an MCP session (mcpclient.Client).
type Server interface {
	ServerInfo() mcpclient.ServerInfo
	Session() int
	Tools(ctx context.Context) ([]mcp.Tool, error)
	Call(ctx context.Context, tool string, args map[string]any, o mcpclient.CallOptions) mcpclient.Delivery
}

// Options configure a Guard.
type Options struct {
	Policy       *Policy
	ServerAlias  string         // config name of the server, if one was used
	Server       ServerIdentity // how the server was reached; stored with each call
	WriteTimeout time.Duration  // --timeout: overrides the policy's idle clock for writes
	// ReadBudget, when set, bounds a read with all its retries (the proxy
	// sets it so that its host hears an answer before giving up itself).
	ReadBudget time.Duration
	Operator   string    // default: the OS user
	Keys       KeySource // default: ULIDs from crypto randomness
	Logger     *slog.Logger
	// Jitter is the randomness for read backoff; tests seed it.
	Jitter *mrand.Rand
	// Notify, when set, is told of each call this guard leaves unknown
	// (NoticeUnknown), and of one that settles late after its caller was
	// told it was unknown (NoticeLateSettled). It must not block.
	Notify func(notice string, c pending.Call)
	// Observe, when set, is told of every call this guard ran (and of
	// those it refused), after it ended: metrics. It must not block.
	Observe func(Observation)
	// RecordedResult: a new write that settled as it was sent (the server
	// answered, the outcome was recorded, nothing else came for it) gets
	// Result.Call as this process recorded it instead of as read back from
	// the journal, which is one read transaction less per write, most of
	// what the proxy added beyond the journal's own commits
	// (BenchmarkWriteThroughProxy). The call is the intent's with the
	// outcome applied; its UpdatedAt and the attempt's EndedAt are the
	// journal's clock read just after the commit, not the stored
	// timestamps. Any other write (a retry, a loss, a replayed, resumed
	// or unusable answer, a late answer, an attempt recovered elsewhere) is
	// still read back. For a caller that reads State, Reason and Key.
	RecordedResult bool
}

// Observation is one call as Options.Observe is told of it.
type Observation struct {
	Tool string
	// Kind is how the guard classed the tool; "" when the call was refused
	// before that (no such tool, bad arguments, the server unreachable).
	Kind   pending.Kind
	Result Result
	Err    error
	Took   time.Duration
}

// The notices Options.Notify is given.
const (
	NoticeUnknown     = "unknown"
	NoticeLateSettled = "late_settled"
)

// Guard runs guarded calls and operator decisions against one journal and
// one server.
type Guard struct {
	j      *pending.Journal
	srv    Server
	opts   Options
	log    *slog.Logger
	jmu    sync.Mutex // guards opts.Jitter
	toolMu sync.Mutex
	tools  map[string]mcp.Tool
	toolsN int // session the tools were listed on
	// sending tracks, per (tool, key), the attempt this process is sending
	// until its outcome is in the journal. The session hands late answers
	// to HandleLateResult on its own goroutine, possibly before that; such
	// an answer is kept here and recorded once the outcome is.
	sendMu  sync.Mutex
	sending map[string]*sendState
	secrets redactedValues
}

// sendState is one attempt between its send and its recorded outcome.
type sendState struct {
	ids   map[string]bool // "session/rpcID" of every request written for it
	first string          // the first request's JSON-RPC id
	early []mcpclient.LateResult
}

// New returns a Guard. Wire mcpclient.Options.OnLateResult to
// Guard.HandleLateResult so answers that come after a timeout are kept.
func New(j *pending.Journal, srv Server, opts Options) *Guard {
	if opts.Operator == "" {
		opts.Operator = DefaultOperator()
	}
	if opts.Keys == nil {
		opts.Keys = &ulidKeys{entropy: rand.Reader, now: func() uint64 { return uint64(time.Now().UnixMilli()) }}
	}
	if opts.Jitter == nil {
		opts.Jitter = newJitter()
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Guard{j: j, srv: srv, opts: opts, log: log}
}

func newJitter() *mrand.Rand {
	var seed [32]byte
	_, _ = rand.Read(seed[:])
	return mrand.New(mrand.NewChaCha8(seed))
}

// DefaultOperator is the operator name recorded on decisions:
// $MCP_CONFIRM_OPERATOR when set (a team's journal, where one OS account,
// a shared bastion's or a CI runner's, is used by several people), else
// the OS user. Like a git author, it is what the process says, not a proof
// of who is at the keyboard.
func DefaultOperator() string {
	if op := strings.TrimSpace(os.Getenv("MCP_CONFIRM_OPERATOR")); op != "" {
		return op
	}
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	return "unknown-operator"
}

// Journal is the guard's journal, for read-only views.
func (g *Guard) Journal() *pending.Journal { return g.j }

// Tool looks a tool up, listing the server's tools when the cache is from
// another session or lacks it. Listing starts the server if needed; a
// server that cannot start is ErrUnavailable and nothing else happens.
func (g *Guard) Tool(ctx context.Context, name string) (mcp.Tool, error) {
	g.toolMu.Lock()
	t, ok := g.tools[name]
	fresh := g.toolsN == g.srv.Session() && g.tools != nil
	g.toolMu.Unlock()
	if ok && fresh {
		return t, nil
	}
	tools, err := g.ListTools(ctx)
	if err != nil {
		return mcp.Tool{}, err
	}
	for _, t := range tools {
		if t.Name == name {
			return t, nil
		}
	}
	return mcp.Tool{}, &UnknownToolError{Tool: name}
}

// ListTools lists the server's tools and refreshes the cache.
func (g *Guard) ListTools(ctx context.Context) ([]mcp.Tool, error) {
	tools, err := g.srv.Tools(ctx)
	if err != nil {
		return nil, unavailable(err)
	}
	m := make(map[string]mcp.Tool, len(tools))
	for _, t := range tools {
		m[t.Name] = t
	}
	g.toolMu.Lock()
	g.tools, g.toolsN = m, g.srv.Session()
	g.toolMu.Unlock()
	return tools, nil
}

// KeyArg is the argument the tool's idempotency key goes in under the
// policy (its key_arg, else the schema's; see KeyArg), or "".
func (g *Guard) KeyArg(t mcp.Tool) string { return KeyArg(t, g.opts.Policy.tool(t.Name).KeyArg) }

// Classify is the tool's kind under the policy (see Policy.Classify).
func (g *Guard) Classify(t mcp.Tool) (pending.Kind, pending.KindSource) {
	return g.opts.Policy.Classify(t)
}

// Request is one guarded call.
type Request struct {
	Tool string
	Args map[string]any
	// RawArgs, when Args is nil, are the arguments as the caller wrote them
	// (a JSON object): a read sends them as written, a write decodes them
	// (DecodeObject) to fingerprint and journal them. A proxy passes its
	// host's bytes, so a read costs no decoding at all.
	RawArgs json.RawMessage
	// Key is the caller's own idempotency key; empty: one is generated.
	Key string
	// New says this is deliberately a new operation even if an identical
	// call is in flight or unknown (--new): the resend hold is skipped.
	New        bool
	OnProgress func(mcpclient.Progress)
	// OnReadAnswer, for a read only, is given the server's answer as soon
	// as it arrives (mcpclient.CallOptions.OnAnswer says how and when). A
	// write's answer never goes this way: it is journaled first.
	OnReadAnswer func(result json.RawMessage, rpcErr *mcpclient.RPCError)
	// compensates, set by Compensate only, is the call this write undoes.
	compensates int64
}

// Result is what a guarded call came to.
type Result struct {
	Call     pending.Call // zero ID for reads, which are not journaled
	State    pending.State
	Key      string
	Result   json.RawMessage // CallToolResult as MCP JSON
	Error    json.RawMessage // JSON-RPC error
	Replayed bool            // the server (or the journal) returned a stored result
	Stored   bool            // answered from the journal without sending
	// ReplayedFrom is the call whose stored outcome answers this one (a
	// late-settled identical call, see LateSettledError); 0 otherwise.
	ReplayedFrom int64
	// Refusal is the HTTP status by which the server said it did not run
	// the last attempt (over HTTP: a 404 for the session, a 401 wanting a
	// login...); the call is then unknown, its word being no proof. nil
	// otherwise.
	Refusal *mcpclient.RefusedError
	// ReRecordedFrom, when not 0, is the id the call had before the
	// journal's WAL was removed or replaced under this process, which then
	// wrote the call back under a new id (Call.ID), matched by its key:
	// the old id may now be another call's, so the call is to be named by
	// its key.
	ReRecordedFrom int64
}

// Call runs one guarded call. Reads are sent, retried on timeouts with
// jittered backoff, and never become unknown. Writes get a key, a durable
// intent, exactly one attempt, and an outcome; see the package comment.
func (g *Guard) Call(ctx context.Context, req Request) (Result, error) {
	if g.opts.Observe == nil {
		res, _, err := g.call(ctx, req)
		return res, err
	}
	began := time.Now()
	res, kind, err := g.call(ctx, req)
	g.opts.Observe(Observation{Tool: req.Tool, Kind: kind, Result: res, Err: err, Took: time.Since(began)})
	return res, err
}

func (g *Guard) call(ctx context.Context, req Request) (Result, pending.Kind, error) {
	if req.Args != nil || isNullJSON(req.RawArgs) {
		req.RawArgs = nil
	} else if !isObjectJSON(req.RawArgs) {
		return Result{}, "", badInput("arguments must be a JSON object")
	}
	if req.Args == nil && req.RawArgs == nil {
		req.Args = map[string]any{}
	}
	if req.Key != "" {
		if err := ValidateKey(req.Key); err != nil {
			return Result{}, "", badInput("%v", err)
		}
	}
	tool, err := g.Tool(ctx, req.Tool)
	if err != nil {
		return Result{}, "", err
	}
	kind, src := g.Classify(tool)
	if kind == pending.KindRead {
		res, err := g.read(ctx, tool.Name, req)
		return res, kind, err
	}
	if req.Args == nil {
		if req.Args, err = decodeObject(req.RawArgs); err != nil {
			return Result{}, kind, badInput("%v", err)
		}
	}
	res, err := g.write(ctx, tool, kind, src, req)
	return res, kind, err
}

func isNullJSON(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || string(t) == "null"
}

// isObjectJSON: raw, known to be valid JSON, is an object.
func isObjectJSON(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) > 0 && t[0] == '{'
}

func (g *Guard) write(ctx context.Context, tool mcp.Tool, kind pending.Kind, src pending.KindSource, req Request) (Result, error) {
	tp := g.opts.Policy.tool(tool.Name)
	keyArg := KeyArg(tool, tp.KeyArg)
	key := req.Key
	if keyArg != "" {
		if v, ok := req.Args[keyArg]; ok {
			s, isStr := v.(string)
			switch {
			case !isStr:
				return Result{}, badInput("argument %s must be a string key", keyArg)
			case key != "" && s != key:
				return Result{}, badInput("--key %q and argument %s %q differ; give the key once", key, keyArg, s)
			case key == "":
				if err := ValidateKey(s); err != nil {
					return Result{}, badInput("argument %s: %v", keyArg, err)
				}
				key = s
			}
		}
	}
	callerKey := key != ""
	if !callerKey {
		key = g.opts.Keys.NewKey()
	}
	info := g.srv.ServerInfo()
	stored, secrets := redact(req.Args, tp.Redact, keyArg)
	// With no field to redact, stored is the very encoding legacyFingerprint
	// hashes: one json.Marshal of the arguments less on a write's path.
	legacy := legacyFingerprintOf(stored)
	if len(tp.Redact) > 0 {
		legacy = legacyFingerprint(req.Args, keyArg)
	}
	in := pending.Intent{
		Server: serverName(info), ServerAlias: g.opts.ServerAlias, ServerIdentity: g.opts.Server.JSON(),
		Tool: tool.Name, Kind: kind, KindSource: src, Key: key, Args: stored, Redacted: secrets,
		Fingerprint: Fingerprint(req.Args, keyArg), LegacyFingerprint: legacy,
		Session: g.srv.Session(), Hold: !req.New, LateHold: g.opts.Policy.lateHold(), Compensates: req.compensates,
	}
	call, err := g.j.RecordIntent(ctx, in)
	var exists *pending.KeyExistsError
	var held *pending.HeldError
	var late *pending.LateSettledError
	switch {
	case errors.As(err, &exists):
		return g.existingKey(ctx, exists, req.Args, keyArg)
	case errors.As(err, &late):
		return g.lateSettled(ctx, late.CallID)
	case errors.As(err, &held):
		c, gerr := g.j.Get(ctx, held.CallID)
		if gerr != nil {
			return Result{}, journalErr(gerr)
		}
		return Result{Call: c, State: c.State, Key: c.Key}, &HeldError{CallID: c.ID, State: c.State, Reason: c.Reason}
	case err != nil:
		return Result{}, journalErr(err)
	}
	g.secrets.remember(sendingKey(tool.Name, key), secrets)
	return g.send(ctx, &attempt{call: call, n: 1, tool: tool, keyArg: keyArg, args: req.Args, onProgress: req.OnProgress})
}

// lateSettled answers an identical call held by one that settled late: the
// earlier call's stored outcome, sent nowhere.
func (g *Guard) lateSettled(ctx context.Context, id int64) (Result, error) {
	c, err := g.j.Get(ctx, id)
	if err != nil {
		return Result{}, journalErr(err)
	}
	res := Result{Call: c, State: c.State, Key: c.Key, Stored: true, ReplayedFrom: c.ID}
	if a, ok := settlingAttempt(c); ok {
		res.Result, res.Error = a.Result, a.Error
	}
	return res, &LateSettledError{CallID: c.ID, State: c.State}
}

// AsJournaled is res as the journal now has its call, read again before
// it is reported (issue 44): while this process waited on the server,
// another may have taken its attempt for lost and an operator retried the
// call (it is in flight again, or settled), or an answer that came as the
// session closed settled it. A call settled meanwhile carries the answer
// that settled it; otherwise what the server answered this process stays.
// res unchanged when the journal cannot be read.
func AsJournaled(ctx context.Context, j *pending.Journal, res Result) Result {
	if res.Call.ID == 0 {
		return res
	}
	c, err := j.Get(ctx, res.Call.ID)
	if err != nil {
		return res
	}
	settled := func(s pending.State) bool { return s == pending.StateSucceeded || s == pending.StateFailed }
	if settled(c.State) && !settled(res.State) {
		if a, ok := settlingAttempt(c); ok {
			res.Result, res.Error = a.Result, a.Error
		}
	}
	res.Call, res.State = c, c.State
	return res
}

// settlingAttempt is the attempt whose answer settled the call: the newest
// one with a succeeded or failed outcome.
func settlingAttempt(c pending.Call) (pending.Attempt, bool) {
	for i := len(c.Attempts) - 1; i >= 0; i-- {
		if a := c.Attempts[i]; a.Outcome == pending.OutcomeSucceeded || a.Outcome == pending.OutcomeFailed {
			return a, true
		}
	}
	return pending.Attempt{}, false
}

// existingKey answers a caller key that the journal already has (SPEC §3):
// a succeeded call's stored result without sending; other arguments are a
// key reuse; a call still open is a retry, which is not the caller's call.
func (g *Guard) existingKey(ctx context.Context, e *pending.KeyExistsError, args map[string]any, keyArg string) (Result, error) {
	c, err := g.j.Get(ctx, e.CallID)
	if err != nil {
		return Result{}, journalErr(err)
	}
	if !sameOperation(e.Fingerprint, args, keyArg, g.j.Seal) {
		// Compared as both are stored, so that a redacted value is never
		// named as what differs (it would say what the stored one is not).
		stored, _ := decodeObject(c.Args)
		raw, _ := redact(args, g.opts.Policy.tool(c.Tool).Redact, keyArg)
		visible, _ := decodeObject(raw)
		return Result{}, &KeyReuseError{CallID: c.ID, Fields: differingFields(stored, visible)}
	}
	switch c.State {
	case pending.StateSucceeded:
		last := c.Attempts[len(c.Attempts)-1]
		return Result{Call: c, State: c.State, Key: c.Key, Result: last.Result, Replayed: true, Stored: true}, nil
	case pending.StateInFlight, pending.StateUnknown:
		return Result{Call: c, State: c.State, Key: c.Key}, &KeyPendingError{CallID: c.ID, State: c.State}
	}
	return Result{Call: c, State: c.State, Key: c.Key},
		&SettledKeyError{CallID: c.ID, State: c.State}
}

func serverName(info mcpclient.ServerInfo) string {
	if info.Name == "" {
		return "unnamed-server"
	}
	return info.Name
}

// attempt is one send of a write, from its durable intent (or retry
// decision) to its recorded outcome, threaded through send's three steps.
type attempt struct {
	call       pending.Call
	n          int
	prior      pending.State // the call's state before a retry; "" for a new call
	resend     bool          // no automatic resend may follow: this attempt is the call's one (resendRefused), or it had it
	tool       mcp.Tool
	keyArg     string
	args       map[string]any
	onProgress func(mcpclient.Progress)

	// Set by transmit.
	out      mcpclient.Delivery // what the session saw
	outcome  pending.Outcome    // what the journal records (masked)
	replayed bool
	mask     masker
	settled  func() []mcpclient.LateResult // see startSending

	// Set by record: the outcome was not recorded as a's own (recovered
	// elsewhere), or late answers for it were handled; the call may then
	// differ from what a's outcome made it.
	irregular bool
}

// send makes attempt a of a call whose intent (or retry decision) is
// already durable, and records how it ended. It is the only function that
// sends a write, and it sends each attempt exactly once: transmit hands the
// request to the session once; record and settle only write the journal and
// read it. The one further send is SPEC §9's, narrowed: an attempt the
// server answered 404 for its session (it says it no longer knew it and did
// not run the request) is followed by the next attempt on a new session,
// journaled before it goes (resendRefused), only when the tool takes the
// idempotency key, so that the server deduplicates a second run if its word
// was wrong; and only once in the call's life. Everywhere else the attempt
// is unknown and the call waits for the operator.
func (g *Guard) send(ctx context.Context, a *attempt) (Result, error) {
	g.transmit(ctx, a)
	// The outcome is recorded even if the caller's context has ended: the
	// journal must not keep an attempt open that this process knows ended.
	rctx := context.WithoutCancel(ctx)
	if a.out.SessionExpired() && a.keyArg != "" && !a.resend && ctx.Err() == nil {
		if next := g.resendRefused(rctx, a); next != nil {
			return g.send(ctx, next)
		}
	}
	if err := g.record(rctx, a); err != nil {
		return g.unrecorded(a, err)
	}
	return g.settle(rctx, a)
}

// resendRefused journals attempt a as unknown with the server's word (404
// for its session: it says it did not run it) and opens the next attempt
// in the same durable commit, which send then makes on a new session with
// the same key: safe because the tool takes the key, so a server whose word
// was wrong deduplicates the second run. It returns nil, and a's outcome
// is recorded as any other, when the journal does not take it.
func (g *Guard) resendRefused(ctx context.Context, a *attempt) *attempt {
	refusal := a.outcome
	refusal.Reason = fmt.Sprintf("%s; sent once more as attempt %d, on a new session, with the same key: %s",
		refusal.Reason, a.n+1, resendSafe(a.keyArg))
	why := fmt.Sprintf("the server answered 404 to attempt %d on session %d, saying it no longer knew the session and did not run it; "+
		"sent once more on a new session with the same key: %s", a.n, a.out.Session, resendSafe(a.keyArg))
	at, err := g.j.ResendAfterRefusal(ctx, a.call.ID, a.n, refusal, a.out.Session+1, why)
	if err != nil {
		return nil
	}
	for _, lr := range a.settled() {
		g.handleLate(lr, false)
	}
	return &attempt{call: a.call, n: at.N, prior: a.prior, resend: true, tool: a.tool, keyArg: a.keyArg,
		args: a.args, onProgress: a.onProgress}
}

// resendSafe says why a write may be sent once more after a 404 for its
// session: the server's word that it did not run it is not proof, its key
// is.
func resendSafe(keyArg string) string {
	return "the tool takes the idempotency key, so the server deduplicates a second run (argument " + keyArg + ")"
}

// autoResent reports whether call c already had its one automatic resend
// (resendRefused): more attempts than its first and its operators' retries.
func autoResent(c pending.Call) bool {
	retries := 0
	for _, d := range c.Decisions {
		if d.Action == pending.ActionRetry {
			retries++
		}
	}
	return len(c.Attempts) > 1+retries
}

// transmit sends the request, once, and turns what the session saw into
// the outcome the journal will record.
func (g *Guard) transmit(ctx context.Context, a *attempt) {
	idle, total := g.opts.Policy.clocks(a.tool.Name, g.opts.WriteTimeout)
	st, settled := g.startSending(a.tool.Name, a.call.Key)
	a.settled = settled
	a.out = g.srv.Call(ctx, a.tool.Name, a.args, mcpclient.CallOptions{
		Key: a.call.Key, KeyArg: a.keyArg, IdleTimeout: idle, MaxTotal: total, OnProgress: a.onProgress,
		OnSent: func(session int, rpcID string) {
			g.sendMu.Lock()
			st.ids[wireID(session, rpcID)] = true
			if st.first == "" {
				st.first = rpcID
			}
			g.sendMu.Unlock()
		},
	})
	a.mask = g.masker(a.call)
	o, replayed := outcomeOf(a.out)
	o = a.mask.outcome(o)
	if a.out.Kind == mcpclient.DeliveryNotSent && a.prior == pending.StateUnknown {
		// A retry that never left teaches nothing: an earlier attempt may
		// still have taken effect, so the call goes back to unknown. As
		// "failed" it would claim the server had answered, and it could no
		// longer be abandoned or marked applied.
		o.Event, o.Reason = pending.EventLost, o.Reason+"; the earlier attempt's outcome is still unknown"
	}
	if a.out.SessionExpired() && a.resend {
		o.Reason += "; no further resend: the call had its one automatic resend after a 404"
	}
	// Where the request went (its first id, and the session it really went
	// out on) is stored with the outcome, not in a write of its own.
	g.sendMu.Lock()
	o.RPCID, o.Session = st.first, a.out.Session
	g.sendMu.Unlock()
	a.outcome, a.replayed = o, replayed
}

// record journals the attempt's outcome, then the late answers that came
// for it while it was out.
func (g *Guard) record(ctx context.Context, a *attempt) error {
	err := g.j.RecordOutcome(ctx, a.call.ID, a.n, a.outcome)
	if errors.Is(err, pending.ErrAttemptEnded) {
		// Another process recovered this attempt as unknown while it was
		// out (its owner looked dead to it). The answer is still the
		// server's answer: it is recorded as a late one, never dropped.
		a.irregular = true
		err = g.recordOverRecovered(ctx, a.call.ID, a.n, a.outcome)
	}
	for _, lr := range a.settled() {
		a.irregular = true
		g.handleLate(lr, false)
	}
	return err
}

// unrecorded answers an attempt whose outcome the journal did not take.
func (g *Guard) unrecorded(a *attempt, err error) (Result, error) {
	if a.out.Kind == mcpclient.DeliveryNotSent {
		return Result{}, journalErr(err)
	}
	if errors.Is(err, pending.ErrJournalReplaced) {
		if res, ok := g.reRecorded(a); ok {
			return res, nil
		}
	}
	// Sent, outcome not journaled: unknown to everyone, never "not sent";
	// what the server said still reaches the caller.
	nr := &OutcomeNotRecordedError{CallID: a.call.ID, Key: a.call.Key, Err: err, Event: a.outcome.Event, Result: a.out.ResultJSON}
	if a.out.RPCError != nil {
		nr.RPCErr, _ = json.Marshal(a.out.RPCError)
	}
	g.j.NoteUnrecorded(a.call.ID, err)
	if g.opts.Notify != nil {
		c := a.call
		c.State, c.Reason = pending.StateUnknown, "outcome not recorded: "+err.Error()
		g.opts.Notify(NoticeUnknown, c)
	}
	return Result{Call: a.call, State: pending.StateUnknown, Key: a.call.Key, Result: nr.Result, Error: nr.RPCErr}, nr
}

// reRecorded records a's outcome on its call as the journal now has it,
// after the WAL was lost and the journal wrote this process's calls back
// (pending/walloss.go), and answers with the call as read back from there:
// what is printed is what the journal says. false when the call was not
// written back (the write-back failed) or its outcome could not be added.
func (g *Guard) reRecorded(a *attempt) (Result, bool) {
	id, ok := g.j.ReRecorded(a.call.ID)
	if !ok {
		return Result{}, false
	}
	ctx := context.Background()
	err := g.j.RecordOutcomeAfterLoss(ctx, id, a.n, a.outcome)
	if err != nil && !errors.Is(err, pending.ErrAttemptEnded) {
		// ErrAttemptEnded: the row that survived has an outcome already,
		// which the read below reports.
		g.log.Error("the call was written back after the journal lost it, but its outcome was not", "key", a.call.Key, "err", err)
		return Result{}, false
	}
	c, err := g.j.Get(ctx, id)
	if err != nil || c.Key != a.call.Key {
		return Result{}, false
	}
	g.log.Warn("the journal's WAL was removed or replaced while this call was out; the call was re-recorded by its key",
		"key", c.Key, "was", a.call.ID, "now", c.ID, "state", c.State)
	res := Result{Call: c, State: c.State, Key: c.Key, Result: a.out.ResultJSON, Replayed: a.replayed, ReRecordedFrom: a.call.ID}
	if a.out.RPCError != nil {
		res.Error, _ = json.Marshal(a.out.RPCError)
	}
	if c.State == pending.StateUnknown && g.opts.Notify != nil {
		g.opts.Notify(NoticeUnknown, c)
	}
	return res, true
}

// settle keeps the attempt's evidence and builds what the caller is told;
// an unknown call gets its automatic query.
func (g *Guard) settle(ctx context.Context, a *attempt) (Result, error) {
	id := a.call.ID
	if a.replayed {
		_ = g.j.RecordEvent(ctx, pending.EventDedupeHit, id, "server replayed a stored result")
	}
	if a.out.Resumed {
		_ = g.j.RecordEvent(ctx, pending.EventResumed, id, fmt.Sprintf("attempt %d: %s", a.n, mcpclient.ReasonResumed))
	}
	if a.out.Why != "" {
		// Not a usable answer: the call is unknown, the bytes are evidence.
		_ = g.j.RecordEvent(ctx, pending.EventUnusableAnswer, id, a.mask.detail(answerDetail(a.n, mcpclient.LateResult{
			Class: mcpclient.AnswerUnusable, Raw: a.out.Raw, RawTruncated: a.out.RawTruncated, Why: a.out.Why})))
	}
	res := g.resultOf(ctx, a)
	if a.out.Kind == mcpclient.DeliveryNotSent {
		return res, unavailable(fmt.Errorf("call %d was not sent: %w", id, a.out.Err))
	}
	if res.State == pending.StateUnknown {
		g.autoQuery(ctx, res.Call)
		if c, err := g.j.Get(ctx, id); err == nil {
			res.Call, res.State = c, c.State
		}
		if res.State == pending.StateUnknown && g.opts.Notify != nil {
			g.opts.Notify(NoticeUnknown, res.Call)
		}
	}
	// A late answer to this attempt (one that came with the timeout, or
	// during the automatic query) may have settled the call already. Then
	// the result is that answer: a succeeded or failed call returned without
	// its result reads as "no answer" to the caller (the proxy turns that
	// into an error, which a model may well resend as a new call).
	for _, at := range res.Call.Attempts {
		if at.N == a.n && at.Late && res.State != pending.StateUnknown {
			res.Result, res.Error = at.Result, at.Error
			res.Replayed = readSignals(at.Result).replayed
		}
	}
	return res, nil
}

// resultOf is the call as recorded, with what the server said.
func (g *Guard) resultOf(ctx context.Context, a *attempt) Result {
	final, ok := g.recordedCall(a)
	var err error
	if !ok {
		final, err = g.j.Get(ctx, a.call.ID)
	}
	if err != nil {
		// The outcome is recorded; only reading it back failed. Report the
		// state it was recorded as, never an error that reads "not sent".
		final = a.call
		final.State, _ = pending.Transition(pending.StateInFlight, a.outcome.Event)
		final.Reason = a.outcome.Reason
	}
	res := Result{Call: final, State: final.State, Key: a.call.Key, Result: a.out.ResultJSON, Replayed: a.replayed,
		Refusal: a.out.Refusal()}
	if a.out.RPCError != nil {
		res.Error, _ = json.Marshal(a.out.RPCError)
	}
	return res
}

// recordedCall is the call as a's recorded outcome made it, without
// reading it back (Options.RecordedResult); false when it must be read.
// RecordOutcome succeeded only if the call was in flight on attempt a.n, so
// the state is the transition from in flight, and the reason the outcome's.
func (g *Guard) recordedCall(a *attempt) (pending.Call, bool) {
	regular := g.opts.RecordedResult && !a.irregular && a.n == 1 && a.prior == "" && !a.resend &&
		len(a.call.Attempts) == 1 && a.call.Attempts[0].N == 1 &&
		(a.out.Kind == mcpclient.DeliveryResult || a.out.Kind == mcpclient.DeliveryRPCError) &&
		!a.replayed && !a.out.Resumed && a.out.Why == "" &&
		(a.outcome.Event == pending.EventSucceeded || a.outcome.Event == pending.EventFailed)
	if !regular {
		return pending.Call{}, false
	}
	to, err := pending.Transition(pending.StateInFlight, a.outcome.Event)
	if err != nil {
		return pending.Call{}, false
	}
	now := g.j.Now().UTC()
	c := a.call
	c.State, c.Reason, c.UpdatedAt = to, a.outcome.Reason, now
	at := c.Attempts[0]
	at.EndedAt = &now
	at.Outcome = pending.OutcomeFailed
	if a.outcome.Event == pending.EventSucceeded {
		at.Outcome = pending.OutcomeSucceeded
	}
	at.Reason, at.Clock, at.Result, at.Error = a.outcome.Reason, a.outcome.Clock, a.outcome.Result, a.outcome.Error
	at.RPCID = a.outcome.RPCID
	if a.outcome.Session != 0 {
		at.Session = a.outcome.Session
	}
	c.Attempts = []pending.Attempt{at}
	return c, true
}

// recordOverRecovered keeps an attempt's answer when the attempt was ended
// unknown by someone else's recovery: a result or error becomes a late
// answer; a loss changes nothing (the attempt is already unknown).
func (g *Guard) recordOverRecovered(ctx context.Context, id int64, n int, o pending.Outcome) error {
	if o.Event != pending.EventSucceeded && o.Event != pending.EventFailed {
		return nil
	}
	g.log.Warn("an attempt this process was sending was recovered as unknown by another process; its answer is recorded as late",
		"call", id, "attempt", n)
	err := g.j.RecordLateResult(ctx, id, n, o)
	if errors.Is(err, pending.ErrAttemptEnded) {
		return nil // already answered: the journal has an outcome for it
	}
	return err
}

func sendingKey(tool, key string) string { return tool + "\x00" + key }

// wireID is "session/rpcID", built without fmt: it is made on every
// write's send (OnSent).
func wireID(session int, rpcID string) string { return strconv.Itoa(session) + "/" + rpcID }

// startSending marks an attempt of (tool, key) as out. settled marks its
// outcome recorded and returns the late answers that came before that.
func (g *Guard) startSending(tool, key string) (st *sendState, settled func() []mcpclient.LateResult) {
	st = &sendState{ids: map[string]bool{}}
	k := sendingKey(tool, key)
	g.sendMu.Lock()
	if g.sending == nil {
		g.sending = map[string]*sendState{}
	}
	g.sending[k] = st
	g.sendMu.Unlock()
	return st, func() []mcpclient.LateResult {
		g.sendMu.Lock()
		defer g.sendMu.Unlock()
		if g.sending[k] == st {
			delete(g.sending, k)
		}
		early := st.early
		st.early = nil
		return early
	}
}

// outcomeOf maps what the session saw to what the journal records. An
// answer that came on a resumed stream says so in its reason.
func outcomeOf(out mcpclient.Delivery) (o pending.Outcome, replayed bool) {
	o, replayed = answerOutcome(out)
	if out.Resumed {
		o.Reason = strings.TrimPrefix(o.Reason+"; "+mcpclient.ReasonResumed, "; ")
	}
	return o, replayed
}

func answerOutcome(out mcpclient.Delivery) (o pending.Outcome, replayed bool) {
	switch out.Kind {
	case mcpclient.DeliveryResult:
		sig := readSignals(out.ResultJSON)
		if sig.inProgress {
			return pending.Outcome{Event: pending.EventLost, Reason: string(ReasonInProgress), Result: out.ResultJSON}, false
		}
		if sig.isError {
			return pending.Outcome{Event: pending.EventFailed, Reason: "the tool reported an error", Result: out.ResultJSON}, sig.replayed
		}
		return pending.Outcome{Event: pending.EventSucceeded, Result: out.ResultJSON}, sig.replayed
	case mcpclient.DeliveryRPCError:
		e, _ := json.Marshal(out.RPCError)
		return pending.Outcome{Event: pending.EventFailed, Reason: "the server answered with an error: " + out.RPCError.Message, Error: e}, false
	case mcpclient.DeliveryNotSent:
		// Provably nothing was written: a definite failure, safe to retry.
		return pending.Outcome{Event: pending.EventFailed, Reason: "not sent: " + errText(out.Err)}, false
	}
	reason, clock := string(out.Reason), out.Reason.Clock()
	var cause CancelCause
	if out.Reason == mcpclient.ReasonCancelled && errors.As(out.Err, &cause) {
		reason += ": " + string(cause)
	}
	if out.Why != "" {
		reason += ": " + mcpclient.MaskURLsIn(out.Why)
	}
	return pending.Outcome{Event: pending.EventLost, Reason: reason, Clock: clock}, false
}

// CancelCause is why a front-end cancelled a call on purpose, given to
// context.WithCancelCause; the journal's reason for the call then says it
// ("cancelled: the operator quit the console").
type CancelCause string

func (c CancelCause) Error() string { return string(c) }

// ReasonInProgress is the unknown reason of a call whose server answered
// that it is still working on it: a result, so not one the client reports.
// The other reasons are mcpclient's, recorded as they are.
const ReasonInProgress mcpclient.UnknownReason = "server reports in progress"

// errText is err as the journal keeps it: a URL it quotes (Go's HTTP
// errors do) masked, since its query may hold a key.
func errText(err error) string {
	if err == nil {
		return "no reason given"
	}
	return mcpclient.MaskURLsIn(err.Error())
}

// signals are the idempotency facts a server may put in a result (SPEC §3).
type signals struct{ isError, inProgress, replayed bool }

var (
	markIsError  = []byte(`"isError"`)
	markReplayed = []byte(`"io.github.mcp-confirm/replayed"`)
	markEscape   = []byte(`\u`) // a name could be spelled with escapes
)

// readSignals reads what the engine needs from a tool result: isError, the
// demo's in-progress marker and the replayed flag. A result with neither
// field name in it (and no \u escape that could spell one), the common
// read, is not decoded at all.
func readSignals(raw json.RawMessage) signals {
	if !bytes.Contains(raw, markIsError) && !bytes.Contains(raw, markReplayed) && !bytes.Contains(raw, markEscape) {
		return signals{}
	}
	// Type errors in other fields are ignored: decoding goes on, and the
	// fields that matter are still set.
	var r struct {
		IsError           bool `json:"isError"`
		StructuredContent struct {
			Idempotency any `json:"idempotency"`
		} `json:"structuredContent"`
		Meta struct {
			Replayed any `json:"io.github.mcp-confirm/replayed"`
		} `json:"_meta"`
	}
	_ = json.Unmarshal(raw, &r)
	s := signals{isError: r.IsError}
	if v, _ := r.StructuredContent.Idempotency.(string); v == "in_progress" && r.IsError {
		s.inProgress = true
	}
	if v, _ := r.Meta.Replayed.(bool); v {
		s.replayed = true
	}
	return s
}

// DecodeObject reads a JSON object keeping numbers as written (json.Number),
// so that a fingerprint computed again from stored arguments matches the
// one computed from the caller's. Anything but an object is an error.
func DecodeObject(data []byte) (map[string]any, error) { return decodeObject(data) }

// decodeObject is toolschema.Decode: one reading of arguments for the
// guard, the console's editor and the CLI.
func decodeObject(data []byte) (map[string]any, error) { return toolschema.Decode(data) }
