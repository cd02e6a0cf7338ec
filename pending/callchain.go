package pending

import (
	"cmp"
	"context"
	"crypto/sha256"
	"database/sql"
	"database/sql/driver"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"modernc.org/sqlite"

	"github.com/mcp-confirm/mcp-confirm/canonical"
)

// The calls as evidence (issue 44 item 11). The decision chain (chain.go)
// says who decided what; it said nothing of the calls themselves, so a
// call's state, arguments or outcome could be rewritten by hand and verify
// still said "intact". From schema 8 (PostgreSQL's 5) every call also has a
// chain of its own, the table links: one link per thing that happened to
// it, in order (seq 1, 2, ...), each carrying the hash of the link before
// it (GenesisHash for the first), written in the same transaction (on
// PostgreSQL in the same statement, or the same pipeline) as the change it
// covers.
//
//   - intent (seq 1): the call as recorded, content = intentContent;
//   - outcome, lost, resend, late: an attempt's end, content =
//     attemptContent of the attempt row as the change left it (outcome:
//     an answer or a loss told by the caller; lost: recovery after its
//     owner died; resend: the attempt the server refused, a new one opened;
//     late: an answer after the attempt had ended unknown);
//   - decision: a retry, mark or abandon, content = the decision's own
//     hash in the decision chain (notes, queries, acks and compensations
//     change no state and are covered by that chain alone);
//   - copied (seq 1 of a call copied from another journal): content =
//     intentContent; the history before the copy is the other journal's.
//   - re_recorded (seq 1 of a call this process wrote back after the
//     journal's WAL was lost under it, or a later link of a call whose row
//     survived and was given what the lost WAL held, walloss.go): content =
//     intentContent; the state it names is where the call stands from
//     there, its history before that being what the process held in
//     memory, not what a chain covered.
//
// Each link names the state machine's event it was (Event, "" for none)
// and the call's state after it. A link's hash is the lowercase hex
// SHA-256 of the ASCII text
//
//	PREV_HASH " " KIND " " N " " EVENT " " STATE " " CONTENT
//
// (N the attempt, 0 for none; CONTENT lowercase hex), so that PostgreSQL
// computes it in the statement that writes the change, with no round trip
// to read the previous hash first; SQLite computes it with the function
// mcp_confirm_sha256, which this package registers.
//
// verify then checks, for each call: the links (order, hashes); the
// intent link against the call row; the newest link of each attempt
// against the attempt row; each decision link against the decision chain;
// the events replayed through the state machine (Transition, state.go)
// from in_flight, each link's state agreeing, and the call's state now
// equal to where they end. A call that has links but no row is named by
// the key its intent link keeps (call_key, a label, not hashed: the
// intent's content covers the key). Calls recorded before schema 8
// (meta 'call_chain_from' is the first id after them) have no intent
// link: for them verify checks what links they gained later, and their
// history before that is covered by the decision chain only; verify says
// so. Like the decision chain, the links are not keyed: whoever rewrites
// a call and recomputes its links is not seen; there is no head to keep.

const metaCallChainFrom = "call_chain_from"

// Link kinds.
const (
	linkIntent   = "intent"
	linkOutcome  = "outcome"
	linkLost     = "lost"
	linkResend   = "resend"
	linkLate     = "late"
	linkDecision = "decision"
	linkCopied   = "copied"
	linkReRecord = "re_recorded"
)

func init() {
	// The hash of a link, on SQLite, in the statement that writes it (as
	// PostgreSQL's sha256 does there): one code path for both.
	err := sqlite.RegisterDeterministicScalarFunction("mcp_confirm_sha256", 1,
		func(_ *sqlite.FunctionContext, args []driver.Value) (driver.Value, error) {
			var b []byte
			switch v := args[0].(type) {
			case string:
				b = []byte(v)
			case []byte:
				b = v
			case nil:
				return nil, nil
			default:
				b = []byte(fmt.Sprint(v))
			}
			sum := sha256.Sum256(b)
			return hex.EncodeToString(sum[:]), nil
		})
	if err != nil {
		panic(err)
	}
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// linkHash is a link's hash under the encoding above.
func linkHash(prev, kind string, n int64, event Event, state State, content string) string {
	return sha256Hex([]byte(prev + " " + linkHead(kind, n, event) + " " + string(state) + " " + content))
}

func linkHead(kind string, n int64, event Event) string {
	return kind + " " + strconv.FormatInt(n, 10) + " " + string(event)
}

// contentHash is the hex SHA-256 of m's RFC 8785 canonical JSON.
func contentHash(m map[string]any) string {
	b, err := canonical.Marshal(m)
	if err != nil { // only strings, integers and null are given
		panic(err)
	}
	return sha256Hex(b)
}

// intentRow is what an intent link covers: the call as recorded, its
// columns as stored (text as PostgreSQL's text holds it, pgText, on both).
type intentRow struct {
	Server, ServerAlias, ServerIdentity, Tool, Key, Args, Fingerprint, CreatedAt string
	Compensates                                                                  int64 // 0: NULL
}

// intentContent is the hash of
//
//	{"args":A,"compensates":C,"created_at":T,"fingerprint":F,"key":K,"server":S,"server_alias":SA,"server_identity":SI,"tool":TL,"v":1}
//
// (C null for none).
func (r intentRow) content() string {
	var comp any
	if r.Compensates != 0 {
		comp = r.Compensates
	}
	return contentHash(map[string]any{
		"v": int64(1), "server": pgText(r.Server), "server_alias": pgText(r.ServerAlias),
		"server_identity": pgText(r.ServerIdentity), "tool": pgText(r.Tool), "key": pgText(r.Key),
		"args": pgText(r.Args), "fingerprint": pgText(r.Fingerprint), "created_at": r.CreatedAt, "compensates": comp,
	})
}

// attemptRow is what an attempt's link covers: the attempt as its end
// left it (the session, which an outcome may leave as it was, is not).
type attemptRow struct {
	N                             int64
	Outcome, Reason, Clock, RPCID string
	EndedAt, Result, Error        sql.NullString
	Late                          int64
}

// content is the hash of
//
//	{"clock":C,"ended_at":E,"error":ER,"late":L,"n":N,"outcome":O,"reason":R,"result":RS,"rpc_id":I,"v":1}
//
// (ended_at, result, error null when NULL; result and error the stored
// JSON as a string).
func (a attemptRow) content() string {
	opt := func(s sql.NullString) any {
		if !s.Valid {
			return nil
		}
		return pgText(s.String)
	}
	return contentHash(map[string]any{
		"v": int64(1), "n": a.N, "outcome": a.Outcome, "reason": pgText(a.Reason), "clock": pgText(a.Clock),
		"ended_at": opt(a.EndedAt), "result": opt(a.Result), "error": opt(a.Error), "rpc_id": pgText(a.RPCID), "late": a.Late,
	})
}

const attemptRowColumns = "n, outcome, reason, clock, rpc_id, ended_at, result, error, late"

func scanAttemptRow(s scanner, callID *int64) (attemptRow, error) {
	var a attemptRow
	dest := []any{&a.N, &a.Outcome, &a.Reason, &a.Clock, &a.RPCID, &a.EndedAt, &a.Result, &a.Error, &a.Late}
	if callID != nil {
		dest = append([]any{callID}, dest...)
	}
	return a, s.Scan(dest...)
}

// sqlSHA256 is the dialect's hex SHA-256 of the text expression x.
func (j *Journal) sqlSHA256(x string) string {
	if j.pg != nil {
		return "encode(sha256(convert_to(" + x + ", 'UTF8')), 'hex')"
	}
	return "mcp_confirm_sha256(" + x + ")"
}

// linkInsert is the statement that appends a link to each call src
// selects (columns id and state: the call's state after the change),
// chained to that call's newest link, and its arguments before src's:
// in the statement, so that PostgreSQL needs no round trip to read the
// previous hash (src may be a data-modifying CTE's RETURNING).
func (j *Journal) linkInsert(src, kind string, n int64, event Event, content, key string) (string, []any) {
	q := `INSERT INTO links (call_id, seq, kind, n, event, state, content, call_key, prev_hash, hash)
		SELECT x.id, x.seq, ?, CAST(? AS INTEGER), ?, x.state, ?, ?, x.p, ` + j.sqlSHA256("x.p || ' ' || ? || ' ' || x.state || ' ' || ?") + `
		FROM (SELECT s.id, s.state,
			coalesce((SELECT max(seq) FROM links WHERE call_id = s.id), 0) + 1 AS seq,
			coalesce((SELECT hash FROM links WHERE call_id = s.id ORDER BY seq DESC LIMIT 1), '` + GenesisHash + `') AS p
			FROM (` + src + `) s) x`
	return q, []any{kind, n, string(event), content, key, linkHead(kind, n, event), content}
}

// appendLink appends a link to call id, whose state the write has set,
// at the end of the write (with the COMMIT on PostgreSQL).
func (j *Journal) appendLink(ctx context.Context, c *sql.Conn, id int64, kind string, n int64, event Event, content string) error {
	q, args := j.linkInsert("SELECT id, state FROM calls WHERE id = ?", kind, n, event, content, "")
	return j.execAtCommit(ctx, c, q, append(args, id)...)
}

// appendAttemptLink appends the link of attempt n's end, reading the
// attempt as the write left it.
func (j *Journal) appendAttemptLink(ctx context.Context, c *sql.Conn, id int64, kind string, n int, event Event) error {
	a, err := scanAttemptRow(j.queryRow(ctx, c, "SELECT "+attemptRowColumns+" FROM attempts WHERE call_id = ? AND n = ?", id, n), nil)
	if err != nil {
		return fmt.Errorf("read attempt %d of call %d for its link: %w", n, id, err)
	}
	return j.appendLink(ctx, c, id, kind, int64(n), event, a.content())
}

// decisionEvent is the state machine's event a decision is, "" for one
// that moves no call.
func decisionEvent(a Action) Event {
	switch a {
	case ActionRetry:
		return EventRetry
	case ActionMark:
		return EventMark
	case ActionAbandon:
		return EventAbandon
	}
	return ""
}

// CallLogReport is what a verification of the calls' chains found.
type CallLogReport struct {
	Calls   int `json:"calls"`   // calls read
	Covered int `json:"covered"` // calls whose chain begins with their intent (or their copy)
	Links   int `json:"links"`   // links read
	// From is the first call id recorded with its intent chained (meta
	// call_chain_from): calls before it were recorded by a version whose
	// chain covered decisions only.
	From     int64         `json:"from"`
	Problems []CallProblem `json:"problems,omitempty"`
}

// CallProblem is a call whose record does not agree with its chain.
type CallProblem struct {
	Call   int64  `json:"call"`
	Key    string `json:"key,omitempty"`
	Reason string `json:"reason"`
}

// Legacy is the number of calls recorded before the chain covered calls.
func (r CallLogReport) Legacy() int64 {
	if r.From <= 1 {
		return 0
	}
	return r.From - 1
}

type storedLink struct {
	CallID, Seq, N                   int64
	Kind, Event, State, Content, Key string
	PrevHash, Hash                   string
}

type attemptSeen struct{ content, outcome string }

type chainedCall struct {
	ID    int64
	State State
	intentRow
}

// verifyCalls checks every call's chain inside the snapshot tx, as the
// encoding above says. A problem is in the report, not an error.
func (j *Journal) verifyCalls(ctx context.Context, tx *sql.Tx) (*CallLogReport, error) {
	rep := &CallLogReport{}
	var from string
	switch err := tx.QueryRowContext(ctx, "SELECT value FROM meta WHERE name = ?", metaCallChainFrom).Scan(&from); {
	case errors.Is(err, sql.ErrNoRows):
		rep.Problems = append(rep.Problems, CallProblem{Reason: "the journal's record of where the calls' chain begins (meta " +
			metaCallChainFrom + ") was removed; every call is checked as if recorded with it"})
		rep.From = 1
	case err != nil:
		return nil, err
	default:
		if rep.From, err = strconv.ParseInt(from, 10, 64); err != nil {
			rep.Problems = append(rep.Problems, CallProblem{Reason: fmt.Sprintf("the journal's record of where the calls' chain begins is not a call id: %q", from)})
			rep.From = 1
		}
	}
	links := map[int64][]storedLink{}
	rows, err := tx.QueryContext(ctx, "SELECT call_id, seq, kind, n, event, state, content, call_key, prev_hash, hash FROM links ORDER BY call_id, seq")
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var l storedLink
		if err := rows.Scan(&l.CallID, &l.Seq, &l.Kind, &l.N, &l.Event, &l.State, &l.Content, &l.Key, &l.PrevHash, &l.Hash); err != nil {
			rows.Close()
			return nil, err
		}
		links[l.CallID] = append(links[l.CallID], l)
		rep.Links++
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return nil, err
	}
	// Each attempt as its hash and outcome only: a journal's results can
	// be large, and verify reads every one.
	attempts := map[int64]map[int64]attemptSeen{}
	if rows, err = tx.QueryContext(ctx, "SELECT call_id, "+attemptRowColumns+" FROM attempts"); err != nil {
		return nil, err
	}
	for rows.Next() {
		var id int64
		a, err := scanAttemptRow(rows, &id)
		if err != nil {
			rows.Close()
			return nil, err
		}
		if attempts[id] == nil {
			attempts[id] = map[int64]attemptSeen{}
		}
		attempts[id][a.N] = attemptSeen{content: a.content(), outcome: a.Outcome}
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return nil, err
	}
	decisions := map[string]int64{} // hash of a decision that moves calls -> its call
	if rows, err = tx.QueryContext(ctx, "SELECT hash, call_id FROM decisions WHERE action IN ('retry', 'mark', 'abandon')"); err != nil {
		return nil, err
	}
	for rows.Next() {
		var h string
		var id int64
		if err := rows.Scan(&h, &id); err != nil {
			rows.Close()
			return nil, err
		}
		decisions[h] = id
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return nil, err
	}
	if rows, err = tx.QueryContext(ctx, `SELECT id, state, server, server_alias, server_identity, tool, key, args, fingerprint, created_at,
		coalesce(compensates, 0) FROM calls ORDER BY id`); err != nil {
		return nil, err
	}
	var prevID int64
	for rows.Next() {
		var c chainedCall
		if err := rows.Scan(&c.ID, &c.State, &c.Server, &c.ServerAlias, &c.ServerIdentity, &c.Tool, &c.Key, &c.Args,
			&c.Fingerprint, &c.CreatedAt, &c.Compensates); err != nil {
			rows.Close()
			return nil, err
		}
		rep.Calls++
		// SQLite gives a new call the id after the greatest: a gap among
		// the calls the chain covers is a call deleted by hand (PostgreSQL's
		// identity leaves gaps of its own, so there only links tell).
		if j.pg == nil && c.ID > prevID+1 && c.ID > rep.From {
			for gone := max(prevID+1, rep.From); gone < c.ID; gone++ {
				if _, named := links[gone]; !named {
					rep.Problems = append(rep.Problems, CallProblem{Call: gone, Reason: fmt.Sprintf(
						"call %d is gone: it was deleted by hand (calls %d and %d are there, and ids are given without gaps)", gone, prevID, c.ID)})
				}
			}
		}
		prevID = c.ID
		ls := links[c.ID]
		delete(links, c.ID)
		covered, problem := checkCall(c, ls, attempts[c.ID], decisions, c.ID >= rep.From)
		if covered {
			rep.Covered++
		}
		if problem != "" {
			rep.Problems = append(rep.Problems, CallProblem{Call: c.ID, Key: c.Key, Reason: problem})
		}
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return nil, err
	}
	gone := make([]int64, 0, len(links))
	for id := range links {
		gone = append(gone, id)
	}
	slices.Sort(gone)
	for _, id := range gone {
		ls := links[id]
		p := CallProblem{Call: id, Key: ls[0].Key}
		p.Reason = fmt.Sprintf("call %d had %d chained links (the last: %s, %s) but is gone: it was deleted by hand", id, len(ls),
			ls[len(ls)-1].Kind, ls[len(ls)-1].State)
		rep.Problems = append(rep.Problems, p)
	}
	slices.SortStableFunc(rep.Problems, func(a, b CallProblem) int { return cmp.Compare(a.Call, b.Call) })
	return rep, nil
}

// checkCall checks one call against its links; covered is true when the
// chain begins with the call's intent (or copy). mustCover: the call was
// recorded after the chain covered calls.
func checkCall(c chainedCall, ls []storedLink, atts map[int64]attemptSeen, decisions map[string]int64, mustCover bool) (covered bool, problem string) {
	if len(ls) == 0 {
		if mustCover {
			return false, fmt.Sprintf("call %d has no chained links, though it was recorded after the chain covered calls: its links were deleted by hand", c.ID)
		}
		return false, ""
	}
	prev := GenesisHash
	var state State // "": not known (the call was recorded before the chain covered calls)
	newest := map[int64]storedLink{}
	copied := false
	for i, l := range ls {
		where := fmt.Sprintf("link %d (%s", l.Seq, l.Kind)
		if l.N != 0 {
			where += fmt.Sprintf(" of attempt %d", l.N)
		}
		where += ")"
		switch {
		case l.Seq != int64(i+1) && i == 0:
			return false, fmt.Sprintf("the call's first link is %s: link 1 (its intent) was deleted by hand", where)
		case l.Seq != int64(i+1):
			return false, fmt.Sprintf("%s should be link %d: links of call %d were deleted by hand", where, i+1, c.ID)
		case l.PrevHash != prev:
			return false, fmt.Sprintf("%s does not follow the link before it: it was changed by hand", where)
		case linkHash(l.PrevHash, l.Kind, l.N, Event(l.Event), State(l.State), l.Content) != l.Hash:
			return false, fmt.Sprintf("%s was changed after it was written: its content does not match its hash", where)
		}
		prev = l.Hash
		switch l.Kind {
		case linkIntent, linkCopied:
			if i != 0 {
				return false, fmt.Sprintf("%s is not the first link of the call", where)
			}
			if l.Content != c.intentRow.content() {
				return false, fmt.Sprintf("call %d was changed after it was recorded: its server, tool, key, arguments or fingerprint "+
					"no longer match its intent (link 1)", c.ID)
			}
			covered, copied = true, l.Kind == linkCopied
			state = State(l.State)
			if l.Kind == linkIntent && state != StateInFlight {
				return false, fmt.Sprintf("%s says the call began %s, not in_flight", where, state)
			}
			continue
		case linkReRecord:
			if l.Content != c.intentRow.content() {
				return false, fmt.Sprintf("call %d was changed after it was re-recorded: its server, tool, key, arguments or fingerprint "+
					"no longer match %s", c.ID, where)
			}
			// Written back from memory after the WAL was lost: the state
			// stands from here, and attempts ended before are not covered.
			covered, copied = true, true
			state = State(l.State)
			continue
		case linkDecision:
			if id, ok := decisions[l.Content]; !ok || id != c.ID {
				return false, fmt.Sprintf("%s: the %s decision it records is not in the decision log: it was deleted or changed by hand", where, l.Event)
			}
		case linkOutcome, linkLost, linkResend, linkLate:
			if l.N != 0 {
				newest[l.N] = l
			}
		}
		if i == 0 && mustCover {
			return false, fmt.Sprintf("call %d's first link is %s, not its intent: its intent link was deleted by hand", c.ID, where)
		}
		switch {
		case state == "":
		case l.Event != "":
			to, err := Transition(state, Event(l.Event))
			if err != nil {
				return covered, fmt.Sprintf("%s records %s on a call that was %s, which the state machine does not allow: the links were rewritten", where, l.Event, state)
			}
			if to != State(l.State) {
				return covered, fmt.Sprintf("%s says %s moved the call to %s; the state machine says %s", where, l.Event, l.State, to)
			}
		case State(l.State) != state:
			return covered, fmt.Sprintf("%s says the call became %s with no event that moves it (it was %s)", where, l.State, state)
		}
		state = State(l.State)
	}
	for _, n := range slices.Sorted(maps.Keys(newest)) {
		l := newest[n]
		a, ok := atts[n]
		switch {
		case !ok:
			return covered, fmt.Sprintf("attempt %d is gone, though link %d records how it ended: it was deleted by hand", n, l.Seq)
		case a.content != l.Content:
			return covered, fmt.Sprintf("attempt %d was changed after link %d recorded how it ended (%s): its outcome, reason, result or error "+
				"no longer match", n, l.Seq, l.Kind)
		}
	}
	if covered && !copied {
		for _, n := range slices.Sorted(maps.Keys(atts)) {
			if a := atts[n]; newest[n] == (storedLink{}) && a.outcome != string(OutcomePending) {
				return covered, fmt.Sprintf("attempt %d is %s, but no link records how it ended: it was rewritten by hand", n, a.outcome)
			}
		}
	}
	if state != "" && c.State != state {
		return covered, fmt.Sprintf("call %d is %s, but its chained history ends %s: no attempt's outcome or operator's decision made it %s",
			c.ID, c.State, state, c.State)
	}
	return covered, ""
}
