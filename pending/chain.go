package pending

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/mcp-confirm/mcp-confirm/canonical"
)

// The decision log as evidence (issue 22). The triggers of the schema
// forbid changing or deleting a decision, but anyone who can write the file
// can drop them. So each decision also carries the hash of the decision
// before it: a chain per journal, in id order, written in the same
// transaction as the decision itself. Deleting, editing or reordering a
// decision breaks the chain at that point, and VerifyChain names the first
// broken link. The hash is not keyed: whoever rewrites history and
// recomputes every later hash gets a chain that verifies again, with a
// different head. The head (the last decision's hash, which verify prints)
// is what anchors the log: kept anywhere outside the journal (a ticket, an
// export, a chat message), it shows any rewrite of what came before it.
//
// The canonical encoding of a decision, exactly. A decision's hash is the
// lowercase hex SHA-256 of the RFC 8785 canonical JSON (package canonical)
// of this object, whose members are therefore written sorted by name, with
// no white space:
//
//	{"action":A,"at":T,"attempt":N,"call_id":C,"evidence":E,"id":I,"note":S,"operator":O,"prev_hash":P,"v":1}
//
//   - id, call_id: the row's integers.
//   - action, operator, note: the row's strings; invalid UTF-8 is read one
//     byte at a time and each bad byte becomes U+FFFD (as encoding/json
//     writes it in an export).
//   - at: the row's text, RFC 3339 UTC with nine fraction digits
//     ("2026-12-05T15:04:05.000000000Z"), as the journal stores every time.
//   - attempt: the attempt a retry started, an integer; null when the
//     decision started none (the column is NULL, or 0).
//   - evidence: the stored JSON value itself (an object, a string, ...), in
//     canonical form, after each run of invalid UTF-8 in the stored text is
//     replaced by one U+FFFD (as the export does); null when the column is
//     NULL or empty; a stored text that is not JSON is hashed as a JSON
//     string of that text.
//   - prev_hash: the hash of the decision before it in id order; for the
//     first decision of the journal, GenesisHash (64 zeros).
//   - v: the version of this encoding, 1.
//
// Version 2 is version 1 with one more member, "host": the machine the
// decision was made on (the column of schema 6, a string), with "v":2. A
// decision with a host is hashed in version 2; one without (recorded
// before schema 6, or where the host name could not be read) in version 1,
// so a log written before hosts were recorded still verifies, and a host,
// once recorded, cannot be changed or removed without breaking the chain.
// The example above made on "host-b" is the bytes
//
//	{"action":"note","at":"2026-01-01T00:00:01.000000000Z","attempt":null,"call_id":1,"evidence":null,"host":"host-b","id":1,"note":"looked","operator":"op","prev_hash":"0000000000000000000000000000000000000000000000000000000000000000","v":2}
//
// and its hash is
// 866cbd11e0756cc75a7c0cb02f9440e11abf1998d58a3b8a54d1539f7e5d3ecc.
//
// So the first decision of a journal, a note "looked" by "op" on call 1,
// is the bytes
//
//	{"action":"note","at":"2026-01-01T00:00:01.000000000Z","attempt":null,"call_id":1,"evidence":null,"id":1,"note":"looked","operator":"op","prev_hash":"0000000000000000000000000000000000000000000000000000000000000000","v":1}
//
// and its hash (TestDecisionHashEncoding pins it; printf '%s' BYTES |
// sha256sum agrees) is
// 4b3889c5baa5e5154afdc73b8e50e258edfecbdbedd691118d14a58ecc525c82.
//
// An exported decision (export's JSONL) carries every field the encoding
// reads, its id, prev_hash and hash included, so an export verifies
// offline (VerifyExport). The CSV export carries them too, for a reader's
// eye, but its cells are made inert for spreadsheets (termtext.Cell), so
// it is not what verify reads. PostgreSQL's text holds neither NUL nor
// invalid UTF-8; there such bytes are stored as U+FFFD and hashed as
// stored (pgschema.go).
//
// The journal also keeps the head in meta ('decision_chain_head', "ID
// HASH"), updated with each decision: a new decision is chained to that
// head, not to whatever row is last, so deleting the newest decisions by
// hand is seen too, before and after later decisions are added.

// GenesisHash is the previous hash of a journal's first decision.
var GenesisHash = strings.Repeat("0", 64)

const metaChainHead = "decision_chain_head"

// chainRow is a decision as the hash reads it.
type chainRow struct {
	ID       int64
	CallID   int64
	Action   string
	Operator string
	Host     string // "": hashed in version 1 of the encoding, else 2
	At       string // timeFormat
	Note     string
	Evidence []byte // nil or empty: null
	Attempt  int64  // 0: null
	PrevHash string
}

// hash is the row's hash under the encoding above.
func (r chainRow) hash() (string, error) {
	var evidence any
	if ev := bytes.ToValidUTF8(r.Evidence, []byte("\uFFFD")); len(ev) > 0 {
		if json.Valid(ev) {
			evidence = json.RawMessage(ev)
		} else {
			evidence = string(ev)
		}
	}
	var attempt any
	if r.Attempt != 0 {
		attempt = r.Attempt
	}
	m := map[string]any{
		"v":         int64(1),
		"id":        r.ID,
		"call_id":   r.CallID,
		"action":    r.Action,
		"operator":  r.Operator,
		"at":        r.At,
		"note":      r.Note,
		"evidence":  evidence,
		"attempt":   attempt,
		"prev_hash": r.PrevHash,
	}
	if r.Host != "" {
		m["v"], m["host"] = int64(2), r.Host
	}
	b, err := canonical.Marshal(m)
	if err != nil {
		return "", fmt.Errorf("encode decision %d for its hash: %w", r.ID, err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// appendDecision inserts a decision, chained to the journal's head, and
// moves the head to it: inside the caller's write, so in the same
// transaction as the decision and whatever it changed.
//
// A decision that moves the call (retry, mark, abandon) is also a link of
// the call's own chain (callchain.go), after the write has set its state.
func (j *Journal) appendDecision(ctx context.Context, c *sql.Conn, callID int64, action Action, operator, at, note string,
	evidence json.RawMessage, attempt int) error {
	h, err := j.insertDecision(ctx, c, callID, action, operator, j.host, at, note, evidence, attempt)
	if err != nil {
		return err
	}
	if ev := decisionEvent(action); ev != "" {
		return j.appendLink(ctx, c, callID, linkDecision, int64(attempt), ev, h)
	}
	return nil
}

// appendDecisionAs is appendDecision of a decision made on host (a copy
// of another journal's, Copy), with no link: the copied call's history
// before the copy is the other journal's (its copied link, callchain.go).
func (j *Journal) appendDecisionAs(ctx context.Context, c *sql.Conn, callID int64, action Action, operator, host, at, note string,
	evidence json.RawMessage, attempt int) error {
	_, err := j.insertDecision(ctx, c, callID, action, operator, host, at, note, evidence, attempt)
	return err
}

// insertDecision is appendDecisionAs, returning the decision's hash.
func (j *Journal) insertDecision(ctx context.Context, c *sql.Conn, callID int64, action Action, operator, host, at, note string,
	evidence json.RawMessage, attempt int) (string, error) {
	if j.pg != nil {
		// Decisions take turns on the chain's lock: the write took it
		// before it began (deciding, pg.go); taken again here, it is free for
		// that session, and a write that forgot to queue waits here instead.
		// What is hashed is what PostgreSQL's text will hold (pgText).
		if _, err := j.exec(ctx, c, "SELECT pg_advisory_xact_lock(?, ?)", pgLockClass, pgLockChain); err != nil {
			return "", fmt.Errorf("take the decision chain's lock: %w", err)
		}
		note, operator, host = pgText(note), pgText(operator), pgText(host)
		if len(evidence) > 0 {
			evidence = json.RawMessage(pgText(string(bytes.ToValidUTF8(evidence, []byte("\uFFFD")))))
		}
	}
	prev, err := chainHead(ctx, c, j)
	if err != nil {
		return "", err
	}
	var id int64
	if err := j.queryRow(ctx, c, "SELECT coalesce(max(id), 0) + 1 FROM decisions").Scan(&id); err != nil {
		return "", err
	}
	row := chainRow{ID: id, CallID: callID, Action: string(action), Operator: operator, Host: host, At: at, Note: note,
		Evidence: evidence, Attempt: int64(attempt), PrevHash: prev}
	h, err := row.hash()
	if err != nil {
		return "", err
	}
	var att any
	if attempt != 0 {
		att = attempt
	}
	if _, err := j.exec(ctx, c, `INSERT INTO decisions (id, call_id, action, operator, host, at, note, evidence, attempt, prev_hash, hash)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, id, callID, action, operator, host, at, note, nullJSON(evidence), att, prev, h); err != nil {
		return "", err
	}
	_, err = j.exec(ctx, c, `INSERT INTO meta (name, value) VALUES (?, ?)
		ON CONFLICT (name) DO UPDATE SET value = excluded.value`, metaChainHead, strconv.FormatInt(id, 10)+" "+h)
	return h, err
}

// chainHead is the hash a new decision chains to: the head kept in meta;
// if that record is gone (removed by hand), the newest decision's hash, so
// deciding still works and verify reports the missing record.
func chainHead(ctx context.Context, c *sql.Conn, j *Journal) (string, error) {
	var v string
	err := j.queryRow(ctx, c, "SELECT value FROM meta WHERE name = ?", metaChainHead).Scan(&v)
	if err == nil {
		if _, h, ok := parseHead(v); ok {
			return h, nil
		}
	} else if !errors.Is(err, sql.ErrNoRows) {
		return "", err
	}
	var h string
	err = j.queryRow(ctx, c, "SELECT hash FROM decisions ORDER BY id DESC LIMIT 1").Scan(&h)
	if errors.Is(err, sql.ErrNoRows) {
		return GenesisHash, nil
	}
	return h, err
}

func parseHead(v string) (int64, string, bool) {
	idText, h, ok := strings.Cut(v, " ")
	id, err := strconv.ParseInt(idText, 10, 64)
	return id, h, ok && err == nil && len(h) == len(GenesisHash)
}

// chainExistingDecisions is migration 5's own step: it computes the chain
// over the decisions a journal already holds, in id order, and records the
// head. The append-only triggers are dropped for it and made again by the
// migration's SQL that follows.
func chainExistingDecisions(ctx context.Context, c *sql.Conn) error {
	rows, err := c.QueryContext(ctx, "SELECT id, call_id, action, operator, at, note, evidence, attempt FROM decisions ORDER BY id")
	if err != nil {
		return err
	}
	var all []chainRow
	for rows.Next() {
		r, err := scanChainRow(rows, false)
		if err != nil {
			rows.Close()
			return err
		}
		all = append(all, r.row)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return err
	}
	prev := GenesisHash
	var lastID int64
	for _, r := range all {
		r.PrevHash = prev
		h, err := r.hash()
		if err != nil {
			return err
		}
		if _, err := c.ExecContext(ctx, "UPDATE decisions SET prev_hash = ?, hash = ? WHERE id = ?", prev, h, r.ID); err != nil {
			return err
		}
		prev, lastID = h, r.ID
	}
	_, err = c.ExecContext(ctx, "INSERT INTO meta (name, value) VALUES (?, ?)", metaChainHead, strconv.FormatInt(lastID, 10)+" "+prev)
	return err
}

// chainColumns are a decision's columns as scanChainRow reads them.
const chainColumns = "id, call_id, action, operator, at, note, evidence, attempt, host, prev_hash, hash"

type storedRow struct {
	row  chainRow
	hash string
}

// scanChainRow reads a decision selected as chainColumns, or, for
// migration 5 (before there were hashes or hosts), without its last three.
func scanChainRow(s scanner, withHash bool) (storedRow, error) {
	var r storedRow
	var evidence sql.NullString
	var attempt sql.NullInt64
	dest := []any{&r.row.ID, &r.row.CallID, &r.row.Action, &r.row.Operator, &r.row.At, &r.row.Note, &evidence, &attempt}
	if withHash {
		dest = append(dest, &r.row.Host, &r.row.PrevHash, &r.hash)
	}
	if err := s.Scan(dest...); err != nil {
		return r, err
	}
	if evidence.Valid {
		r.row.Evidence = []byte(evidence.String)
	}
	r.row.Attempt = attempt.Int64
	return r, nil
}

// ChainReport is what a verification of the decision log found.
type ChainReport struct {
	Decisions int    `json:"decisions"` // decisions read
	HeadID    int64  `json:"head_id"`   // the last decision's id; 0 when there is none
	Head      string `json:"head"`      // its hash (GenesisHash when there is none): the log's anchor
	// Broken is the first broken link; nil when the chain is intact.
	Broken *BrokenLink `json:"broken,omitempty"`
	// Calls is what the calls' own chains showed (callchain.go); nil for
	// an export, which carries the decision log only.
	Calls *CallLogReport `json:"calls,omitempty"`
}

// Intact reports whether no link was broken, of the decision log or of
// any call's chain.
func (r ChainReport) Intact() bool {
	return r.Broken == nil && (r.Calls == nil || len(r.Calls.Problems) == 0)
}

// BrokenLink is where the chain first breaks: the decision at which it
// does (0 when it is the head record), and why, in words for an operator.
type BrokenLink struct {
	Decision int64  `json:"decision"`
	Call     int64  `json:"call,omitempty"`
	Reason   string `json:"reason"`
}

// chainChecker walks a log in id order.
type chainChecker struct {
	report ChainReport
	prev   string
	prevID int64
}

func newChainChecker() *chainChecker {
	return &chainChecker{prev: GenesisHash, report: ChainReport{Head: GenesisHash}}
}

func (k *chainChecker) broken(r chainRow, format string, args ...any) {
	k.report.Broken = &BrokenLink{Decision: r.ID, Call: r.CallID, Reason: fmt.Sprintf(format, args...)}
}

// add checks one decision, in id order, against its own hash and the
// one before it. It returns false once the chain is broken.
func (k *chainChecker) add(s storedRow, where string) bool {
	r := s.row
	k.report.Decisions++
	if s.hash == "" {
		k.broken(r, "decision %d has no hash%s", r.ID, where)
		return false
	}
	h, err := r.hash()
	if err != nil {
		k.broken(r, "decision %d cannot be encoded: %v", r.ID, err)
		return false
	}
	if h != s.hash {
		k.broken(r, "decision %d (call %d, %s by %s at %s) was changed after it was written: its content does not match its hash",
			r.ID, r.CallID, r.Action, r.Operator, r.At)
		return false
	}
	if r.PrevHash != k.prev {
		switch {
		case k.prevID == 0:
			k.broken(r, "decision %d is the first%s, but it follows a decision that is not there: the decisions before it were deleted", r.ID, where)
		case r.ID != k.prevID+1:
			k.broken(r, "decision %d does not follow decision %d, the one before it%s: the decisions between them (%d to %d) were deleted, or one was changed",
				r.ID, k.prevID, where, k.prevID+1, r.ID-1)
		default:
			k.broken(r, "decision %d does not follow decision %d, the one before it: a decision between them was deleted, or %d was changed and its hash recomputed",
				r.ID, k.prevID, k.prevID)
		}
		return false
	}
	k.prev, k.prevID = h, r.ID
	k.report.HeadID, k.report.Head = r.ID, h
	return true
}

// VerifyChain checks the journal's decision log: every decision against
// its hash and the one before it, in id order, and the last against the
// head record; then every call against its own chain (verifyCalls). It reads one snapshot; a broken chain is in the report,
// not an error (an error is a journal that could not be read).
func (j *Journal) VerifyChain(ctx context.Context) (ChainReport, error) {
	tx, err := j.snapshot(ctx)
	if err != nil {
		return ChainReport{}, err
	}
	defer tx.Rollback()
	rows, err := tx.QueryContext(ctx, "SELECT "+chainColumns+" FROM decisions ORDER BY id")
	if err != nil {
		return ChainReport{}, err
	}
	k := newChainChecker()
	for rows.Next() {
		s, err := scanChainRow(rows, true)
		if err != nil {
			rows.Close()
			return ChainReport{}, err
		}
		if !k.add(s, "") {
			break
		}
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return ChainReport{}, err
	}
	if k.report.Broken == nil {
		var v string
		err = tx.QueryRowContext(ctx, "SELECT value FROM meta WHERE name = ?", metaChainHead).Scan(&v)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return ChainReport{}, err
		}
		k.checkHead(v, err == nil)
	}
	if k.report.Calls, err = j.verifyCalls(ctx, tx); err != nil {
		return ChainReport{}, err
	}
	return k.report, nil
}

// checkHead compares the end of the chain, once every decision has been
// added without a break, with the journal's head record (value v; found
// false when there is none).
func (k *chainChecker) checkHead(v string, found bool) {
	if k.report.Broken != nil {
		return
	}
	if !found {
		k.report.Broken = &BrokenLink{Reason: "the journal's record of the chain's head (meta " + metaChainHead + ") was removed"}
		return
	}
	id, h, ok := parseHead(v)
	switch {
	case !ok:
		k.report.Broken = &BrokenLink{Reason: fmt.Sprintf("the journal's record of the chain's head is not \"ID HASH\": %q", v)}
	case id == k.report.HeadID && h == k.report.Head:
	case id > k.report.HeadID:
		k.report.Broken = &BrokenLink{Decision: id, Reason: fmt.Sprintf(
			"the newest decisions were deleted: the chain ends at decision %d, but the journal recorded decision %d as its head", k.report.HeadID, id)}
	default:
		k.report.Broken = &BrokenLink{Decision: k.report.HeadID, Reason: fmt.Sprintf(
			"the chain ends at decision %d (%.12s…), but the journal recorded decision %d (%.12s…) as its head", k.report.HeadID, k.report.Head, id, h)}
	}
}

// exportedCall is the part of an exported call (a line of export's JSONL,
// a Call) that the chain reads.
type exportedCall struct {
	ID        *int64 `json:"id"`
	Decisions []struct {
		ID       int64           `json:"id"`
		Action   string          `json:"action"`
		Operator string          `json:"operator"`
		Host     string          `json:"host"`
		At       string          `json:"at"`
		Note     string          `json:"note"`
		Evidence json.RawMessage `json:"evidence"`
		Attempt  int64           `json:"attempt"`
		PrevHash string          `json:"prev_hash"`
		Hash     string          `json:"hash"`
	} `json:"decisions"`
}

// ExportError is an export VerifyExport could not read (not JSONL of
// calls, or made by a build that did not export hashes).
type ExportError struct {
	Line int
	Msg  string
}

func (e *ExportError) Error() string {
	if e.Line == 0 {
		return e.Msg
	}
	return fmt.Sprintf("line %d: %s", e.Line, e.Msg)
}

// VerifyExport checks the decision log carried by an export in JSONL (the
// calls, one a line, with their decisions), as VerifyChain does the
// journal's, without the journal. The export must hold the whole log: one
// made with --since lacks the decisions of older calls, and its chain
// breaks where they were. An export holds no head record, so deleting its
// newest decisions shows only as a different head: compare the report's
// head with the one verify printed on the journal.
func VerifyExport(r io.Reader) (ChainReport, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1<<20), 1<<30)
	var all []storedRow
	seen := map[int64]int{} // decision id -> line
	line := 0
	for sc.Scan() {
		line++
		text := bytes.TrimSpace(sc.Bytes())
		if len(text) == 0 {
			continue
		}
		var c exportedCall
		if err := json.Unmarshal(text, &c); err != nil {
			return ChainReport{}, &ExportError{Line: line, Msg: fmt.Sprintf("not a call of an export in JSONL: %v", err)}
		}
		if c.ID == nil {
			return ChainReport{}, &ExportError{Line: line, Msg: "not a call of an export in JSONL: it has no id"}
		}
		for _, d := range c.Decisions {
			if d.Hash == "" {
				return ChainReport{}, &ExportError{Line: line, Msg: fmt.Sprintf(
					"decision %d carries no hash: the export was made by an mcp-confirm without the hash chain; export again", d.ID)}
			}
			if first, dup := seen[d.ID]; dup {
				return ChainReport{}, &ExportError{Line: line, Msg: fmt.Sprintf("decision %d appears twice (first on line %d)", d.ID, first)}
			}
			seen[d.ID] = line
			at := d.At
			if t, err := parseExportTime(d.At); err == nil {
				at = formatTime(t)
			}
			all = append(all, storedRow{hash: d.Hash, row: chainRow{ID: d.ID, CallID: *c.ID, Action: d.Action,
				Operator: d.Operator, Host: d.Host, At: at, Note: d.Note, Evidence: evidenceOf(d.Evidence), Attempt: d.Attempt, PrevHash: d.PrevHash}})
		}
	}
	if err := sc.Err(); err != nil {
		return ChainReport{}, &ExportError{Line: line + 1, Msg: err.Error()}
	}
	sort.Slice(all, func(a, b int) bool { return all[a].row.ID < all[b].row.ID })
	k := newChainChecker()
	for _, s := range all {
		if !k.add(s, " in the export") {
			break
		}
	}
	return k.report, nil
}

// evidenceOf is an exported decision's evidence as the journal held it:
// JSON null is a NULL column.
func evidenceOf(raw json.RawMessage) []byte {
	if t := bytes.TrimSpace(raw); len(t) == 0 || string(t) == "null" {
		return nil
	}
	return raw
}
