package pending

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/mcp-confirm/mcp-confirm/canonical"
)

// Copying a journal into another (issue 22: a single user's SQLite file
// into the team's PostgreSQL journal). Every call is copied whole, with its
// attempts and decisions, under a new id; the decisions are appended to the
// target's chain (new ids and hashes; the operator, host, time, note and
// evidence kept), in the order the source made them. Each call is checked
// afterwards against its copy by a checksum of everything but its ids.
//
// The fingerprints are the hard part. The source stored each as an HMAC
// under its own secret, and the target matches identical calls (the resend
// hold) under its secret, so a fingerprint must be sealed again. An HMAC
// cannot be undone, but the fingerprint can be made again from the stored
// arguments: when one of the caller's candidates (Fingerprints) sealed
// under the source's secret gives the stored value, it is the preimage, and
// the target seals it. A call whose arguments were redacted cannot be so
// re-made; if it could still hold a resend back (it is not terminal, or it
// settled late and was not acknowledged), the copy is refused, because in
// the target it would silently stop doing so — unless the caller says it
// knows (CopyOptions.Unheld). Its copy gets a fingerprint that matches
// nothing, and the seals of its redacted values (which mask them in later
// answers) are dropped, for the same reason.

// CopyOptions says how Copy treats what it cannot copy as it is.
type CopyOptions struct {
	// Fingerprints gives the unsealed fingerprints a call's stored
	// arguments may have been made of (the guard's forms, for each
	// possible key argument). Nil: no fingerprint is re-made.
	Fingerprints func(Call) []string
	// SkipExisting leaves out a call whose server, tool and key the target
	// already holds with the same content (a copy run again); a call of
	// that key with other content still refuses the copy.
	SkipExisting bool
	// Unheld copies open calls whose fingerprint cannot be carried over.
	Unheld bool
	// Progress, when set, is told of each call copied.
	Progress func(done, total int)
}

// CopyReport is what Copy did.
type CopyReport struct {
	Calls     int         `json:"calls"` // calls in the source
	Copied    int         `json:"copied"`
	Skipped   int         `json:"skipped"` // already in the target, the same
	Attempts  int         `json:"attempts"`
	Decisions int         `json:"decisions"`
	Resealed  int         `json:"resealed"` // fingerprints sealed again under the target's secret
	Unheld    []int64     `json:"unheld,omitempty"`
	Copies    []CallCopy  `json:"copies"`
	Chain     ChainReport `json:"chain"` // the target's chain after the copy
}

// CallCopy is one call copied: its id in each journal, and the checksum
// both agree on.
type CallCopy struct {
	From     int64  `json:"from"`
	To       int64  `json:"to"`
	Checksum string `json:"checksum"`
}

// CopyRefusedError says why nothing was copied.
type CopyRefusedError struct {
	Reason string
	Calls  []int64 // the source's calls concerned
}

func (e *CopyRefusedError) Error() string { return e.Reason }

// ErrCopyMismatch: a copied call does not read back as its source.
var ErrCopyMismatch = errors.New("a copied call does not match its source")

// copyBatch is how many calls one transaction of the target copies: a copy
// that fails between two leaves only whole calls behind, and run again with
// SkipExisting it goes on where it stopped.
const copyBatch = 200

// Copy copies every call of src into dst. Both must be open for writing
// (each with its secret); src should have no process sending on it. It
// refuses, copying nothing, when a call is in flight in src, when dst holds
// a call of the same server, tool and key (unless SkipExisting and the
// same), or when an open call's fingerprint cannot be carried (unless
// Unheld).
func Copy(ctx context.Context, src, dst *Journal, o CopyOptions) (CopyReport, error) {
	var rep CopyReport
	if src.readOnly || dst.readOnly || src.secret == nil || dst.secret == nil {
		return rep, errors.New("journal copy needs both journals open for writing")
	}
	var calls []Call
	if err := src.Export(ctx, time.Time{}, func(c Call) error { calls = append(calls, c); return nil }); err != nil {
		return rep, fmt.Errorf("read %s: %w", src.Path(), err)
	}
	sort.Slice(calls, func(a, b int) bool { return calls[a].ID < calls[b].ID })
	rep.Calls = len(calls)

	var inFlight, lost []int64
	sameSecret := hmac.Equal(src.secret, dst.secret)
	fps := make([]string, len(calls))
	for i, c := range calls {
		if c.State == StateInFlight {
			inFlight = append(inFlight, c.ID)
			continue
		}
		fp, ok := carriedFingerprint(c, src, dst, sameSecret, o.Fingerprints)
		switch {
		case ok && !sameSecret && fp != c.Fingerprint:
			rep.Resealed++
		case !ok && canHold(c):
			lost = append(lost, c.ID)
		}
		fps[i] = fp
	}
	if len(inFlight) > 0 {
		return rep, &CopyRefusedError{Calls: inFlight, Reason: fmt.Sprintf(
			"%s has %s in flight (a process is sending on it): stop the processes using it, then copy", src.Path(), plural(len(inFlight), "call"))}
	}
	if len(lost) > 0 && !o.Unheld {
		return rep, &CopyRefusedError{Calls: lost, Reason: fmt.Sprintf(
			"%s with redacted arguments %s still open, and %s fingerprint cannot be sealed for the target: copied, %s would no longer hold back an identical new call; "+
				"decide %s in the source first, or copy anyway with --unheld", plural(len(lost), "call"), isAre(len(lost)), itsTheir(len(lost)), itThey(len(lost)), itThem(len(lost)))}
	}
	rep.Unheld = lost

	// Which keys the target holds already.
	existing := map[int64]int64{} // source id -> target id
	var clash []int64
	for _, c := range calls {
		var id int64
		err := dst.read.QueryRowContext(ctx, "SELECT id FROM calls WHERE server = ? AND tool = ? AND key = ?", c.Server, c.Tool, c.Key).Scan(&id)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return rep, fmt.Errorf("read %s: %w", dst.Path(), err)
		}
		if !o.SkipExisting {
			clash = append(clash, c.ID)
			continue
		}
		there, err := dst.Get(ctx, id)
		if err != nil {
			return rep, err
		}
		if CallChecksum(there) != CallChecksum(c) {
			return rep, &CopyRefusedError{Calls: []int64{c.ID}, Reason: fmt.Sprintf(
				"call %d of %s has the key of call %d in the target, but not its content: they are different calls with one key; nothing was copied", c.ID, src.Path(), id)}
		}
		existing[c.ID] = id
	}
	if len(clash) > 0 {
		return rep, &CopyRefusedError{Calls: clash, Reason: fmt.Sprintf(
			"the target already holds %s with the same server, tool and key as the source's (first: call %d); "+
				"if it is a copy run before, add --skip-existing to copy the rest", plural(len(clash), "call"), clash[0])}
	}

	// A cancel names the call it undoes by id, and ids change in the copy:
	// the link is mapped. The undone call always has the lower id, so it
	// is copied (or found) first.
	copied := map[int64]int64{}
	for from, to := range existing {
		copied[from] = to
	}
	for start := 0; start < len(calls); start += copyBatch {
		end := min(start+copyBatch, len(calls))
		var copies []CallCopy
		err := dst.write(ctx, deciding, func(ctx context.Context, c *sql.Conn) error {
			copies = copies[:0]
			var decisions []copiedDecision
			for i := start; i < end; i++ {
				call := calls[i]
				if id, ok := existing[call.ID]; ok {
					copies = append(copies, CallCopy{From: call.ID, To: id, Checksum: CallChecksum(call)})
					continue
				}
				var compensates int64
				if call.Compensates != 0 {
					var ok bool
					if compensates, ok = copied[call.Compensates]; !ok {
						return fmt.Errorf("copy call %d: the call it undoes, %d, is not in the copy", call.ID, call.Compensates)
					}
				}
				id, err := dst.insertCopy(ctx, c, call, compensates, fps[i], sameSecret, src.Path())
				if err != nil {
					return fmt.Errorf("copy call %d: %w", call.ID, err)
				}
				copied[call.ID] = id
				copies = append(copies, CallCopy{From: call.ID, To: id})
				for _, d := range call.Decisions {
					decisions = append(decisions, copiedDecision{to: id, d: d})
				}
			}
			sort.Slice(decisions, func(a, b int) bool { return decisions[a].d.ID < decisions[b].d.ID })
			for _, cd := range decisions {
				d := cd.d
				if err := dst.appendDecisionAs(ctx, c, cd.to, d.Action, d.Operator, d.Host, formatTime(d.At), d.Note, d.Evidence, d.Attempt); err != nil {
					return fmt.Errorf("copy decision %d: %w", d.ID, err)
				}
			}
			return nil
		})
		if err != nil {
			return rep, fmt.Errorf("copy into %s (calls before %d are copied; run again with --skip-existing to go on): %w",
				dst.Path(), calls[start].ID, err)
		}
		// Read back: each copy must be its source.
		for k, cp := range copies {
			src := calls[start+k]
			got, err := dst.Get(ctx, cp.To)
			if err != nil {
				return rep, err
			}
			if sum := CallChecksum(src); CallChecksum(got) != sum {
				return rep, fmt.Errorf("%w: call %d, copied as %d", ErrCopyMismatch, src.ID, cp.To)
			} else {
				cp.Checksum = sum
			}
			if _, skipped := existing[src.ID]; skipped {
				rep.Skipped++
			} else {
				rep.Copied++
				rep.Attempts += len(src.Attempts)
				rep.Decisions += len(src.Decisions)
			}
			rep.Copies = append(rep.Copies, cp)
			if o.Progress != nil {
				o.Progress(len(rep.Copies), len(calls))
			}
		}
	}
	chain, err := dst.VerifyChain(ctx)
	rep.Chain = chain
	return rep, err
}

type copiedDecision struct {
	to int64
	d  Decision
}

// insertCopy writes call (not its decisions) into this journal, with the
// fingerprint fp ("": not carried), and an event saying where it came from.
// The seals of redacted values are kept only under the same secret.
func (j *Journal) insertCopy(ctx context.Context, c *sql.Conn, call Call, compensates int64, fp string, sameSecret bool, from string) (int64, error) {
	var seals string
	if sameSecret {
		seals = strings.Join(call.RedactedSeals, " ")
	}
	if fp == "" {
		fp = uncarriedPrefix + call.Fingerprint
	}
	var id int64
	err := j.queryRow(ctx, c, `INSERT INTO calls (server, server_alias, server_identity, tool, kind, kind_source,
		key, args, fingerprint, redacted_seals, state, reason, owner, conflict, conflict_note, proposal,
		created_at, updated_at, late_settled_at, acked_at, compensates)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`,
		call.Server, call.ServerAlias, string(call.ServerIdentity), call.Tool, call.Kind, call.KindSource,
		call.Key, string(call.Args), fp, seals, call.State, call.Reason, call.Owner, boolInt(call.Conflict), call.ConflictNote, call.Proposal,
		formatTime(call.CreatedAt), formatTime(call.UpdatedAt), optTime(call.LateSettledAt), optTime(call.AckedAt), optID(compensates)).Scan(&id)
	if err != nil {
		return 0, err
	}
	for _, a := range call.Attempts {
		var ended any
		if a.EndedAt != nil {
			ended = formatTime(*a.EndedAt)
		}
		if _, err := j.exec(ctx, c, `INSERT INTO attempts (call_id, n, session, owner, rpc_id, sent_at, ended_at, outcome, reason, clock, result, error, late)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			id, a.N, a.Session, call.Owner, a.RPCID, formatTime(a.SentAt), ended, a.Outcome, a.Reason, a.Clock,
			nullJSON(a.Result), nullJSON(a.Error), boolInt(a.Late)); err != nil {
			return 0, err
		}
	}
	if _, err := j.exec(ctx, c, "INSERT INTO events (at, kind, call_id, detail) VALUES (?, ?, ?, ?)",
		formatTime(j.now()), EventCopied, id, fmt.Sprintf("copied from %s call %d", from, call.ID)); err != nil {
		return 0, err
	}
	// The copy starts the call's chain here (callchain.go): its intent as
	// this journal holds it, in the state it was copied in.
	content := intentRow{Server: call.Server, ServerAlias: call.ServerAlias, ServerIdentity: string(call.ServerIdentity), Tool: call.Tool,
		Key: call.Key, Args: string(call.Args), Fingerprint: fp, CreatedAt: formatTime(call.CreatedAt), Compensates: compensates}.content()
	q, args := j.linkInsert("SELECT id, state FROM calls WHERE id = ?", linkCopied, 0, "", content, call.Key)
	return id, j.execAtCommit(ctx, c, q, append(args, id)...)
}

// optID is a reference column's value: NULL for none.
func optID(id int64) any {
	if id == 0 {
		return nil
	}
	return id
}

// uncarriedPrefix marks a copied fingerprint that could not be sealed for
// this journal: it matches no call's, so it holds nothing back.
const uncarriedPrefix = "x1:"

// carriedFingerprint is call's fingerprint as dst must store it, and
// whether it could be carried.
func carriedFingerprint(c Call, src, dst *Journal, sameSecret bool, candidates func(Call) []string) (string, bool) {
	switch {
	case sameSecret, strings.HasPrefix(c.Fingerprint, uncarriedPrefix):
		return c.Fingerprint, true
	case !strings.HasPrefix(c.Fingerprint, sealPrefix):
		return dst.Seal(c.Fingerprint), true // an unsealed (legacy) fingerprint: its preimage is itself
	case candidates == nil:
		return "", false
	}
	for _, fp := range candidates(c) {
		if hmac.Equal([]byte(seal(src.secret, fp)), []byte(c.Fingerprint)) {
			return dst.Seal(fp), true
		}
	}
	return "", false
}

// canHold reports whether c could hold an identical new call back.
func canHold(c Call) bool {
	return !c.State.Terminal() || (c.LateSettledAt != nil && c.AckedAt == nil)
}

// CallChecksum is a call's content, ids and fingerprint aside, as one
// SHA-256: what a copy must keep. Text is taken as PostgreSQL can hold it
// (pgText), so a copy from SQLite of text PostgreSQL cannot store (invalid
// UTF-8, NUL) compares as what it became.
func CallChecksum(c Call) string {
	t := func(s string) string { return pgText(s) }
	js := func(b json.RawMessage) any {
		b = bytes.TrimSpace(b)
		if len(b) == 0 || string(b) == "null" {
			return nil
		}
		return t(string(bytes.ToValidUTF8(b, []byte("\uFFFD"))))
	}
	ts := func(p *time.Time) any {
		if p == nil {
			return nil
		}
		return formatTime(*p)
	}
	var attempts, decisions []any
	for _, a := range c.Attempts {
		attempts = append(attempts, []any{int64(a.N), int64(a.Session), t(a.RPCID), formatTime(a.SentAt), ts(a.EndedAt),
			string(a.Outcome), t(a.Reason), t(a.Clock), js(a.Result), js(a.Error), a.Late})
	}
	for _, d := range c.Decisions {
		decisions = append(decisions, []any{string(d.Action), t(d.Operator), t(d.Host), formatTime(d.At), t(d.Note),
			js(d.Evidence), int64(d.Attempt)})
	}
	b, err := canonical.Marshal(map[string]any{
		"server": t(c.Server), "alias": t(c.ServerAlias), "identity": js(c.ServerIdentity), "tool": t(c.Tool),
		"kind": string(c.Kind), "kind_source": string(c.KindSource), "key": t(c.Key), "args": js(c.Args),
		"state": string(c.State), "reason": t(c.Reason), "conflict": c.Conflict, "conflict_note": t(c.ConflictNote),
		"proposal": t(c.Proposal), "created_at": formatTime(c.CreatedAt), "updated_at": formatTime(c.UpdatedAt),
		"late_settled_at": ts(c.LateSettledAt), "acked_at": ts(c.AckedAt), "attempts": attempts, "decisions": decisions,
	})
	if err != nil {
		return "unencodable: " + err.Error() // never equal to a hash, so a copy of it is refused as a mismatch
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func optTime(p *time.Time) string {
	if p == nil {
		return ""
	}
	return formatTime(*p)
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

func isAre(n int) string    { return map[bool]string{true: "is", false: "are"}[n == 1] }
func itsTheir(n int) string { return map[bool]string{true: "its", false: "their"}[n == 1] }
func itThey(n int) string   { return map[bool]string{true: "it", false: "they"}[n == 1] }
func itThem(n int) string   { return map[bool]string{true: "it", false: "them"}[n == 1] }
