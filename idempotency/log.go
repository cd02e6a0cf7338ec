package idempotency

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/server"
)

// WriteOutcome is what the middleware did with one write it saw, as it logs
// and counts it.
type WriteOutcome string

// Write outcomes. Executed means the handler ran (whatever it answered);
// every other outcome but Bypassed and Rejected means it did not.
const (
	OutcomeExecuted           WriteOutcome = "executed"            // the handler ran
	OutcomeReplayed           WriteOutcome = "replayed"            // a key's stored result returned
	OutcomeInProgress         WriteOutcome = "in_progress"         // the key's first execution still runs
	OutcomeLeaseExpired       WriteOutcome = "lease_expired"       // the key's execution may have died: answered in progress or unknown
	OutcomeKeyReuseRefused    WriteOutcome = "key_reuse_refused"   // other arguments under a key
	OutcomeDeduplicatedWindow WriteOutcome = "deduplicated_window" // an identical keyless call inside the window answered for it
	OutcomeBypassed           WriteOutcome = "bypassed"            // keyless, said intentional-repeat: ran without the window
	OutcomeRejected           WriteOutcome = "rejected"            // the handler rejected it before any effect (Reject)
	OutcomeInvalid            WriteOutcome = "invalid"             // an unusable key or arguments: refused
	OutcomeStoreFailed        WriteOutcome = "store_failed"        // the store could not be reached: nothing ran
)

var writeOutcomes = []WriteOutcome{OutcomeExecuted, OutcomeReplayed, OutcomeInProgress, OutcomeLeaseExpired,
	OutcomeKeyReuseRefused, OutcomeDeduplicatedWindow, OutcomeBypassed, OutcomeRejected, OutcomeInvalid, OutcomeStoreFailed}

// WithLogger makes the middleware log every write it sees, once, when it has
// answered: message "write", with the tool, the key or the window
// fingerprint (never an argument's value), the session id and client name,
// the arrival time and the outcome, and the start of each session
// (ObserveSessions). Levels: Info, Warn for store failures.
func WithLogger(l *slog.Logger) Option {
	return func(m *Middleware) error {
		m.log = l
		return nil
	}
}

// write is one call the middleware saw, filled in as it is handled.
type write struct {
	tool     string
	key      string // the caller's key, or ""
	window   string // the window fingerprint of a keyless call judged (or bypassed), or ""
	session  string
	client   string // declared in initialize, as sent
	arrived  time.Time
	outcome  WriteOutcome
	answer   EventKind       // for OutcomeDeduplicatedWindow: replayed, in_progress or lease_expired
	fields   []string        // for OutcomeKeyReuseRefused: names of the differing arguments
	tookOver State           // the state of an unexpired record this execution replaced
	bypass   string          // "meta" or "argument" for OutcomeBypassed
	declared map[string]bool // WrapTool: the arguments the window compares; nil: all
}

// sessionOf is the MCP session of a call and the client name declared for
// it: in the request itself (protocol 2026-07-28, which has no handshake),
// else on the session (the initialize handshake).
func sessionOf(ctx context.Context) (id, client string) {
	s := server.ClientSessionFromContext(ctx)
	if s != nil {
		id = s.SessionID()
	}
	if info := server.RequestProtocolInfoFromContext(ctx); info != nil && info.ClientInfo != nil {
		return id, info.ClientInfo.Name
	}
	if ci, ok := s.(server.SessionWithClientInfo); ok {
		client = ci.GetClientInfo().Name
	}
	return id, client
}

// observe logs and counts a write once it is answered.
func (m *Middleware) observe(ctx context.Context, w *write) {
	if m.metrics != nil {
		m.metrics.writes.WithLabelValues(string(w.outcome)).Inc()
	}
	if m.log == nil {
		return
	}
	level := slog.LevelInfo
	if w.outcome == OutcomeStoreFailed {
		level = slog.LevelWarn
	}
	if !m.log.Enabled(ctx, level) {
		return
	}
	attrs := make([]slog.Attr, 0, 10)
	attrs = append(attrs, slog.String("outcome", string(w.outcome)), slog.String("tool", w.tool))
	switch {
	case w.key != "":
		attrs = append(attrs, slog.String("key", w.key))
	case w.window != "":
		attrs = append(attrs, slog.String("window", w.window))
	}
	attrs = append(attrs, slog.String("session", w.session), slog.String("client", cleanName(w.client)),
		slog.Time("arrived", w.arrived))
	if w.answer != "" {
		attrs = append(attrs, slog.String("answer", string(w.answer)))
	}
	if len(w.fields) > 0 {
		attrs = append(attrs, slog.String("fields", strings.Join(w.fields, ",")))
	}
	if w.tookOver != "" {
		attrs = append(attrs, slog.String("took_over", string(w.tookOver)))
	}
	if w.bypass != "" {
		attrs = append(attrs, slog.String("bypass", w.bypass))
	}
	m.log.LogAttrs(ctx, level, "write", attrs...)
}

// maxNameLen bounds a client name in logs and metric labels.
const maxNameLen = 64

// cleanName is a client-declared name safe to log and to use as a label:
// letters, digits and ". _ - / @ +" kept, anything else '_', at most
// maxNameLen bytes; "" for an empty name.
func cleanName(name string) string {
	var b strings.Builder
	for _, r := range name {
		if b.Len() >= maxNameLen {
			break
		}
		switch {
		case 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z', '0' <= r && r <= '9', strings.ContainsRune("._-/@+", r):
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	return b.String()
}
