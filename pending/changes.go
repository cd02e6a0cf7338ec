package pending

import (
	"context"
	"database/sql"
	"sort"
	"strings"
	"time"
)

// Change is one thing that happened to the journal, as a feed reports it:
// a call's state moved (or a call appeared), or a decision was recorded.
type Change struct {
	Type   string    `json:"type"` // ChangeState or ChangeDecision
	At     time.Time `json:"at"`
	CallID int64     `json:"call_id"`
	Server string    `json:"server"`
	Tool   string    `json:"tool"`
	Key    string    `json:"key"`
	// From is the state the feed last saw the call in; "" for a call new
	// to the feed. State is the call's state now (for a decision: after it).
	From   State  `json:"from,omitempty"`
	State  State  `json:"state"`
	Reason string `json:"reason,omitempty"`
	// For a decision: what, by whom, with its note (the evidence stays in
	// the journal: show ID).
	Action   Action `json:"action,omitempty"`
	Operator string `json:"operator,omitempty"`
	Host     string `json:"host,omitempty"` // where a decision was made
	Note     string `json:"note,omitempty"`
	Attempt  int    `json:"attempt,omitempty"` // the attempt a retry started
}

// Change types.
const (
	ChangeState    = "state"
	ChangeDecision = "decision"
)

// ChangeFeed reads what changed in the journal since it last looked, from
// any process: new calls and state changes (by the calls' rows), and new
// decisions (by their ids). Poll it when PRAGMA data_version moves
// (guard.Watch). A call that changes more than once between two looks is
// reported once, from the state seen before to the state now; every
// decision is reported. Not safe for concurrent use.
type ChangeFeed struct {
	j            *Journal
	lastCall     int64
	lastDecision int64
	open         map[int64]State // calls not settled for good, as last seen
}

// openStates are the states a call can still leave.
const openStates = "'in_flight', 'unknown', 'failed'"

// Changes starts a feed at the journal as it is now: what is already there
// is not reported.
func (j *Journal) Changes(ctx context.Context) (*ChangeFeed, error) {
	f := &ChangeFeed{j: j, open: map[int64]State{}}
	tx, err := j.snapshot(ctx)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	if err := tx.QueryRowContext(ctx, "SELECT coalesce(max(id), 0) FROM calls").Scan(&f.lastCall); err != nil {
		return nil, err
	}
	if err := tx.QueryRowContext(ctx, "SELECT coalesce(max(id), 0) FROM decisions").Scan(&f.lastDecision); err != nil {
		return nil, err
	}
	rows, err := tx.QueryContext(ctx, "SELECT id, state FROM calls WHERE state IN ("+openStates+")")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var s State
		if err := rows.Scan(&id, &s); err != nil {
			return nil, err
		}
		f.open[id] = s
	}
	return f, rows.Err()
}

// callRow is what a feed reads of a call.
type callRow struct {
	id                       int64
	state                    State
	reason, server, tool, ky string
	updated                  time.Time
}

const callRowColumns = "id, state, reason, server, tool, key, updated_at"

func scanCallRows(rows *sql.Rows) ([]callRow, error) {
	defer rows.Close()
	var out []callRow
	for rows.Next() {
		var r callRow
		var updated string
		if err := rows.Scan(&r.id, &r.state, &r.reason, &r.server, &r.tool, &r.ky, &updated); err != nil {
			return nil, err
		}
		t, err := parseTime(updated)
		if err != nil {
			return nil, err
		}
		r.updated = t
		out = append(out, r)
	}
	return out, rows.Err()
}

// Next returns what changed since the last look, oldest first (a decision
// before the state it moved the call to).
func (f *ChangeFeed) Next(ctx context.Context) ([]Change, error) {
	tx, err := f.j.snapshot(ctx)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	var out []Change
	seen := map[int64]bool{}
	note := func(r callRow, from State, known bool) {
		seen[r.id] = true
		if known && from == r.state {
			return
		}
		out = append(out, Change{Type: ChangeState, At: r.updated, CallID: r.id, Server: r.server, Tool: r.tool, Key: r.ky,
			From: from, State: r.state, Reason: r.reason})
	}
	// Calls new since the last look.
	rows, err := tx.QueryContext(ctx, "SELECT "+callRowColumns+" FROM calls WHERE id > ? ORDER BY id", f.lastCall)
	if err != nil {
		return nil, err
	}
	fresh, err := scanCallRows(rows)
	if err != nil {
		return nil, err
	}
	next := make(map[int64]State, len(f.open))
	for _, r := range fresh {
		note(r, "", false)
		f.lastCall = max(f.lastCall, r.id)
		if !r.state.Terminal() {
			next[r.id] = r.state
		}
	}
	// Calls still open, and those that left the open states since.
	rows, err = tx.QueryContext(ctx, "SELECT "+callRowColumns+" FROM calls WHERE state IN ("+openStates+") AND id <= ?", f.lastCall)
	if err != nil {
		return nil, err
	}
	openNow, err := scanCallRows(rows)
	if err != nil {
		return nil, err
	}
	for _, r := range openNow {
		if !seen[r.id] {
			from, known := f.open[r.id]
			note(r, from, known)
		}
		next[r.id] = r.state
	}
	var left []int64
	for id := range f.open {
		if !seen[id] {
			left = append(left, id)
		}
	}
	sort.Slice(left, func(a, b int) bool { return left[a] < left[b] })
	for len(left) > 0 {
		n := min(len(left), 500)
		ph := strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
		args := make([]any, n)
		for i, id := range left[:n] {
			args[i] = id
		}
		rows, err := tx.QueryContext(ctx, "SELECT "+callRowColumns+" FROM calls WHERE id IN ("+ph+")", args...)
		if err != nil {
			return nil, err
		}
		settled, err := scanCallRows(rows)
		if err != nil {
			return nil, err
		}
		for _, r := range settled {
			note(r, f.open[r.id], true)
		}
		left = left[n:]
	}
	// Decisions.
	rows, err = tx.QueryContext(ctx, `SELECT d.id, d.call_id, d.action, d.operator, d.host, d.at, d.note, coalesce(d.attempt, 0),
		c.server, c.tool, c.key, c.state FROM decisions d JOIN calls c ON c.id = d.call_id WHERE d.id > ? ORDER BY d.id`, f.lastDecision)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var at string
		c := Change{Type: ChangeDecision}
		if err := rows.Scan(&id, &c.CallID, &c.Action, &c.Operator, &c.Host, &at, &c.Note, &c.Attempt, &c.Server, &c.Tool, &c.Key, &c.State); err != nil {
			return nil, err
		}
		if c.At, err = parseTime(at); err != nil {
			return nil, err
		}
		f.lastDecision = id
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	f.open = next
	sort.SliceStable(out, func(a, b int) bool {
		if !out[a].At.Equal(out[b].At) {
			return out[a].At.Before(out[b].At)
		}
		return out[a].Type == ChangeDecision && out[b].Type == ChangeState
	})
	return out, nil
}
