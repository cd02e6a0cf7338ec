package idempotency

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"time"
)

// The _meta keys this package reads and writes. The prefix avoids the labels
// "mcp" and "modelcontextprotocol", which the MCP spec reserves.
const (
	// MetaKey carries the idempotency key in a request's _meta.
	MetaKey = "io.github.mcp-confirm/idempotency-key"
	// MetaReplayed is true on a result that was stored earlier and replayed.
	MetaReplayed = "io.github.mcp-confirm/replayed"
	// MetaShouldRetry says whether resending the same call with the same key
	// can help; it is left out when the server cannot know.
	MetaShouldRetry = "io.github.mcp-confirm/should-retry"
)

// State is the state of one key's record.
type State string

// The states of a record; the strings are stored as they are.
const (
	StateProcessing State = "processing"
	StateCompleted  State = "completed"
	StateFailed     State = "failed"
)

// Record is what a Store keeps for one idempotency key.
type Record struct {
	Key         string // the caller's key, or "window " + Fingerprint for a dedupe-window record
	Tool        string
	Fingerprint string          // SHA-256 hex of Args (window: of tool, Args and scope)
	Args        json.RawMessage // canonical JSON of the arguments without the key argument
	State       State
	Owner       string    // token of the execution that holds or held the claim
	LeaseUntil  time.Time // a processing record's claim is trusted until then
	Result      json.RawMessage
	Retryable   bool // a failed record may run again under the same key
	Attempts    int  // executions started under this key
	CreatedAt   time.Time
	UpdatedAt   time.Time
	ExpiresAt   time.Time // after this the record is as good as absent
}

// Outcome is how an execution ended, as the store records it.
//
// State processing means "the handler stopped without saying what happened":
// the record stays processing but its lease ends at At, so repeats are told
// the outcome is unknown instead of waiting for a lease that nobody renews.
type Outcome struct {
	State     State
	Result    json.RawMessage
	Retryable bool
	At        time.Time
}

// Effect runs inside the transaction that finishes a record and returns the
// outcome to store. Its writes and the record's new state commit together, or
// not at all.
type Effect func(tx *sql.Tx) (Outcome, error)

// Store keeps records. It works on *sql.Tx so that a handler's own tables can
// share the transaction; SQLiteStore is the default, and the SQL is kept
// portable so a PostgreSQL store is a driver away.
type Store interface {
	// Claim inserts rec if no record has rec.Key and reports claimed. Otherwise
	// it returns the record found, and replaces it with rec (claimed) only if
	// takeOver approves it; the check and the replacement are atomic.
	Claim(ctx context.Context, rec Record, takeOver func(prev Record) bool) (prev *Record, claimed bool, err error)
	// Finish runs effect and stores its outcome on the record that owner
	// claimed, in one transaction. If owner no longer holds a processing
	// claim on key it returns ErrLeaseLost and nothing is committed. Any error
	// means nothing was committed.
	Finish(ctx context.Context, key, owner string, effect Effect) error
	// Release deletes the processing record owner holds on key, as if the key
	// had never been seen (for requests rejected before any effect).
	Release(ctx context.Context, key, owner string) error
	// InTx runs fn in a transaction of its own, for handlers called without a
	// key that still commit through Commit.
	InTx(ctx context.Context, fn func(tx *sql.Tx) error) error
}

// ErrLeaseLost means the execution no longer holds the claim on its key:
// another execution took it over after the lease expired.
var ErrLeaseLost = errors.New("idempotency: claim on key no longer held")
