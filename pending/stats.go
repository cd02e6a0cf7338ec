package pending

import (
	"context"
	"database/sql"
	"errors"
	"math"
	"sort"
	"sync"
	"time"
)

// Stats summarises the journal for `mcp-confirm stats`.
type Stats struct {
	Calls           int                      `json:"calls"`
	ByState         map[State]int            `json:"by_state"`
	ByTool          map[string]map[State]int `json:"by_tool"`
	Attempts        int                      `json:"attempts"`
	Timeouts        int                      `json:"timeouts"`    // attempts ended by a clock
	Unknowns        int                      `json:"unknowns"`    // attempts that ended unknown, for any reason
	Retries         int                      `json:"retries"`     // retry decisions
	DedupeHits      int                      `json:"dedupe_hits"` // replays reported by servers
	SessionsStarted int                      `json:"sessions_started"`
	Recoveries      int                      `json:"recoveries"` // calls recovered after unclean shutdown
	LateResults     int                      `json:"late_results"`
	CancelAnswers   int                      `json:"cancel_answers"` // answers to our own cancel, counted apart from late results
	Resumed         int                      `json:"resumed"`        // answers recovered by resuming a broken HTTP stream, not resending
	Conflicts       int                      `json:"conflicts"`
	// TimeToResolve covers calls that went unknown and are now settled:
	// from the first unknown attempt's end to the call's last update.
	TimeToResolve Durations `json:"time_to_resolve"`
}

// Durations is a small distribution summary, in seconds.
type Durations struct {
	Count  int     `json:"count"`
	Median float64 `json:"median_seconds"`
	P90    float64 `json:"p90_seconds"`
	Max    float64 `json:"max_seconds"`
}

// Stats reads the summary in one snapshot.
func (j *Journal) Stats(ctx context.Context) (Stats, error) {
	tx, err := j.snapshot(ctx)
	if err != nil {
		return Stats{}, err
	}
	defer tx.Rollback()
	st := Stats{ByState: map[State]int{}, ByTool: map[string]map[State]int{}}
	rows, err := tx.QueryContext(ctx, "SELECT tool, state, count(*) FROM calls GROUP BY tool, state")
	if err != nil {
		return Stats{}, err
	}
	for rows.Next() {
		var tool string
		var s State
		var n int
		if err := rows.Scan(&tool, &s, &n); err != nil {
			rows.Close()
			return Stats{}, err
		}
		if st.ByTool[tool] == nil {
			st.ByTool[tool] = map[State]int{}
		}
		st.ByTool[tool][s] = n
		st.ByState[s] += n
		st.Calls += n
	}
	if err := rows.Close(); err != nil {
		return Stats{}, err
	}
	counts := []struct {
		dst *int
		q   string
	}{
		{&st.Attempts, "SELECT count(*) FROM attempts"},
		{&st.Timeouts, "SELECT count(*) FROM attempts WHERE clock <> ''"},
		{&st.Unknowns, "SELECT count(*) FROM attempts WHERE outcome = 'unknown' OR late = 1"},
		{&st.Retries, "SELECT count(*) FROM decisions WHERE action = 'retry'"},
		{&st.DedupeHits, "SELECT count(*) FROM events WHERE kind = 'dedupe_hit'"},
		{&st.SessionsStarted, "SELECT count(*) FROM events WHERE kind = 'session_started'"},
		{&st.Recoveries, "SELECT count(*) FROM events WHERE kind = 'recovery'"},
		{&st.LateResults, "SELECT count(*) FROM events WHERE kind = 'late_result'"},
		{&st.CancelAnswers, "SELECT count(*) FROM events WHERE kind = 'cancel_answer'"},
		{&st.Resumed, "SELECT count(*) FROM events WHERE kind = 'resumed'"},
		{&st.Conflicts, "SELECT count(*) FROM calls WHERE conflict = 1"},
	}
	for _, c := range counts {
		if err := tx.QueryRowContext(ctx, c.q).Scan(c.dst); err != nil {
			return Stats{}, err
		}
	}
	rows, err = tx.QueryContext(ctx, `SELECT lost, c.updated_at FROM (
			SELECT call_id, min(ended_at) AS lost FROM attempts WHERE outcome = 'unknown' OR late = 1 GROUP BY call_id
		) l JOIN calls c ON c.id = l.call_id
		WHERE c.state IN ('succeeded', 'failed', 'applied', 'abandoned')`)
	if err != nil {
		return Stats{}, err
	}
	defer rows.Close()
	var secs []float64
	for rows.Next() {
		var lost, settled string
		if err := rows.Scan(&lost, &settled); err != nil {
			return Stats{}, err
		}
		a, err1 := parseTime(lost)
		b, err2 := parseTime(settled)
		if err1 == nil && err2 == nil && !b.Before(a) {
			secs = append(secs, b.Sub(a).Seconds())
		}
	}
	st.TimeToResolve = summarize(secs)
	return st, rows.Err()
}

func summarize(secs []float64) Durations {
	if len(secs) == 0 {
		return Durations{}
	}
	sort.Float64s(secs)
	// Nearest rank: the smallest value with at least q of them at or below
	// it (the p90 of 60s and 120s is 120s, not 60s).
	at := func(q float64) float64 { return secs[max(int(math.Ceil(q*float64(len(secs))))-1, 0)] }
	return Durations{Count: len(secs), Median: at(0.5), P90: at(0.9), Max: secs[len(secs)-1]}
}

// versionConn is a dedicated connection for PRAGMA data_version, which only
// changes between two reads on the same connection.
type versionConn struct {
	mu   sync.Mutex
	conn *sql.Conn
}

// Changed is closed when the journal may have changed since it was
// called, where the backend is told of changes: on PostgreSQL, at the next
// notice of the journal's channel (every write sends one at commit). On
// SQLite it is nil, and DataVersion is polled. Take it before reading
// DataVersion, so that a change between the two is not missed.
func (j *Journal) Changed() <-chan struct{} {
	if j.pg == nil {
		return nil
	}
	return j.pg.wake()
}

// DataVersion returns a number that changes whenever any connection, in
// this process or another, commits to the journal. Watchers poll it cheaply
// (one PRAGMA, no table read) and reload only when it moves.
func (j *Journal) DataVersion(ctx context.Context) (int64, error) {
	if j.pg != nil {
		return j.pg.dataVersion(), nil
	}
	j.version.mu.Lock()
	defer j.version.mu.Unlock()
	if j.version.conn == nil {
		c, err := j.read.Conn(ctx)
		if err != nil {
			return 0, err
		}
		j.version.conn = c
	}
	var v int64
	err := j.version.conn.QueryRowContext(ctx, "PRAGMA data_version").Scan(&v)
	return v, err
}

// OldestUnknown is the call that has been unknown longest, and since when:
// the end of its newest attempt (when it became unknown this time), else
// its creation. ok is false when no call is unknown.
func (j *Journal) OldestUnknown(ctx context.Context) (id int64, since time.Time, ok bool, err error) {
	var at string
	err = j.read.QueryRowContext(ctx, `SELECT id, since FROM (
			SELECT c.id, coalesce((SELECT max(a.ended_at) FROM attempts a WHERE a.call_id = c.id), c.created_at) AS since
			FROM calls c WHERE c.state = 'unknown'
		) AS u ORDER BY since, id LIMIT 1`).Scan(&id, &at)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, time.Time{}, false, nil
	}
	if err != nil {
		return 0, time.Time{}, false, err
	}
	since, err = parseTime(at)
	return id, since, err == nil, err
}
