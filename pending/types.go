package pending

import (
	"encoding/json"
	"time"
)

// Call is one business operation: one tool, one argument object, one key.
// The JSON names are the contract of SPEC §4.
type Call struct {
	ID          int64  `json:"id"`
	State       State  `json:"state"`
	Reason      string `json:"reason"`
	Server      string `json:"server"`
	ServerAlias string `json:"server_alias,omitempty"`
	// ServerIdentity says how the server was reached (guard.ServerIdentity's
	// JSON); empty for calls recorded before it was kept.
	ServerIdentity json.RawMessage `json:"server_identity,omitempty"`
	Tool           string          `json:"tool"`
	Kind           Kind            `json:"kind"`
	KindSource     KindSource      `json:"kind_source"`
	Key            string          `json:"key"`
	Args           json.RawMessage `json:"args"`
	Fingerprint    string          `json:"fingerprint"`
	CreatedAt      time.Time       `json:"created_at"`
	UpdatedAt      time.Time       `json:"updated_at"`
	Conflict       bool            `json:"conflict"`
	ConflictNote   string          `json:"conflict_note,omitempty"`
	Proposal       string          `json:"proposal,omitempty"`
	// LateSettledAt is when an answer settled the call after its caller had
	// been told it was unknown; until AckedAt is set (an operator's ack),
	// identical calls are held and answered with this call's outcome.
	LateSettledAt *time.Time `json:"late_settled_at,omitempty"`
	AckedAt       *time.Time `json:"acked_at,omitempty"`
	Owner         string     `json:"-"`
	// RedactedSeals are the seals of the values redaction took out of the
	// arguments (Journal.RedactedValue tells them); never the values.
	RedactedSeals []string   `json:"-"`
	Attempts      []Attempt  `json:"attempts,omitempty"`
	Decisions     []Decision `json:"decisions,omitempty"`
	// AttemptCount is filled by List, which leaves Attempts out.
	AttemptCount int `json:"attempt_count"`
	// Compensates is the call this one was made to undo (mcp-confirm
	// compensate), 0 for none; CompensatedBy, filled by Get, are the calls
	// made to undo this one.
	Compensates   int64   `json:"compensates,omitempty"`
	CompensatedBy []int64 `json:"compensated_by,omitempty"`
	// UndoneBy, filled by Get and List, is the newest call made to undo
	// this one that succeeded or was marked applied: the call is undone,
	// and another cancel of it would be refused. 0 for none.
	UndoneBy int64 `json:"undone_by,omitempty"`
}

// Attempt is one send of a call over one session.
type Attempt struct {
	N       int             `json:"n"`
	Session int             `json:"session"`
	RPCID   string          `json:"rpc_id,omitempty"`
	SentAt  time.Time       `json:"sent_at"`
	EndedAt *time.Time      `json:"ended_at"`
	Outcome AttemptOutcome  `json:"outcome"` // pending, succeeded, failed, unknown
	Reason  string          `json:"reason,omitempty"`
	Clock   string          `json:"clock,omitempty"` // idle, absolute
	Result  json.RawMessage `json:"result,omitempty"`
	Error   json.RawMessage `json:"error,omitempty"`
	Late    bool            `json:"late,omitempty"`
}

// AttemptOutcome is how an attempt ended, as the attempts table stores it
// (the word an Outcome is recorded as).
type AttemptOutcome string

// Attempt outcomes as stored. "pending" means sent (or about to be) with
// no outcome recorded yet.
const (
	OutcomePending   AttemptOutcome = "pending"
	OutcomeSucceeded AttemptOutcome = "succeeded"
	OutcomeFailed    AttemptOutcome = "failed"
	OutcomeUnknown   AttemptOutcome = "unknown"
)

// Action is what an operator decided.
type Action string

const (
	ActionQuery   Action = "query"
	ActionRetry   Action = "retry"
	ActionAbandon Action = "abandon"
	ActionMark    Action = "mark"
	ActionNote    Action = "note"
	ActionAck     Action = "ack" // the operator has seen a late settle; the hold it kept ends
	// ActionCompensate: the operator had a call made to undo this one (the
	// policy's cancel_tool); that call's Compensates names this one.
	ActionCompensate Action = "compensate"
)

// Decision is an append-only journal row: who decided what, when, and what
// came of it.
type Decision struct {
	ID       int64           `json:"id"`
	Action   Action          `json:"action"`
	Operator string          `json:"operator"`
	Host     string          `json:"host,omitempty"` // the machine it was made on; "" before schema 6
	At       time.Time       `json:"at"`
	Note     string          `json:"note"`
	Evidence json.RawMessage `json:"evidence"`
	Attempt  int             `json:"attempt,omitempty"` // the attempt a retry started
	// PrevHash and Hash chain the decision log (chain.go): the hash of the
	// decision before this one in the journal, and this one's own.
	PrevHash string `json:"prev_hash"`
	Hash     string `json:"hash"`
}

// Event kinds recorded in the events table (for stats).
const (
	EventDedupeHit      = "dedupe_hit"
	EventSessionStarted = "session_started"
	EventRecovery       = "recovery"
	EventLateResult     = "late_result"
	// EventCancelAnswer is the server's answer to our cancel of an attempt:
	// how its handler ended when asked to stop, evidence but not a late
	// result (it says nothing of whether the work took effect).
	EventCancelAnswer   = "cancel_answer"
	EventConflict       = "conflict"
	EventSecondAnswer   = "second_answer" // a further answer to a request already answered
	EventUnusableAnswer = "unusable_answer"
	// EventResent: the write was sent once more, as its next attempt, with
	// the same key, because the server provably had not run the attempt
	// before (over HTTP: it no longer knew the session, SPEC §9).
	EventResent = "resent"
	// EventCopied: the call was copied from another journal (Copy); the
	// detail names it and the call's id there.
	EventCopied = "copied"
	// EventResumed: over HTTP, the attempt's response stream broke and its
	// answer came on the stream resumed with Last-Event-ID; not resent.
	EventResumed = "resumed"
)

// ReasonRecovered is the reason a call left in flight by a dead process gets.
const ReasonRecovered = "recovered after unclean shutdown"
