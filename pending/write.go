package pending

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/mcp-confirm/mcp-confirm/timetext"
)

// Intent is a call as it must exist before its first byte is sent.
type Intent struct {
	Server      string // name the server declares
	ServerAlias string // config name, if any
	Tool        string
	Kind        Kind
	KindSource  KindSource
	Key         string
	Args        json.RawMessage // JSON object, already redacted
	// Fingerprint is of the unredacted arguments; the journal stores and
	// compares it sealed (Journal.Seal), never as given.
	Fingerprint string
	// Redacted are the values redaction took out of Args; the journal keeps
	// only their seals (Journal.RedactedValue), never the values.
	Redacted []string
	// LegacyFingerprint, when set, is the same arguments' fingerprint as an
	// older mcp-confirm wrote it: the hold also matches calls recorded
	// before an upgrade changed the form.
	LegacyFingerprint string
	// ServerIdentity says how the server was reached (a JSON object).
	ServerIdentity json.RawMessage
	Session        int // session the first attempt will go out on
	// Hold refuses the intent when a call with the same server, tool and
	// fingerprint is in_flight or unknown (the resend hold, SPEC §3), or
	// settled late within LateHold and not yet acknowledged (SPEC §9).
	Hold     bool
	LateHold time.Duration
	// Compensates, when not 0, is the call this one is made to undo
	// (Journal.Call.Compensates); the operator's decision to do so is
	// recorded on that call first (Decide, ActionCompensate).
	Compensates int64
}

// ErrHeld and ErrKeyExists are wrapped by *HeldError, *LateSettledError
// and *KeyExistsError. ErrHeld is the one sentinel for a hold: guard's
// ErrHeld is this one.
var (
	ErrHeld      = errors.New("an identical call is in flight or unknown")
	ErrKeyExists = errors.New("key already used")
)

// LateSettledError names an earlier identical call that its caller was told
// was unknown and that then settled late: the new call is not sent, and is
// answered with that call's outcome, until an operator acknowledges it.
type LateSettledError struct {
	CallID int64
	State  State
}

func (e *LateSettledError) Error() string {
	return fmt.Sprintf("call %d with the same tool and arguments settled late (%s) and is not yet acknowledged", e.CallID, e.State)
}
func (e *LateSettledError) Unwrap() error { return ErrHeld }

// HeldError names the earlier call that holds an identical one back.
type HeldError struct{ CallID int64 }

func (e *HeldError) Error() string {
	return fmt.Sprintf("call %d with the same tool and arguments is in flight or unknown", e.CallID)
}
func (e *HeldError) Unwrap() error { return ErrHeld }

// KeyExistsError names the call that already has this (server, tool, key).
type KeyExistsError struct {
	CallID      int64
	State       State
	Fingerprint string
}

func (e *KeyExistsError) Error() string {
	return fmt.Sprintf("key already used by call %d (%s)", e.CallID, e.State)
}
func (e *KeyExistsError) Unwrap() error { return ErrKeyExists }

// RecordIntent commits a new in_flight call and its first attempt, with a
// full fsync, before the caller sends anything. Concurrent intents share one
// fsync. The hold and the key check run in the same transaction as the
// insert, so two processes cannot both pass them.
func (j *Journal) RecordIntent(ctx context.Context, in Intent) (Call, error) {
	if err := in.validate(); err != nil {
		return Call{}, err
	}
	seals := j.sealValues(in.Redacted)
	in.Fingerprint = j.Seal(in.Fingerprint)
	if in.LegacyFingerprint != "" {
		in.LegacyFingerprint = j.Seal(in.LegacyFingerprint)
	}
	now := j.now().UTC()
	ts := formatTime(now)
	var compensates any // NULL for a call that undoes none
	if in.Compensates != 0 {
		compensates = in.Compensates
	}
	row := []any{in.Server, in.ServerAlias, string(in.ServerIdentity), in.Tool, in.Kind, in.KindSource, in.Key,
		string(in.Args), in.Fingerprint, strings.Join(seals, " "), j.Owner(), ts, ts, compensates}
	content := intentRow{Server: in.Server, ServerAlias: in.ServerAlias, ServerIdentity: string(in.ServerIdentity), Tool: in.Tool,
		Key: in.Key, Args: string(in.Args), Fingerprint: in.Fingerprint, CreatedAt: ts, Compensates: in.Compensates}.content()
	var id int64
	var err error
	if j.pg != nil {
		// One round trip, when no check finds anything; id 0 when one
		// does (or the owner lock is not held), and the write below,
		// which says which, runs.
		id, err = j.pg.recordIntentAtOnce(ctx, j, in, row, content, now)
	}
	if id == 0 && err == nil {
		err = j.write(ctx, durable, func(ctx context.Context, c *sql.Conn) error {
			if err := j.lockIntents(ctx, c, in.Server, in.Tool); err != nil {
				return err
			}
			if err := j.checkIntent(ctx, c, in, now); err != nil {
				return err
			}
			// Both go with the COMMIT on PostgreSQL: the attempt finds its call
			// by its unique (server, tool, key), not by the id, which comes back
			// only then.
			err := j.queryRowAtCommit(ctx, c, []any{&id}, `INSERT INTO calls (`+intentColumns+`)
				VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'in_flight', ?, ?, ?, ?) RETURNING id`, row...)
			if err != nil {
				return err
			}
			if err := j.execAtCommit(ctx, c, `INSERT INTO attempts (call_id, n, session, owner, sent_at)
				SELECT id, 1, ?, ?, ? FROM calls WHERE server = ? AND tool = ? AND key = ?`,
				in.Session, j.Owner(), ts, in.Server, in.Tool, in.Key); err != nil {
				return err
			}
			q, args := j.linkInsert("SELECT id, state FROM calls WHERE server = ? AND tool = ? AND key = ?", linkIntent, 0, "", content, in.Key)
			return j.execAtCommit(ctx, c, q, append(args, in.Server, in.Tool, in.Key)...)
		})
	}
	if errors.Is(err, ErrCommitUnconfirmed) {
		return Call{}, j.settleUnconfirmedIntent(ctx, in, err)
	}
	if err != nil {
		return Call{}, err
	}
	return Call{
		ID: id, State: StateInFlight, Server: in.Server, ServerAlias: in.ServerAlias, ServerIdentity: in.ServerIdentity,
		Tool: in.Tool,
		Kind: in.Kind, KindSource: in.KindSource, Key: in.Key, Args: in.Args, Fingerprint: in.Fingerprint,
		RedactedSeals: seals, CreatedAt: now, UpdatedAt: now, Owner: j.Owner(), AttemptCount: 1, Compensates: in.Compensates,
		Attempts: []Attempt{{N: 1, Session: in.Session, SentAt: now, Outcome: OutcomePending}},
	}, nil
}

// intentColumns are the columns of an intent's call row, as RecordIntent gives them.
const intentColumns = `server, server_alias, server_identity, tool, kind, kind_source,
	key, args, fingerprint, redacted_seals, state, owner, created_at, updated_at, compensates`

// checkIntent runs, inside the intent's transaction, the key check (a
// call of the server and tool with this key already exists) and the resend
// hold (an identical call still open, or settled late within the hold and
// not yet acknowledged, keeps the new one from being sent), in that order
// of precedence, as one statement: on PostgreSQL each is a round trip.
func (j *Journal) checkIntent(ctx context.Context, c *sql.Conn, in Intent, now time.Time) error {
	query, args := intentChecks(in, now)
	var which int
	var other int64
	var state State
	var fp string
	err := j.queryRow(ctx, c, query+" ORDER BY 1 LIMIT 1", args...).Scan(&which, &other, &state, &fp)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil
	case err != nil:
		return err
	case which == 1:
		return &KeyExistsError{CallID: other, State: state, Fingerprint: fp}
	case which == 2:
		return &HeldError{CallID: other}
	}
	return &LateSettledError{CallID: other, State: state}
}

// intentChecks is checkIntent's query, whose rows (which check, the call
// found, its state and fingerprint) each keep the intent from being
// recorded: none, and it may be.
func intentChecks(in Intent, now time.Time) (query string, args []any) {
	legacy := in.LegacyFingerprint
	if legacy == "" {
		legacy = in.Fingerprint
	}
	query = `SELECT 1, id, state, fingerprint FROM calls WHERE server = ? AND tool = ? AND key = ?`
	args = []any{in.Server, in.Tool, in.Key}
	if in.Hold {
		query += ` UNION ALL SELECT * FROM (SELECT 2, id, state, fingerprint FROM calls
			WHERE server = ? AND tool = ? AND fingerprint IN (?, ?) AND state IN ('in_flight', 'unknown')
			ORDER BY id LIMIT 1) AS held`
		args = append(args, in.Server, in.Tool, in.Fingerprint, legacy)
		if in.LateHold > 0 {
			query += ` UNION ALL SELECT * FROM (SELECT 3, id, state, fingerprint FROM calls
				WHERE server = ? AND tool = ? AND fingerprint IN (?, ?)
				AND late_settled_at <> '' AND acked_at = '' AND late_settled_at >= ? ORDER BY id DESC LIMIT 1) AS late`
			args = append(args, in.Server, in.Tool, in.Fingerprint, legacy, formatTime(now.Add(-in.LateHold)))
		}
	}
	return query, args
}

func ignoreNoRows(err error) error {
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	return err
}

func (in Intent) validate() error {
	var missing []string
	for name, v := range map[string]string{"server": in.Server, "tool": in.Tool, "key": in.Key, "fingerprint": in.Fingerprint} {
		if v == "" {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("intent without %s", strings.Join(missing, ", "))
	}
	if in.Kind != KindRead && in.Kind != KindWrite {
		return fmt.Errorf("intent with kind %q", in.Kind)
	}
	switch in.KindSource {
	case KindFromPolicy, KindFromAnnotation, KindFromDefault:
	default:
		return fmt.Errorf("intent with kind source %q", in.KindSource)
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(in.Args, &obj); err != nil || obj == nil {
		return fmt.Errorf("intent arguments must be a JSON object")
	}
	return nil
}

// Outcome is how an attempt ended, as RecordOutcome and RecordLateResult
// are told it; the attempt's row keeps it as an AttemptOutcome (from Event)
// with the reason, clock, result and error.
type Outcome struct {
	Event  Event           // EventSucceeded, EventFailed or EventLost
	Reason string          // for failed and lost: why
	Clock  string          // for lost: "idle" or "absolute" when a deadline fired
	Result json.RawMessage // CallToolResult as MCP JSON
	Error  json.RawMessage // JSON-RPC error as JSON
	// RPCID and Session say where the attempt's first request went (RecordOutcome
	// only; informative, ids restart with every session). Session, when not
	// 0, replaces the one the intent named: if the server died in between,
	// the request went out on a fresh session, and late answers name that one.
	RPCID   string
	Session int
	// CallerToldUnknown (RecordLateResult only): the caller was told the
	// call is unknown before this answer came. A late answer that settles
	// such a call starts the late-settle hold (SPEC §9).
	CallerToldUnknown bool
}

func (o Outcome) attemptOutcome() (AttemptOutcome, error) {
	switch o.Event {
	case EventSucceeded:
		return OutcomeSucceeded, nil
	case EventFailed:
		return OutcomeFailed, nil
	case EventLost:
		return OutcomeUnknown, nil
	}
	return "", fmt.Errorf("outcome event %q is not succeeded, failed or lost", o.Event)
}

// attemptEnd is the SET clause that ends an attempt, with the values
// attemptEndArgs gives it: its outcome, reason, clock, end, the server's
// result or error, where the request went, and its session when it moved.
const attemptEnd = `outcome = ?, reason = ?, clock = ?, ended_at = ?, result = ?, error = ?, rpc_id = ?,
	session = CASE WHEN ? = 0 THEN session ELSE ? END`

// outcomeContent is the content of the link of an attempt that
// attemptEnd ended (callchain.go): the attempt was pending, so not late.
func outcomeContent(n int, outcome AttemptOutcome, o Outcome, ts string) string {
	opt := func(b json.RawMessage) sql.NullString { return sql.NullString{String: string(b), Valid: len(b) > 0} }
	return attemptRow{N: int64(n), Outcome: string(outcome), Reason: o.Reason, Clock: o.Clock, RPCID: o.RPCID,
		EndedAt: sql.NullString{String: ts, Valid: true}, Result: opt(o.Result), Error: opt(o.Error)}.content()
}

func attemptEndArgs(outcome AttemptOutcome, o Outcome, ts string) []any {
	return []any{outcome, o.Reason, o.Clock, ts, nullJSON(o.Result), nullJSON(o.Error), o.RPCID, o.Session, o.Session}
}

// ErrAttemptEnded is returned when an outcome arrives for an attempt that
// already has one; use RecordLateResult for answers that come after a loss.
var ErrAttemptEnded = errors.New("attempt already ended")

// RecordOutcome ends attempt n of a call and moves the call through the
// state machine. It commits lazily: an outcome lost in a power cut leaves
// the call in_flight, and recovery turns it into unknown.
func (j *Journal) RecordOutcome(ctx context.Context, callID int64, n int, o Outcome) error {
	outcome, err := o.attemptOutcome()
	if err != nil {
		return err
	}
	ts := formatTime(j.now())
	if to, err := Transition(StateInFlight, o.Event); j.pg != nil && err == nil {
		// One round trip when the call is in flight and n its open
		// attempt, as it nearly always is; else the write below says why not.
		if done, err := j.pg.recordOutcomeAtOnce(ctx, j, callID, n, outcome, to, o, ts); done || err != nil {
			return err
		}
	}
	return j.write(ctx, lazy, func(ctx context.Context, c *sql.Conn) error {
		state, current, attemptOutcome, err := j.attemptState(ctx, c, callID, n)
		if err != nil {
			return err
		}
		if attemptOutcome != OutcomePending {
			return fmt.Errorf("call %d attempt %d: %w (%s)", callID, n, ErrAttemptEnded, attemptOutcome)
		}
		if n != current || state != StateInFlight {
			return fmt.Errorf("call %d attempt %d: not the call's open attempt (call is %s): %w", callID, n, state, ErrAttemptEnded)
		}
		to, err := Transition(state, o.Event)
		if err != nil {
			return err
		}
		if err := j.execAtCommit(ctx, c, `UPDATE attempts SET `+attemptEnd+` WHERE call_id = ? AND n = ?`,
			append(attemptEndArgs(outcome, o, ts), callID, n)...); err != nil {
			return err
		}
		if err := j.execAtCommit(ctx, c, "UPDATE calls SET state = ?, reason = ?, updated_at = ? WHERE id = ?", to, o.Reason, ts, callID); err != nil {
			return err
		}
		return j.appendLink(ctx, c, callID, linkOutcome, int64(n), o.Event, outcomeContent(n, outcome, o, ts))
	})
}

// ResendAfterRefusal ends attempt n, which the server said it did not run
// (over HTTP: 404, it no longer knew the session, SPEC §9), and opens
// attempt n+1 on session, in one durable commit, before the write is sent
// once more with the same key. o must be that refusal: EventLost (the
// server's word is not proof: the attempt is unknown) or EventFailed, with
// no result or error from the server. The call stays in flight; the resend
// is an event with why, not an operator's decision.
func (j *Journal) ResendAfterRefusal(ctx context.Context, callID int64, n int, o Outcome, session int, why string) (Attempt, error) {
	if (o.Event != EventLost && o.Event != EventFailed) || len(o.Result) > 0 || len(o.Error) > 0 {
		return Attempt{}, fmt.Errorf("call %d attempt %d: a resend follows only a refusal the server gave before running the request", callID, n)
	}
	outcome, err := o.attemptOutcome()
	if err != nil {
		return Attempt{}, err
	}
	now := j.now().UTC()
	ts := formatTime(now)
	err = j.write(ctx, durable, func(ctx context.Context, c *sql.Conn) error {
		state, current, attemptOutcome, err := j.attemptState(ctx, c, callID, n)
		if err != nil {
			return err
		}
		if attemptOutcome != OutcomePending || n != current || state != StateInFlight {
			return fmt.Errorf("call %d attempt %d: not the call's open attempt (call is %s, attempt %s): %w", callID, n, state, attemptOutcome, ErrAttemptEnded)
		}
		if _, err := j.exec(ctx, c, `UPDATE attempts SET outcome = ?, reason = ?, ended_at = ?, rpc_id = ?,
			session = CASE WHEN ? = 0 THEN session ELSE ? END WHERE call_id = ? AND n = ?`,
			outcome, o.Reason, ts, o.RPCID, o.Session, o.Session, callID, n); err != nil {
			return err
		}
		if err := j.appendAttemptLink(ctx, c, callID, linkResend, n, ""); err != nil {
			return err
		}
		if _, err := j.exec(ctx, c, "INSERT INTO attempts (call_id, n, session, owner, sent_at) VALUES (?, ?, ?, ?, ?)",
			callID, n+1, session, j.Owner(), ts); err != nil {
			return err
		}
		if _, err := j.exec(ctx, c, "UPDATE calls SET reason = '', owner = ?, updated_at = ? WHERE id = ?", j.Owner(), ts, callID); err != nil {
			return err
		}
		_, err = j.exec(ctx, c, "INSERT INTO events (at, kind, call_id, detail) VALUES (?, ?, ?, ?)",
			ts, EventResent, callID, fmt.Sprintf("attempt %d: %s", n+1, why))
		return err
	})
	if err != nil {
		return Attempt{}, err
	}
	return Attempt{N: n + 1, Session: session, SentAt: now, Outcome: OutcomePending}, nil
}

// RecordLateResult stores an answer that arrived after attempt n had ended
// unknown. If the call is still unknown (and no newer attempt is out), the
// answer settles it; if an operator already decided otherwise, the answer is
// kept as evidence and the call is flagged as a conflict (SPEC §3).
func (j *Journal) RecordLateResult(ctx context.Context, callID int64, n int, o Outcome) error {
	outcome, err := o.attemptOutcome()
	if err != nil || o.Event == EventLost {
		return fmt.Errorf("late result must be succeeded or failed, not %q", o.Event)
	}
	ts := formatTime(j.now())
	return j.write(ctx, durable, func(ctx context.Context, c *sql.Conn) (err error) {
		state, current, attemptOutcome, err := j.attemptState(ctx, c, callID, n)
		if err != nil {
			return err
		}
		if attemptOutcome != OutcomeUnknown {
			return fmt.Errorf("call %d attempt %d is %s, not unknown: %w", callID, n, attemptOutcome, ErrAttemptEnded)
		}
		if _, err := j.exec(ctx, c, `UPDATE attempts SET outcome = ?, late = 1, result = ?, error = ?
			WHERE call_id = ? AND n = ?`, outcome, nullJSON(o.Result), nullJSON(o.Error), callID, n); err != nil {
			return err
		}
		// The late answer's link, once the call's state below is set.
		var ev Event
		defer func() {
			if err == nil {
				err = j.appendAttemptLink(ctx, c, callID, linkLate, n, ev)
			}
		}()
		detail := fmt.Sprintf("attempt %d answered %s after it ended unknown", n, outcome)
		if _, err := j.exec(ctx, c, "INSERT INTO events (at, kind, call_id, detail) VALUES (?, ?, ?, ?)",
			ts, EventLateResult, callID, detail); err != nil {
			return err
		}
		switch {
		case state == StateUnknown && n == current:
			to, err := Transition(state, o.Event)
			if err != nil {
				return err
			}
			lateAt := ""
			if o.CallerToldUnknown {
				lateAt = ts
			}
			ev = o.Event
			_, err = j.exec(ctx, c, "UPDATE calls SET state = ?, reason = ?, late_settled_at = ?, updated_at = ? WHERE id = ?",
				to, "late result of attempt "+fmt.Sprint(n), lateAt, ts, callID)
			return err
		case state == StateInFlight:
			return nil // a newer attempt is out; its own answer will settle the call
		}
		note := conflictNote(state, o.Event)
		if note == "" {
			return nil // the late answer agrees with where the call ended
		}
		if _, err := j.exec(ctx, c, "UPDATE calls SET conflict = 1, conflict_note = ?, updated_at = ? WHERE id = ?",
			note, ts, callID); err != nil {
			return err
		}
		_, err = j.exec(ctx, c, "INSERT INTO events (at, kind, call_id, detail) VALUES (?, ?, ?, ?)",
			ts, EventConflict, callID, note)
		return err
	})
}

// conflictNote says how a late answer contradicts a settled call, or "".
func conflictNote(state State, ev Event) string {
	applied := ev == EventSucceeded
	switch {
	case state == StateAbandoned && applied:
		return "abandoned, but the server reports it applied"
	case state == StateApplied && !applied:
		return "marked applied, but the server reports it failed"
	case state == StateFailed && applied:
		return "failed, but an earlier attempt reports it applied"
	case state == StateSucceeded && !applied:
		return "" // a later attempt succeeded; an earlier failure changes nothing
	case state == StateUnknown:
		return "" // settled by the newest attempt's own answer
	}
	return ""
}

// RetryInput is an operator's decision to resend a call with its key.
type RetryInput struct {
	Operator   string
	Note       string
	Evidence   json.RawMessage // e.g. an --any-server override
	Session    int             // session the new attempt goes out on
	Kind       Kind            // the tool's kind as evaluated now
	KindSource KindSource
}

// Retry records the decision and opens attempt n+1 in one durable commit,
// before anything is sent. Allowed from failed and unknown only.
func (j *Journal) Retry(ctx context.Context, callID int64, in RetryInput) (Call, Attempt, error) {
	if in.Operator == "" {
		return Call{}, Attempt{}, errors.New("retry without an operator")
	}
	now := j.now().UTC()
	ts := formatTime(now)
	var n int
	var state State
	err := j.write(ctx, deciding, func(ctx context.Context, c *sql.Conn) error {
		var kind Kind
		var src KindSource
		err := j.queryRow(ctx, c, "SELECT state, kind, kind_source FROM calls WHERE id = ?"+j.forUpdate(""), callID).Scan(&state, &kind, &src)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("call %d: %w", callID, ErrNoSuchCall)
		}
		if err != nil {
			return err
		}
		to, err := Transition(state, EventRetry)
		if err != nil {
			return j.decidedBefore(ctx, c, callID, state, err)
		}
		if in.Kind != "" {
			kind, src = MoreCautious(kind, src, in.Kind, in.KindSource)
		}
		if err := j.queryRow(ctx, c, "SELECT max(n) + 1 FROM attempts WHERE call_id = ?", callID).Scan(&n); err != nil {
			return err
		}
		if _, err := j.exec(ctx, c, "INSERT INTO attempts (call_id, n, session, owner, sent_at) VALUES (?, ?, ?, ?, ?)",
			callID, n, in.Session, j.Owner(), ts); err != nil {
			return err
		}
		if _, err := j.exec(ctx, c, `UPDATE calls SET state = ?, reason = '', owner = ?, kind = ?, kind_source = ?,
			updated_at = ? WHERE id = ?`, to, j.Owner(), kind, src, ts, callID); err != nil {
			return err
		}
		return j.appendDecision(ctx, c, callID, ActionRetry, in.Operator, ts, in.Note, in.Evidence, n)
	})
	if errors.Is(err, ErrCommitUnconfirmed) {
		return Call{}, Attempt{}, j.settleUnconfirmedRetry(ctx, callID, n, state, err)
	}
	if err != nil {
		return Call{}, Attempt{}, err
	}
	call, err := j.Get(ctx, callID)
	return call, Attempt{N: n, Session: in.Session, SentAt: now, Outcome: OutcomePending}, err
}

// DecisionInput is an operator's decision other than a retry.
type DecisionInput struct {
	Action   Action // query, abandon, mark or note
	Operator string
	Note     string
	Evidence json.RawMessage
	// Proposal, for a query, is the resolution the evidence suggests
	// ("applied", "not applied"); it is shown, never acted on by itself.
	Proposal string
}

// Decide appends a decision. Abandon and mark move the call through the
// state machine (refused with a *TransitionError, and nothing written, from
// states that do not allow them); query and note are allowed in any state
// and change nothing but the decision log (and the proposal, for a query);
// compensate changes nothing either, and is refused (*TransitionError) on
// a call that is not Compensable.
func (j *Journal) Decide(ctx context.Context, callID int64, in DecisionInput) error {
	var ev Event
	switch in.Action {
	case ActionAbandon:
		ev = EventAbandon
	case ActionMark:
		ev = EventMark
	case ActionQuery, ActionNote, ActionCompensate:
	case ActionRetry:
		return errors.New("use Retry to record a retry")
	case ActionAck:
		return errors.New("use Ack to record an ack")
	default:
		return fmt.Errorf("unknown decision %q", in.Action)
	}
	if in.Operator == "" {
		return errors.New("decision without an operator")
	}
	ts := formatTime(j.now())
	return j.write(ctx, deciding, func(ctx context.Context, c *sql.Conn) error {
		var state State
		err := j.queryRow(ctx, c, "SELECT state FROM calls WHERE id = ?"+j.forUpdate(""), callID).Scan(&state)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("call %d: %w", callID, ErrNoSuchCall)
		}
		if err != nil {
			return err
		}
		if in.Action == ActionCompensate && !Compensable(state) {
			return j.decidedBefore(ctx, c, callID, state, &TransitionError{From: state, Event: EventCompensate})
		}
		if ev != "" {
			to, err := Transition(state, ev)
			if err != nil {
				return j.decidedBefore(ctx, c, callID, state, err)
			}
			if _, err := j.exec(ctx, c, "UPDATE calls SET state = ?, updated_at = ? WHERE id = ?", to, ts, callID); err != nil {
				return err
			}
		}
		if in.Action == ActionQuery && in.Proposal != "" {
			if _, err := j.exec(ctx, c, "UPDATE calls SET proposal = ?, updated_at = ? WHERE id = ?", in.Proposal, ts, callID); err != nil {
				return err
			}
		}
		return j.appendDecision(ctx, c, callID, in.Action, in.Operator, ts, in.Note, in.Evidence, 0)
	})
}

// DecidedError refuses an operator's decision on a call that a decision
// before it (most often another operator's, a moment ago, from another
// console) already moved out of the state this one needs. It says who
// made that decision, where and when, so the loser of a race knows what
// happened instead of reading only that the transition is not allowed.
// It wraps the *TransitionError (so ErrIllegalTransition).
type DecidedError struct {
	CallID   int64
	Action   Action // the decision that moved the call
	Operator string
	Host     string
	Ago      time.Duration // from that decision to the refusal
	State    State         // the call's state now
	Refused  *TransitionError
}

func (e *DecidedError) Error() string {
	when := "already"
	if e.Ago < time.Minute {
		when = "just"
	}
	by := e.Operator
	if e.Host != "" {
		by += " on " + e.Host
	}
	return fmt.Sprintf("call %d was %s decided by %s (%s, %s ago) and is %s: cannot %s it; nothing was done",
		e.CallID, when, by, e.Action, timetext.Age(e.Ago), e.State, e.Refused.Event)
}

func (e *DecidedError) Unwrap() error { return e.Refused }

// decidedBefore turns a refused transition into a *DecidedError when the
// newest decision that moves calls (retry, abandon, mark) is on record for
// callID; otherwise (the state came from the server's answer, or from
// recovery) refused is returned as it is. Inside the deciding write, so the
// decision named is the one this write lost to.
func (j *Journal) decidedBefore(ctx context.Context, c *sql.Conn, callID int64, state State, refused error) error {
	var te *TransitionError
	if !errors.As(refused, &te) {
		return refused
	}
	var d DecidedError
	var at string
	err := j.queryRow(ctx, c, `SELECT action, operator, host, at FROM decisions
		WHERE call_id = ? AND action IN ('retry', 'abandon', 'mark') ORDER BY id DESC LIMIT 1`, callID).
		Scan(&d.Action, &d.Operator, &d.Host, &at)
	if errors.Is(err, sql.ErrNoRows) {
		return refused
	}
	if err != nil {
		return err
	}
	when, err := parseTime(at)
	if err != nil {
		return refused
	}
	d.CallID, d.State, d.Refused = callID, state, te
	d.Ago = j.now().Sub(when)
	return &d
}

// RecordEvent appends an event (dedupe hit, session started, ...) for stats.
// callID may be 0 for events that belong to no call.
func (j *Journal) RecordEvent(ctx context.Context, kind string, callID int64, detail string) error {
	ts := formatTime(j.now())
	return j.write(ctx, lazy, func(ctx context.Context, c *sql.Conn) error {
		var id any
		if callID != 0 {
			id = callID
		}
		_, err := j.exec(ctx, c, "INSERT INTO events (at, kind, call_id, detail) VALUES (?, ?, ?, ?)", ts, kind, id, detail)
		return err
	})
}

func nullJSON(b json.RawMessage) any {
	if len(b) == 0 {
		return nil
	}
	return string(b)
}

// attemptState reads, inside a write, the call's state, its newest attempt
// number and attempt n's outcome.
func (j *Journal) attemptState(ctx context.Context, c *sql.Conn, callID int64, n int) (state State, newest int, outcome AttemptOutcome, err error) {
	err = j.queryRow(ctx, c, `SELECT c.state, (SELECT max(n) FROM attempts WHERE call_id = c.id), a.outcome
		FROM calls c JOIN attempts a ON a.call_id = c.id AND a.n = ? WHERE c.id = ?`+j.forUpdate("c"), n, callID).Scan(&state, &newest, &outcome)
	if errors.Is(err, sql.ErrNoRows) {
		err = fmt.Errorf("call %d attempt %d: %w", callID, n, ErrNoSuchCall)
	}
	return state, newest, outcome, err
}

// Ack records that an operator has seen a call that settled late after its
// caller was told it was unknown, which ends the hold it kept on identical
// calls (SPEC §9). It changes no state; a call with nothing to acknowledge
// is refused (wrapping ErrIllegalTransition) and nothing is written.
func (j *Journal) Ack(ctx context.Context, callID int64, operator, note string) error {
	if operator == "" {
		return errors.New("ack without an operator")
	}
	ts := formatTime(j.now())
	return j.write(ctx, deciding, func(ctx context.Context, c *sql.Conn) error {
		var state State
		var lateAt, ackedAt string
		err := j.queryRow(ctx, c, "SELECT state, late_settled_at, acked_at FROM calls WHERE id = ?"+j.forUpdate(""), callID).
			Scan(&state, &lateAt, &ackedAt)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("call %d: %w", callID, ErrNoSuchCall)
		}
		if err != nil {
			return err
		}
		switch {
		case lateAt == "":
			return fmt.Errorf("call %d (%s) did not settle late, so it holds nothing to acknowledge: %w", callID, state, ErrIllegalTransition)
		case ackedAt != "":
			return fmt.Errorf("call %d was already acknowledged at %s: %w", callID, ackedAt, ErrIllegalTransition)
		}
		if _, err := j.exec(ctx, c, "UPDATE calls SET acked_at = ?, updated_at = ? WHERE id = ?", ts, ts, callID); err != nil {
			return err
		}
		return j.appendDecision(ctx, c, callID, ActionAck, operator, ts, note, nil, 0)
	})
}

// FlagConflict marks a call as contradicted by what the server said (a
// second, different answer to one request) and records why. It changes no
// state: the first answer stands, and the operator looks.
func (j *Journal) FlagConflict(ctx context.Context, callID int64, note string) error {
	ts := formatTime(j.now())
	return j.write(ctx, durable, func(ctx context.Context, c *sql.Conn) error {
		res, err := j.exec(ctx, c, "UPDATE calls SET conflict = 1, conflict_note = ?, updated_at = ? WHERE id = ?", note, ts, callID)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("call %d: %w", callID, ErrNoSuchCall)
		}
		_, err = j.exec(ctx, c, "INSERT INTO events (at, kind, call_id, detail) VALUES (?, ?, ?, ?)", ts, EventConflict, callID, note)
		return err
	})
}
