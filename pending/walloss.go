package pending

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"time"

	"modernc.org/libc"
	"modernc.org/libc/sys/types"
	sqlite3 "modernc.org/sqlite/lib"
)

// A WAL removed or replaced while this process has the journal open
// (issue 44 item 6; SPEC §9 "Journal identity").
//
// What SQLite does then (seen with this driver, on Linux):
//
//   - This process's connections keep the old WAL's descriptor and the
//     WAL index (-shm) mapping they had: they go on reading and writing
//     rows that no other process will ever see. Closing the last of them
//     would checkpoint that orphaned WAL into the file, over whatever
//     others committed since, and delete the -wal by name (the new one).
//   - With the -shm left in place (only the -wal removed or replaced),
//     every other process, and a fresh connection in this one, maps the
//     same index, whose frames point into a WAL file that no longer holds
//     them: each read fails with a short read ("disk I/O error", 522), for
//     as long as any connection of this process keeps the index mapped.
//   - With the -shm removed too (a cleaner of "*-wal *-shm"), other
//     processes build a new index over a new WAL and carry on from the
//     file alone: this process's calls are not there, and the ids it was
//     given are handed out again to other calls. A fresh connection in
//     this process would still share the old index (SQLite keeps one per
//     file per process), so it would see neither world correctly.
//
// So the journal "as it now is" can only be reached once every connection
// of this process to the old WAL is closed, each told not to checkpoint
// on close (SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE); the next connection then
// opens the WAL and index now at the paths. Before closing, what this
// process wrote is read from the old view (its connections still see it),
// and written back into the new one, matched by idempotency key, each call
// under a fresh id, never over another call (rerecord). Writes by id stay
// refused afterwards (ids from before mean other calls now); the guard
// records the outcome that found the loss by the call's new id
// (RecordOutcomeAfterLoss) and reads back what the journal then says.

// EventReRecorded marks a call this process wrote back after the
// journal's WAL was removed or replaced under it.
const EventReRecorded = "re_recorded"

// ReasonReRecorded is what the event and the outcome say of such a call.
const ReasonReRecorded = "re-recorded after the journal lost them"

// walWatchEvery is how often an open journal looks for its WAL being
// removed or replaced, so that the loss is repaired before the next write
// needs it (and other processes, which cannot read the journal while this
// one keeps a stale WAL index mapped, get it back).
const walWatchEvery = 200 * time.Millisecond

// lossState is what the writer goroutine learnt and did about a lost WAL.
type lossState struct {
	mu         sync.Mutex
	salvaged   bool            // the write-back into the journal as it now is is done
	err        error           // why it could not be done
	rerecorded map[int64]int64 // old id → id in the journal as it now is
}

// ReRecorded is the id, in the journal as it now is, of the call this
// process knew as oldID before its WAL was removed or replaced and that it
// wrote back (or found there and reconciled); false when there is none.
func (j *Journal) ReRecorded(oldID int64) (int64, bool) {
	j.loss.mu.Lock()
	defer j.loss.mu.Unlock()
	id, ok := j.loss.rerecorded[oldID]
	return id, ok
}

// WALLossError says why the write-back after a lost WAL failed, if it did.
func (j *Journal) WALLossError() error {
	j.loss.mu.Lock()
	defer j.loss.mu.Unlock()
	return j.loss.err
}

type afterLossKey struct{}

// RecordOutcomeAfterLoss is RecordOutcome for a call this process wrote
// back after its WAL was lost (id is the call's new id, ReRecorded): the
// one write by id the journal still takes then. The outcome is marked.
func (j *Journal) RecordOutcomeAfterLoss(ctx context.Context, id int64, n int, o Outcome) error {
	if o.Reason == "" {
		o.Reason = ReasonReRecorded
	} else {
		o.Reason += "; " + ReasonReRecorded
	}
	return j.RecordOutcome(context.WithValue(ctx, afterLossKey{}, true), id, n, o)
}

// watchWAL looks at the journal's files until stop is closed; once they
// are not the ones Open found, it has the writer find it (an empty write,
// whose commit checks them) and ends.
func (j *Journal) watchWAL(ids fileIDs, stop <-chan struct{}) {
	t := time.NewTicker(walWatchEvery)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		if ids.check(j.path) != nil {
			_ = j.write(context.Background(), lazy, func(context.Context, *sql.Conn) error { return nil })
			return
		}
	}
}

// refuseBroken fails, once the journal's WAL is known lost, every request
// of batch but those RecordOutcomeAfterLoss made after the write-back, and
// returns the latter.
func (j *Journal) refuseBroken(batch []*writeReq) []*writeReq {
	j.loss.mu.Lock()
	salvaged := j.loss.salvaged
	j.loss.mu.Unlock()
	var keep []*writeReq
	for _, r := range batch {
		if r.afterLoss && salvaged {
			keep = append(keep, r)
			continue
		}
		r.done <- j.broken
	}
	return keep
}

// salvage runs on the writer goroutine once the WAL is found lost: it reads
// what this process wrote from the old view, lets go of every connection
// to the old WAL without a checkpoint, and writes that back into the
// journal as it now is. On failure the connections are left as they were
// where it can (Close then leaves them open too).
func (j *Journal) salvage() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := j.salvageIn(ctx)
	j.loss.mu.Lock()
	defer j.loss.mu.Unlock()
	if err != nil {
		j.loss.err = fmt.Errorf("writing back this process's calls after the journal lost them: %w", err)
		return
	}
	j.loss.salvaged = true
}

func (j *Journal) salvageIn(ctx context.Context) error {
	lost, err := j.ownCalls(ctx, j.wconn)
	if err != nil {
		return fmt.Errorf("read them from the lost WAL: %w", err)
	}
	if err := j.releaseOld(ctx); err != nil {
		return err
	}
	// A process that still maps the old index keeps every reader failing
	// (see above) until it lets go: it finds the loss itself within
	// walWatchEvery, so this waits a while for it. A connection that
	// failed so has mapped that index too, and would keep it alive for
	// everyone: it is dropped, and a new one tried, each time. The index
	// is rebuilt over the WAL now at the path by whichever process next
	// opens it while no other holds it.
	var ids map[int64]int64
	deadline := time.Now().Add(20 * time.Second)
	for pause := 20 * time.Millisecond; ; pause = min(2*pause, 500*time.Millisecond) {
		if ids, err = j.writeBack(ctx, lost); err == nil || time.Now().After(deadline) {
			break
		}
		j.rollback()
		if rerr := j.releaseOld(ctx); rerr != nil {
			return rerr
		}
		time.Sleep(pause)
	}
	if err != nil {
		return err
	}
	files, err := statFiles(j.path)
	if err != nil {
		return err
	}
	j.files = files
	j.loss.mu.Lock()
	j.loss.rerecorded = ids
	j.loss.mu.Unlock()
	return nil
}

// releaseOld closes every connection of this process to the journal
// (writer, readers, the data-version one), each told first not to
// checkpoint on close, and opens a new writer connection.
func (j *Journal) releaseOld(ctx context.Context) error {
	for _, st := range j.stmts {
		_ = st.Close()
	}
	j.stmts = nil
	j.version.mu.Lock()
	defer j.version.mu.Unlock()
	if j.version.conn != nil {
		if err := dropConn(ctx, j.version.conn); err != nil {
			return err
		}
		j.version.conn = nil
	}
	// Holding every slot of the read pool is holding every reader
	// connection it has: each is dropped, and the pool opens new ones.
	var held []*sql.Conn
	for range readPoolSize {
		c, err := j.read.Conn(ctx)
		if err != nil {
			return fmt.Errorf("wait for this process's readers: %w", err)
		}
		held = append(held, c)
	}
	for _, c := range held {
		if err := dropConn(ctx, c); err != nil {
			return err
		}
	}
	if err := dropConn(ctx, j.wconn); err != nil {
		return err
	}
	c, err := j.wdb.Conn(ctx)
	if err != nil {
		return err
	}
	j.wconn = c
	return nil
}

// dropConn closes c without the checkpoint SQLite makes when it closes the
// last connection to a file (it would copy the lost WAL over the journal).
func dropConn(ctx context.Context, c *sql.Conn) error {
	var cfgErr error
	_ = c.Raw(func(dc any) error {
		cfgErr = noCheckpointOnClose(dc)
		if cfgErr != nil {
			return nil // kept: closing it would checkpoint
		}
		return driver.ErrBadConn // database/sql closes it
	})
	if cfgErr != nil {
		return cfgErr
	}
	if err := c.Close(); err != nil && !errors.Is(err, sql.ErrConnDone) {
		return err // ErrConnDone: Raw's ErrBadConn closed it already
	}
	return nil
}

// noCheckpointOnClose sets SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE on a driver
// connection of modernc.org/sqlite, which offers no call for it: its
// connection begins with the sqlite3 handle and the C runtime's thread
// state, which is checked here by name and type before it is used.
func noCheckpointOnClose(dc any) error {
	v := reflect.ValueOf(dc)
	want := reflect.TypeOf((*libc.TLS)(nil))
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return fmt.Errorf("the SQLite driver's connection is a %T", dc)
	}
	t := v.Elem().Type()
	if t.PkgPath() != "modernc.org/sqlite" || t.NumField() < 2 || t.Field(0).Name != "db" ||
		t.Field(0).Type.Kind() != reflect.Uintptr || t.Field(1).Name != "tls" || t.Field(1).Type != want {
		return fmt.Errorf("this build's SQLite driver (%s.%s) cannot be told not to checkpoint on close", t.PkgPath(), t.Name())
	}
	h := (*struct {
		db  uintptr
		tls *libc.TLS
	})(v.UnsafePointer())
	const slot = 8 // libc.VaList's stride per argument
	bp := libc.Xmalloc(h.tls, types.Size_t(2*slot))
	if bp == 0 {
		return errors.New("out of memory")
	}
	defer libc.Xfree(h.tls, bp)
	if rc := sqlite3.Xsqlite3_db_config(h.tls, h.db, sqlite3.SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE,
		libc.VaList(bp, int32(1), uintptr(0))); rc != sqlite3.SQLITE_OK {
		return fmt.Errorf("sqlite3_db_config(NO_CKPT_ON_CLOSE): %d", rc)
	}
	return nil
}

// rowData is one row as read: its columns and values.
type rowData struct {
	cols []string
	vals []any
}

func (r rowData) get(col string) any {
	for i, c := range r.cols {
		if c == col {
			return r.vals[i]
		}
	}
	return nil
}

// lostCall is one call of this process as the lost WAL had it.
type lostCall struct {
	call      rowData
	attempts  []rowData
	events    []rowData
	decisions int // not written back: the decision chain is the journal's own
}

func queryRows(ctx context.Context, c *sql.Conn, query string, args ...any) ([]rowData, error) {
	rows, err := c.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	var out []rowData
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		out = append(out, rowData{cols: cols, vals: vals})
	}
	return out, rows.Err()
}

// ownCalls reads, through c, every call an attempt of this owner went out
// for, with its attempts and events.
func (j *Journal) ownCalls(ctx context.Context, c *sql.Conn) ([]lostCall, error) {
	calls, err := queryRows(ctx, c, `SELECT * FROM calls WHERE owner = ? OR id IN (SELECT call_id FROM attempts WHERE owner = ?) ORDER BY id`,
		j.Owner(), j.Owner())
	if err != nil {
		return nil, err
	}
	out := make([]lostCall, 0, len(calls))
	for _, cr := range calls {
		id := cr.get("id")
		lc := lostCall{call: cr}
		if lc.attempts, err = queryRows(ctx, c, `SELECT * FROM attempts WHERE call_id = ? ORDER BY n`, id); err != nil {
			return nil, err
		}
		if lc.events, err = queryRows(ctx, c, `SELECT * FROM events WHERE call_id = ? ORDER BY id`, id); err != nil {
			return nil, err
		}
		if err := c.QueryRowContext(ctx, `SELECT count(*) FROM decisions WHERE call_id = ?`, id).Scan(&lc.decisions); err != nil {
			return nil, err
		}
		out = append(out, lc)
	}
	return out, nil
}

// insertRow inserts r into table without the columns skip names, with the
// values set overrides.
func insertRow(ctx context.Context, c *sql.Conn, table string, r rowData, skip map[string]bool, set map[string]any) error {
	var cols, marks []string
	var args []any
	for i, col := range r.cols {
		if skip[col] {
			continue
		}
		v := r.vals[i]
		if s, ok := set[col]; ok {
			v = s
		}
		cols, marks, args = append(cols, col), append(marks, "?"), append(args, v)
	}
	_, err := c.ExecContext(ctx, fmt.Sprintf("INSERT INTO %s (%s) VALUES (%s)", table, strings.Join(cols, ", "), strings.Join(marks, ", ")), args...)
	return err
}

// writeBack writes lost into the journal as it now is, in one durable
// transaction on the new writer connection: a call whose (server, tool,
// key) is not there is inserted under a fresh id with its attempts and
// events; one that is there is not duplicated, only given the outcomes
// and the state it lacks. Each gets an EventReRecorded saying what it was.
func (j *Journal) writeBack(ctx context.Context, lost []lostCall) (map[int64]int64, error) {
	c := j.wconn
	if _, err := c.ExecContext(ctx, "PRAGMA synchronous=FULL"); err != nil {
		return nil, err
	}
	if _, err := c.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return nil, err
	}
	ids := map[int64]int64{}
	ts := formatTime(j.now())
	for _, lc := range lost {
		oldID, _ := lc.call.get("id").(int64)
		var newID int64
		var state State
		err := c.QueryRowContext(ctx, `SELECT id, state FROM calls WHERE server = ? AND tool = ? AND key = ?`,
			lc.call.get("server"), lc.call.get("tool"), lc.call.get("key")).Scan(&newID, &state)
		var detail string
		switch {
		case errors.Is(err, sql.ErrNoRows):
			newID, err = j.insertLost(ctx, c, lc, ids)
			detail = fmt.Sprintf("%s (the journal's WAL file was removed or replaced while this process had it open); it was call %d",
				ReasonReRecorded, oldID)
		case err == nil:
			var changed bool
			changed, err = reconcileLost(ctx, c, lc, newID, state)
			if changed {
				detail = fmt.Sprintf("%s: its outcome was written back onto the row that survived (it was call %d)", ReasonReRecorded, oldID)
			}
		}
		if err != nil {
			j.rollback()
			return nil, fmt.Errorf("call %v: %w", lc.call.get("key"), err)
		}
		if detail != "" && lc.decisions > 0 {
			detail += fmt.Sprintf("; %d decision(s) on it were not re-recorded", lc.decisions)
		}
		if detail != "" {
			if _, err := c.ExecContext(ctx, `INSERT INTO events (at, kind, call_id, detail) VALUES (?, ?, ?, ?)`,
				ts, EventReRecorded, newID, detail); err != nil {
				j.rollback()
				return nil, err
			}
			if err := j.linkReRecorded(ctx, c, newID); err != nil {
				j.rollback()
				return nil, err
			}
		}
		ids[oldID] = newID
	}
	if _, err := c.ExecContext(ctx, "COMMIT"); err != nil {
		j.rollback()
		return nil, err
	}
	return ids, nil
}

func (j *Journal) insertLost(ctx context.Context, c *sql.Conn, lc lostCall, ids map[int64]int64) (int64, error) {
	set := map[string]any{}
	if comp, ok := lc.call.get("compensates").(int64); ok {
		// The call it undoes is known here by its new id, if it was
		// written back before it; an old id would name another call.
		set["compensates"] = nil
		if to, ok := ids[comp]; ok {
			set["compensates"] = to
		}
	}
	if err := insertRow(ctx, c, "calls", lc.call, map[string]bool{"id": true}, set); err != nil {
		return 0, err
	}
	var id int64
	if err := c.QueryRowContext(ctx, `SELECT id FROM calls WHERE server = ? AND tool = ? AND key = ?`,
		lc.call.get("server"), lc.call.get("tool"), lc.call.get("key")).Scan(&id); err != nil {
		return 0, err
	}
	for _, a := range lc.attempts {
		if err := insertRow(ctx, c, "attempts", a, nil, map[string]any{"call_id": id}); err != nil {
			return 0, err
		}
	}
	for _, e := range lc.events {
		if err := insertRow(ctx, c, "events", e, map[string]bool{"id": true}, map[string]any{"call_id": id}); err != nil {
			return 0, err
		}
	}
	return id, nil
}

// reconcileLost gives the call that survived as id what the lost view had
// and it lacks: attempts it does not have, outcomes of attempts it has
// pending, and the state when it is still in flight there.
func reconcileLost(ctx context.Context, c *sql.Conn, lc lostCall, id int64, state State) (bool, error) {
	changed := false
	for _, a := range lc.attempts {
		var outcome string
		err := c.QueryRowContext(ctx, `SELECT outcome FROM attempts WHERE call_id = ? AND n = ?`, id, a.get("n")).Scan(&outcome)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			if err := insertRow(ctx, c, "attempts", a, nil, map[string]any{"call_id": id}); err != nil {
				return changed, err
			}
			changed = true
		case err != nil:
			return changed, err
		case outcome == string(OutcomePending) && a.get("outcome") != string(OutcomePending):
			if _, err := c.ExecContext(ctx, `UPDATE attempts SET outcome = ?, ended_at = ?, reason = ?, clock = ?, result = ?,
				error = ?, late = ?, rpc_id = ? WHERE call_id = ? AND n = ?`,
				a.get("outcome"), a.get("ended_at"), a.get("reason"), a.get("clock"), a.get("result"), a.get("error"),
				a.get("late"), a.get("rpc_id"), id, a.get("n")); err != nil {
				return changed, err
			}
			changed = true
		}
	}
	if lostState, _ := lc.call.get("state").(string); state == StateInFlight && lostState != string(StateInFlight) {
		if _, err := c.ExecContext(ctx, `UPDATE calls SET state = ?, reason = ?, updated_at = ? WHERE id = ?`,
			lostState, lc.call.get("reason"), lc.call.get("updated_at"), id); err != nil {
			return changed, err
		}
		changed = true
	}
	return changed, nil
}

// linkReRecorded chains what the write-back did to call id (callchain.go):
// the first link of a call inserted again, or the next of one whose row
// survived, naming the state it now stands in; verify then checks the
// call's history from there, not the part only memory held.
func (j *Journal) linkReRecorded(ctx context.Context, c *sql.Conn, id int64) error {
	var r intentRow
	if err := c.QueryRowContext(ctx, `SELECT server, server_alias, server_identity, tool, key, args, fingerprint, created_at,
		coalesce(compensates, 0) FROM calls WHERE id = ?`, id).Scan(&r.Server, &r.ServerAlias, &r.ServerIdentity, &r.Tool, &r.Key,
		&r.Args, &r.Fingerprint, &r.CreatedAt, &r.Compensates); err != nil {
		return fmt.Errorf("read call %d for its link: %w", id, err)
	}
	q, args := j.linkInsert("SELECT id, state FROM calls WHERE id = ?", linkReRecord, 0, "", r.content(), r.Key)
	_, err := c.ExecContext(ctx, q, append(args, id)...)
	return err
}
