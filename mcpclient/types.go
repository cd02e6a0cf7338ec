// Package mcpclient runs one MCP server as a child process and talks to it
// over stdio: spawn, handshake, lazy restart, tool calls with two clocks,
// progress, cancellation, and results that arrive after a call was given up.
//
// It knows nothing of the journal. What it guarantees the engine is an honest
// Outcome for every call: a result or a JSON-RPC error only when the server
// answered, NotSent only when provably no byte of the request reached the
// server's stdin, and Unknown for everything in between.
package mcpclient

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// KeyMetaField is the _meta field that carries the idempotency key. No label
// is exactly "mcp" or "modelcontextprotocol", so no protocol version reserves it.
const KeyMetaField = "io.github.mcp-confirm/idempotency-key"

// ServerInfo is what the server declared about itself in the handshake.
type ServerInfo struct {
	Name     string // serverInfo.name, or io.modelcontextprotocol/serverInfo in _meta (2026-07-28)
	Version  string
	Protocol string // the negotiated protocol version
	// Title and Instructions as the server declared them (the proxy shows
	// them to its host).
	Title        string
	Instructions string
}

// SessionState is the life of the current server process, as State reports it.
type SessionState string

// Session states.
const (
	StateNew        SessionState = "new"        // Start not called yet
	StateStarting   SessionState = "starting"   // session 1 is being spawned and handshaken
	StateRunning    SessionState = "running"    // a live, handshaken session
	StateRestarting SessionState = "restarting" // a later session is being spawned
	StateExited     SessionState = "exited"     // the last session is gone; the next call restarts it
	StateClosed     SessionState = "closed"     // Close was called
)

// OutcomeKind says what is known about a call.
type OutcomeKind string

// Outcome kinds.
const (
	OutcomeResult   OutcomeKind = "result"    // the server answered with a CallToolResult (isError may be true)
	OutcomeRPCError OutcomeKind = "rpc_error" // the server answered with a JSON-RPC error to a request we had not cancelled
	OutcomeUnknown  OutcomeKind = "unknown"   // the request was (at least partly) written and no definite answer came
	OutcomeNotSent  OutcomeKind = "not_sent"  // provably no byte of the request was written
)

// UnknownReason says why an outcome is unknown.
type UnknownReason string

// Reasons for an unknown outcome.
const (
	ReasonIdleTimeout     UnknownReason = "idle_timeout"     // no answer and no progress within IdleTimeout
	ReasonAbsoluteTimeout UnknownReason = "absolute_timeout" // MaxTotal since the call began
	ReasonConnectionLost  UnknownReason = "connection_lost"  // the process exited or a pipe broke
	ReasonCancelled       UnknownReason = "cancelled"        // the caller's context ended
	ReasonProtocolError   UnknownReason = "protocol_error"   // the server sent something that cannot be read as an answer
)

// Errors that Outcome.Err and the other methods wrap, for errors.Is.
var (
	ErrIdleTimeout     = errors.New("no response or progress within the idle timeout")
	ErrAbsoluteTimeout = errors.New("no response within the maximum total time")
	ErrConnectionLost  = errors.New("connection to the MCP server lost")
	ErrClosed          = errors.New("mcp client closed")
)

// RPCError is a JSON-RPC error object as the server sent it.
type RPCError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *RPCError) Error() string {
	return fmt.Sprintf("json-rpc error %d: %s", e.Code, e.Message)
}

// Progress is one notifications/progress for a call.
type Progress struct {
	Progress float64
	Total    float64 // 0 when the server did not say
	Message  string
	At       time.Time
}

// Outcome is everything known about one call when Call returns.
type Outcome struct {
	Kind       OutcomeKind
	ResultJSON json.RawMessage // OutcomeResult: the CallToolResult exactly as the server sent it (MCP JSON)
	RPCError   *RPCError       // OutcomeRPCError
	Reason     UnknownReason   // OutcomeUnknown
	Session    int             // the session the request went to (0 if none could start)
	RPCID      string          // JSON-RPC id of the last tools/call request written; ids restart with every session
	SentAt     time.Time       // first byte written; zero for OutcomeNotSent
	EndedAt    time.Time
	Err        error // nil for OutcomeResult; what went wrong otherwise
}

// LateResult is an answer to a call that had already ended as unknown. It
// arrives on the same session, from Options.OnLateResult.
type LateResult struct {
	Key        string
	Tool       string
	Session    int
	RPCID      string
	ResultJSON json.RawMessage // the CallToolResult as the server sent it
	RPCError   *RPCError
	// AfterCancel is true when we had already cancelled this request: sent
	// notifications/cancelled for it, or given up the session (which closes
	// the server's stdin). An error then (mcp-go servers answer -32603
	// "context canceled") is evidence, not a definite failure: the handler
	// may have committed before it saw the cancel.
	AfterCancel bool
	At          time.Time
}
