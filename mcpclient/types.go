// Package mcpclient runs one MCP server as a child process and talks to it
// over stdio: spawn, handshake, lazy restart, tool calls with two clocks,
// progress, cancellation, and results that arrive after a call was given up.
//
// It knows nothing of the journal. What it guarantees the engine is an honest
// Delivery for every call: a result or a JSON-RPC error only when the server
// answered with one that is well formed (ClassifyResult; never what a lenient
// decoder makes of a broken answer), NotSent only when provably no byte of
// the request reached the server's stdin, and Unknown for everything in
// between, an unusable answer included, whose bytes it then carries as
// evidence. Answers that come after a call ended, and second answers to one
// request, reach Options.OnLateResult classified the same way.
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

// DeliveryKind says whether a call's request was sent and how it was answered.
type DeliveryKind string

// Delivery kinds.
const (
	DeliveryResult   DeliveryKind = "result"    // the server answered with a CallToolResult (isError may be true)
	DeliveryRPCError DeliveryKind = "rpc_error" // the server answered with a JSON-RPC error to a request we had not cancelled
	DeliveryUnknown  DeliveryKind = "unknown"   // the request was (at least partly) written and no definite answer came
	DeliveryNotSent  DeliveryKind = "not_sent"  // provably no byte of the request was written
)

// UnknownReason says why an outcome is unknown. Its text is what the
// journal stores as the call's reason and what people are shown (the
// console's "why" column, the CLI's reason), so it is worded for them and
// must not change; the engine may add detail after it ("cancelled: the
// operator quit the console").
type UnknownReason string

// Reasons for an unknown outcome.
const (
	ReasonIdleTimeout     UnknownReason = "idle timeout"      // no answer and no progress within IdleTimeout
	ReasonAbsoluteTimeout UnknownReason = "absolute timeout"  // MaxTotal since the call began
	ReasonConnectionLost  UnknownReason = "connection lost"   // the process exited or a pipe broke
	ReasonCancelled       UnknownReason = "cancelled"         // the caller's context ended
	ReasonProtocolError   UnknownReason = "unreadable answer" // the server sent something that cannot be read as an answer
)

// Clock names the clock that fired for a timeout, as the journal records
// it for the attempt: "idle", "absolute", or "" for the other reasons.
func (r UnknownReason) Clock() string {
	switch r {
	case ReasonIdleTimeout:
		return "idle"
	case ReasonAbsoluteTimeout:
		return "absolute"
	}
	return ""
}

// Errors that Delivery.Err and the other methods wrap, for errors.Is.
var (
	ErrIdleTimeout     = errors.New("no response or progress within the idle timeout")
	ErrAbsoluteTimeout = errors.New("no response within the maximum total time")
	ErrConnectionLost  = errors.New("connection to the MCP server lost")
	ErrClosed          = errors.New("mcp client closed")
	// ErrListTimeout: no answer to tools/list within ListTimeout
	// (a *ListTimeoutError says how long).
	ErrListTimeout = errors.New("no answer to tools/list within the list timeout")
	// ErrUnusableAnswer: the server answered with something that is not a
	// usable answer (AnswerUnusable); the outcome is unknown.
	ErrUnusableAnswer = errors.New("the server's answer is not usable")
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

// Delivery is everything known about one call when Call returns: whether
// its request reached the server, and what, if anything, the server answered.
// It is not yet a journal outcome; the engine makes one from it.
type Delivery struct {
	Kind       DeliveryKind
	ResultJSON json.RawMessage // DeliveryResult: the CallToolResult exactly as the server sent it (MCP JSON)
	RPCError   *RPCError       // DeliveryRPCError
	Reason     UnknownReason   // DeliveryUnknown
	Session    int             // the session the request went to (0 if none could start)
	RPCID      string          // JSON-RPC id of the last tools/call request written; ids restart with every session
	SentAt     time.Time       // first byte written; zero for DeliveryNotSent
	EndedAt    time.Time
	Err        error // nil for DeliveryResult; what went wrong otherwise (wraps ErrUnusableAnswer when Why is set)
	// Resumed: over HTTP, the response stream broke and the answer came on
	// the stream resumed with Last-Event-ID (ReasonResumed): it is the
	// answer to the one request sent; nothing was resent.
	Resumed bool

	// Set when the outcome is unknown because the server's answer was not
	// usable (Reason is then ReasonProtocolError): Raw is the answer line as
	// received (whitespace around it trimmed), at most 64 KiB of it, cut when
	// longer (RawTruncated); Why says in a few words what is wrong with it.
	// Raw is evidence, not JSON: it may be invalid (that may be why it is
	// unusable, and a cut line always is), so keep it as bytes or text;
	// json.Marshal fails on a json.RawMessage that is not valid JSON.
	Raw          json.RawMessage
	RawTruncated bool
	Why          string
}

// LateResult is an answer to a call that had already ended as unknown, or
// (Second) a further answer to a request already answered, however its call
// ended. It arrives on the same session, from Options.OnLateResult.
//
// Class says what the answer is, as for a live one: ResultJSON is set only
// for AnswerResult, RPCError only for AnswerRPCError; an AnswerUnusable
// answer has neither, only Raw and Why, and settles nothing (evidence only).
// Class is never empty in what the session delivers.
type LateResult struct {
	Key        string
	Tool       string
	Session    int
	RPCID      string
	Class      AnswerClass
	ResultJSON json.RawMessage // AnswerResult: the CallToolResult as the server sent it
	RPCError   *RPCError       // AnswerRPCError
	// AnswerUnusable: the answer line as received, bounded and cut as
	// Delivery.Raw is (and, like it, not necessarily valid JSON), and what is
	// wrong with it.
	Raw          json.RawMessage
	RawTruncated bool
	Why          string
	// Second is true for an answer to a request that had already been
	// answered: the first answer stands (it is the call's outcome, or the
	// first LateResult); this one is an event, a conflict when it says
	// something else. It may arrive before the Call it answers returns.
	// At most maxSecondAnswers (4) per request are delivered, and only for
	// the last answeredWindow (1024) answered requests of the session:
	// anything beyond is dropped (read off the pipe, never passed on).
	Second bool
	// AfterCancel is true when we had already cancelled this request: sent
	// notifications/cancelled for it, or given up the session (which closes
	// the server's stdin). An error then (mcp-go servers answer -32603
	// "context canceled") is evidence, not a definite failure: the handler
	// may have committed before it saw the cancel.
	AfterCancel bool
	At          time.Time
}
