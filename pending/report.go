package pending

import (
	"context"
	"encoding/json"
	"sort"
	"time"
)

// Report is the reconciliation a finance or ops team asks for (`mcp-confirm
// report`): per server and tool, what the journal says happened to the
// calls created in a period.
type Report struct {
	Since time.Time   `json:"since"`
	Until time.Time   `json:"until"`
	Rows  []ReportRow `json:"rows"`
	Total ReportRow   `json:"total"`
}

// ReportRow is one server and tool (or, for Report.Total, all of them).
type ReportRow struct {
	Server         string          `json:"server"`
	ServerAlias    string          `json:"server_alias,omitempty"`
	ServerIdentity json.RawMessage `json:"server_identity,omitempty"`
	Tool           string          `json:"tool"`
	Calls          int             `json:"calls"`
	// Outcomes counts the calls by their state now.
	Outcomes map[State]int `json:"outcomes"`
	// Unknowns counts the calls that were ever unknown (an attempt ended
	// unknown, even if an answer came later); Resolved says how they ended.
	Unknowns int            `json:"unknowns"`
	Resolved map[string]int `json:"resolved"`
	Retries  int            `json:"retries"` // retry decisions
	Replays  int            `json:"replays"` // server-side dedupe hits: stored results replayed
	// TimeToDecide: from a call becoming unknown to the operator's first
	// retry, mark or abandon, over the calls that have one.
	TimeToDecide Durations `json:"time_to_decide"`
	// Executed is the count the journal says took effect (succeeded, or
	// marked applied): the number to hold against the business system's.
	Executed int `json:"executed"`
}

// How an unknown call was resolved (ReportRow.Resolved).
const (
	ResolvedMarked    = "marked_applied" // an operator (or auto_resolve) marked it applied
	ResolvedAbandoned = "abandoned"
	ResolvedRetried   = "retried"     // a retry with its key settled it
	ResolvedLate      = "late_answer" // the server's answer came after all
	ResolvedOpen      = "unresolved"  // still unknown, or a retry is in flight
)

// ResolvedKinds lists the ways in the order reports show them.
var ResolvedKinds = []string{ResolvedMarked, ResolvedAbandoned, ResolvedRetried, ResolvedLate, ResolvedOpen}

func newReportRow() ReportRow {
	r := ReportRow{Outcomes: map[State]int{}, Resolved: map[string]int{}}
	for _, s := range States {
		r.Outcomes[s] = 0
	}
	for _, k := range ResolvedKinds {
		r.Resolved[k] = 0
	}
	return r
}

// Report reads, in one snapshot, the calls created at or after since.
func (j *Journal) Report(ctx context.Context, since time.Time) (Report, error) {
	rep := Report{Since: since.UTC(), Until: j.now().UTC()}
	tx, err := j.snapshot(ctx)
	if err != nil {
		return rep, err
	}
	defer tx.Rollback()
	replays := map[int64]int{}
	rows, err := tx.QueryContext(ctx, "SELECT call_id, count(*) FROM events WHERE kind = ? AND call_id IS NOT NULL GROUP BY call_id", EventDedupeHit)
	if err != nil {
		return rep, err
	}
	for rows.Next() {
		var id int64
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			rows.Close()
			return rep, err
		}
		replays[id] = n
	}
	if err := rows.Close(); err != nil {
		return rep, err
	}
	rows, err = tx.QueryContext(ctx, `WITH sel AS (
			SELECT id, server, server_alias, server_identity, tool, state FROM calls WHERE created_at >= ?
		), lost AS (
			SELECT a.call_id, min(a.ended_at) AS at FROM attempts a JOIN sel ON sel.id = a.call_id
			WHERE a.outcome = 'unknown' OR a.late = 1 GROUP BY a.call_id
		)
		SELECT sel.id, sel.server, sel.server_alias, sel.server_identity, sel.tool, sel.state, coalesce(lost.at, ''),
			(SELECT count(*) FROM decisions d WHERE d.call_id = sel.id AND d.action = 'retry'),
			coalesce((SELECT min(d.at) FROM decisions d WHERE d.call_id = sel.id
				AND d.action IN ('retry', 'mark', 'abandon') AND d.at >= lost.at), '')
		FROM sel LEFT JOIN lost ON lost.call_id = sel.id`, formatTime(since))
	if err != nil {
		return rep, err
	}
	defer rows.Close()
	type group struct {
		row  ReportRow
		secs []float64
	}
	groups := map[[4]string]*group{}
	var allSecs []float64
	total := newReportRow()
	for rows.Next() {
		var id int64
		var server, alias, identity, tool, lost, decided string
		var state State
		var retries int
		if err := rows.Scan(&id, &server, &alias, &identity, &tool, &state, &lost, &retries, &decided); err != nil {
			return rep, err
		}
		k := [4]string{server, alias, identity, tool}
		g := groups[k]
		if g == nil {
			g = &group{row: newReportRow()}
			g.row.Server, g.row.ServerAlias, g.row.Tool = server, alias, tool
			if identity != "" {
				g.row.ServerIdentity = json.RawMessage(identity)
			}
			groups[k] = g
		}
		var secs []float64
		if lost != "" && decided != "" {
			a, err1 := parseTime(lost)
			b, err2 := parseTime(decided)
			if err1 == nil && err2 == nil {
				secs = append(secs, b.Sub(a).Seconds())
			}
		}
		for _, r := range []*ReportRow{&g.row, &total} {
			r.Calls++
			r.Outcomes[state]++
			r.Retries += retries
			r.Replays += replays[id]
			if state == StateSucceeded || state == StateApplied {
				r.Executed++
			}
			if lost != "" {
				r.Unknowns++
				r.Resolved[resolvedBy(state, retries)]++
			}
		}
		g.secs = append(g.secs, secs...)
		allSecs = append(allSecs, secs...)
	}
	if err := rows.Err(); err != nil {
		return rep, err
	}
	for _, g := range groups {
		g.row.TimeToDecide = summarize(g.secs)
		rep.Rows = append(rep.Rows, g.row)
	}
	sort.Slice(rep.Rows, func(a, b int) bool {
		x, y := rep.Rows[a], rep.Rows[b]
		if x.Server != y.Server {
			return x.Server < y.Server
		}
		if x.ServerAlias != y.ServerAlias {
			return x.ServerAlias < y.ServerAlias
		}
		if string(x.ServerIdentity) != string(y.ServerIdentity) {
			return string(x.ServerIdentity) < string(y.ServerIdentity)
		}
		return x.Tool < y.Tool
	})
	total.TimeToDecide = summarize(allSecs)
	rep.Total = total
	return rep, nil
}

// resolvedBy says how a call that was unknown came to its state now.
func resolvedBy(state State, retries int) string {
	switch {
	case state == StateApplied:
		return ResolvedMarked
	case state == StateAbandoned:
		return ResolvedAbandoned
	case (state == StateSucceeded || state == StateFailed) && retries > 0:
		return ResolvedRetried
	case state == StateSucceeded || state == StateFailed:
		return ResolvedLate
	}
	return ResolvedOpen
}
