package guard

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/mcp-confirm/mcp-confirm/pending"
)

// Error classes the front-ends turn into exit codes and messages. Every
// error the guard returns wraps exactly one of them.
var (
	// ErrBadInput: the request is wrong; nothing was written or sent.
	ErrBadInput = errors.New("bad input")
	// ErrUnavailable: the server or the journal could not be used; nothing
	// was sent.
	ErrUnavailable = errors.New("unavailable")
	// ErrHeld: an identical call is in flight or unknown, or settled late
	// and not yet acknowledged; nothing was sent. It is the journal's own
	// sentinel, so errors.Is(err, ErrHeld) holds for a hold reported by
	// either layer; *HeldError, *LateSettledError and *KeyPendingError wrap it.
	ErrHeld = pending.ErrHeld
	// ErrNotAllowed: the decision is not allowed from the call's state.
	ErrNotAllowed = errors.New("not allowed")
)

// HeldError names the call that holds a new identical one back.
type HeldError struct {
	CallID int64
	State  pending.State
	Reason string
}

func (e *HeldError) Error() string {
	return fmt.Sprintf("an identical call (%d) is %s; nothing was sent", e.CallID, e.State)
}
func (e *HeldError) Unwrap() error { return ErrHeld }

// LateSettledError: an identical call was reported unknown to its caller,
// then settled late; until an operator acknowledges it ('ack'), or the
// policy's late_hold passes, an identical call is not sent and gets that
// call's outcome instead (SPEC §9). The Result returned with it carries the
// stored outcome (Stored, ReplayedFrom).
type LateSettledError struct {
	CallID int64
	State  pending.State
}

func (e *LateSettledError) Error() string {
	return fmt.Sprintf("call %d with the same arguments settled late (%s); nothing was sent", e.CallID, e.State)
}
func (e *LateSettledError) Unwrap() error { return ErrHeld }

// KeyReuseError: a caller's key already names a call with other arguments.
type KeyReuseError struct {
	CallID int64
	Fields []string // top-level arguments that differ; empty if only redacted ones do
}

func (e *KeyReuseError) Error() string {
	what := "redacted arguments"
	if len(e.Fields) > 0 {
		what = strings.Join(e.Fields, ", ")
	}
	return fmt.Sprintf("key already used by call %d with different arguments (%s)", e.CallID, what)
}
func (e *KeyReuseError) Unwrap() error { return ErrBadInput }

// KeyPendingError: a caller's key names a call that is still in flight or
// unknown; sending it again is a retry, which an operator decides.
type KeyPendingError struct {
	CallID int64
	State  pending.State
}

func (e *KeyPendingError) Error() string {
	return fmt.Sprintf("key already used by call %d, which is %s; nothing was sent", e.CallID, e.State)
}
func (e *KeyPendingError) Unwrap() error { return ErrHeld }

// The errors below say what is wrong and leave what to do to the front-end:
// only it knows its own commands and flags (the CLI's --tool, the
// console's query dialog).

// UnknownToolError: the server lists no tool of this name; nothing was sent.
type UnknownToolError struct{ Tool string }

func (e *UnknownToolError) Error() string {
	return fmt.Sprintf("bad input: the server has no tool %q", e.Tool)
}
func (e *UnknownToolError) Unwrap() error { return ErrBadInput }

// NoQueryError: a query was asked for a call of Tool without naming a
// query tool, and the policy names none (query_tool).
type NoQueryError struct{ Tool string }

func (e *NoQueryError) Error() string {
	return fmt.Sprintf("bad input: no query is configured for %s", e.Tool)
}
func (e *NoQueryError) Unwrap() error { return ErrBadInput }

// SettledKeyError: a caller's key names a call that cannot take this send.
// A failed call (State failed) is resent by its id (a retry); an applied or
// abandoned one is settled, and a new operation needs a new key.
type SettledKeyError struct {
	CallID int64
	State  pending.State
}

func (e *SettledKeyError) Error() string {
	if e.State == pending.StateFailed {
		return fmt.Sprintf("not allowed: key already used by call %d, which failed", e.CallID)
	}
	return fmt.Sprintf("not allowed: key already used by call %d, which is %s and settled; a new operation needs a new key", e.CallID, e.State)
}
func (e *SettledKeyError) Unwrap() error { return ErrNotAllowed }

// ServerMismatchError: query or retry would go to a server other than the
// one the call was made on.
type ServerMismatchError struct {
	CallID        int64
	Recorded, Now string // declared names
	// RecordedIdentity and NowIdentity are set when the way the server is
	// reached differs (ServerIdentity.String).
	RecordedIdentity, NowIdentity string
}

func (e *ServerMismatchError) Error() string {
	if e.RecordedIdentity != "" {
		return fmt.Sprintf("call %d was made on %s, not on %s; nothing was sent", e.CallID, e.RecordedIdentity, e.NowIdentity)
	}
	return fmt.Sprintf("call %d was made on server %q, but this server is %q; nothing was sent", e.CallID, e.Recorded, e.Now)
}
func (e *ServerMismatchError) Unwrap() error { return ErrNotAllowed }

// OutcomeNotRecordedError: the request went to the server, but the journal
// could not record how it ended. It is never "not sent": the call stays
// in_flight in the file, the next open recovers it as unknown, and callers
// must treat it as unknown (exit 3, the proxy's unknown answer).
type OutcomeNotRecordedError struct {
	CallID int64
	// Key is the call's idempotency key: when the journal lost its WAL,
	// CallID may be another call's there, and only the key finds this one.
	Key string
	Err error
	// What the server said, which the journal could not keep: the caller
	// must still see it (SPEC §9). Event is pending.EventSucceeded,
	// EventFailed or EventLost.
	Event  pending.Event
	Result json.RawMessage
	RPCErr json.RawMessage
}

func (e *OutcomeNotRecordedError) Error() string {
	if e.Key != "" {
		return fmt.Sprintf("call %d (key %s) was sent, but the journal could not record its outcome (%v)", e.CallID, e.Key, e.Err)
	}
	return fmt.Sprintf("call %d was sent, but the journal could not record its outcome (%v)", e.CallID, e.Err)
}
func (e *OutcomeNotRecordedError) Unwrap() error { return e.Err }

func badInput(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrBadInput, fmt.Sprintf(format, args...))
}

func unavailable(err error) error {
	return fmt.Errorf("%w: %w", ErrUnavailable, err)
}

// notAllowed turns the journal's refusals into ErrNotAllowed.
func journalErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, pending.ErrIllegalTransition):
		return fmt.Errorf("%w: %w", ErrNotAllowed, err)
	case errors.Is(err, pending.ErrNoSuchCall):
		return fmt.Errorf("%w: %w", ErrBadInput, err)
	}
	return unavailable(fmt.Errorf("journal: %w", err))
}

// KeyRetentionError refuses a retry made after the server's key retention
// (the policy's key_retention) has passed: the server may have forgotten
// the key, so a retry may do the write twice. RetryOptions.PastRetention
// overrides it.
type KeyRetentionError struct {
	CallID    int64
	Retention time.Duration // the policy's key_retention for the tool
	Since     time.Duration // since the call was made
}

func (e *KeyRetentionError) Error() string {
	return fmt.Sprintf("call %d was made %s ago, past the server's key retention of %s (policy key_retention): "+
		"the server may no longer recognise its key, so a retry may do it twice",
		e.CallID, e.Since.Round(time.Second), e.Retention)
}

func (e *KeyRetentionError) Unwrap() error { return ErrNotAllowed }
