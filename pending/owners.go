package pending

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"github.com/oklog/ulid/v2"
)

// Liveness (SPEC §3). Every process that opens the journal holds an
// exclusive flock on its own lock file in "<journal>.owners/". The kernel
// drops the lock when the process dies, however it dies, so "its lock file
// can be locked by someone else" is proof the owner is gone. A PID is never
// trusted: PIDs are reused.

type ownerLock struct {
	id   string
	path string

	mu    sync.Mutex
	f     *os.File    // the locked file; nil once released
	info  fs.FileInfo // f's identity, to tell it from whatever is at path
	noted bool        // a note was written (unrecorded.go): the file outlives this owner
}

func ownersDir(journal string) string { return journal + ".owners" }

// acquireOwner creates and locks a fresh owner file.
func acquireOwner(journal string) (*ownerLock, error) {
	id := ulid.Make().String()
	final := filepath.Join(ownersDir(journal), id+".lock")
	f, info, err := lockFile(final)
	if err != nil {
		return nil, err
	}
	return &ownerLock{id: id, path: final, f: f, info: info}, nil
}

// lockFile creates the lock file at final and locks it. It is locked under a
// temporary name and then renamed into place, so no other process can ever
// see the final name unlocked while this owner lives.
func lockFile(final string) (*os.File, fs.FileInfo, error) {
	if err := os.MkdirAll(filepath.Dir(final), 0o700); err != nil {
		return nil, nil, fmt.Errorf("owner lock folder: %w", err)
	}
	tmp := final + ".new"
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, nil, fmt.Errorf("owner lock: %w", err)
	}
	info, err := f.Stat()
	if err == nil {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	}
	if err == nil {
		// Room for notes, allocated now: on a full disk a note must still fit.
		_ = prepareNoteSpace(f)
		err = os.Rename(tmp, final)
	}
	if err != nil {
		f.Close()
		os.Remove(tmp)
		return nil, nil, fmt.Errorf("owner lock: %w", err)
	}
	return f, info, nil
}

// ensure puts this owner's lock file back when something removed or
// replaced it (a cleanup script emptying the owners folder): with its lock
// file gone, a live owner looks dead to every other process, which would
// recover its calls. The writer calls it before each durable commit, so an
// intent never becomes visible without its owner's lock beside it. The cost
// is one stat.
func (o *ownerLock) ensure() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.f == nil {
		return nil
	}
	if st, err := os.Stat(o.path); err == nil && os.SameFile(st, o.info) {
		return nil
	}
	os.Remove(o.path + ".new") // left by an attempt of this owner that failed
	f, info, err := lockFile(o.path)
	if err != nil {
		return err
	}
	o.f.Close() // the old file is not at the path any more: its lock proves nothing
	o.f, o.info = f, info
	return nil
}

func (o *ownerLock) release() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.f == nil {
		return nil
	}
	var err error
	if !o.noted {
		err = os.Remove(o.path)
	} // else left for the recovery that reads its notes, which removes it
	err = errors.Join(err, o.f.Close())
	o.f = nil
	return err
}

// writeNote writes b at off in the lock file's note room.
func (o *ownerLock) writeNote(b []byte, off int64) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.f == nil {
		return os.ErrClosed
	}
	if _, err := o.f.WriteAt(b, off); err != nil {
		return err
	}
	o.noted = true
	return o.f.Sync()
}

// ownerAlive reports whether the owner id still holds its lock. When the
// owner is dead it returns a release func that removes the stale lock file;
// call it after the recovery that depends on the answer has committed.
func ownerAlive(journal, id string) (alive bool, release func(), err error) {
	if id == "" || strings.ContainsAny(id, `/\.`) {
		return false, func() {}, nil
	}
	path := filepath.Join(ownersDir(journal), id+".lock")
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		return false, func() {}, nil
	}
	if err != nil {
		return false, nil, err
	}
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		f.Close()
		return true, nil, nil
	}
	if err != nil {
		f.Close()
		return false, nil, err
	}
	return false, func() { os.Remove(path); f.Close() }, nil
}

// Recover turns every in_flight call whose owner process is gone into
// unknown ("recovered after unclean shutdown"), ends its open attempt the
// same way, and records a recovery event. Live owners' calls are left alone.
// It runs in one IMMEDIATE transaction, so two processes recovering at once
// cannot both claim a call. Open runs it; the console may run it again.
func (j *Journal) Recover(ctx context.Context) ([]int64, error) {
	if j.readOnly {
		return nil, ErrWriteReadOnly
	}
	if j.pg != nil {
		return j.pgRecover(ctx)
	}
	if err := j.owner.ensure(); err != nil {
		return nil, err
	}
	// Most opens find nothing to recover: looking first, by a read that
	// takes no lock, keeps them from waiting for another process's write
	// transaction. A call that goes in flight for an owner who dies after
	// this look is the next open's to recover, as it would be anyway.
	if dead, err := j.deadOwnerInFlight(ctx); err == nil && !dead {
		j.sweepOwners()
		return nil, nil
	}
	var recovered []int64
	var releases []func()
	err := j.write(ctx, durable, func(ctx context.Context, c *sql.Conn) error {
		recovered, releases = nil, nil
		owners, err := queryColumn[string](ctx, c, "SELECT DISTINCT owner FROM calls WHERE state = 'in_flight'")
		if err != nil {
			return err
		}
		now := formatTime(j.now())
		for _, o := range owners {
			if o == j.owner.id {
				continue
			}
			alive, release, err := ownerAlive(j.path, o)
			if err != nil {
				return fmt.Errorf("check owner %s: %w", o, err)
			}
			if alive {
				continue
			}
			releases = append(releases, release)
			ids, err := j.recoverOwner(ctx, c, o, readUnrecorded(filepath.Join(ownersDir(j.path), o+".lock")), now)
			if err != nil {
				return err
			}
			recovered = append(recovered, ids...)
		}
		return nil
	})
	for _, r := range releases {
		r()
	}
	if err != nil {
		return nil, err
	}
	j.sweepOwners()
	return recovered, nil
}

// recoverOwner turns the in-flight calls of owner, who is gone, into
// unknown, each with the reason its owner noted (notes) or the generic one,
// inside a write. It returns their ids.
func (j *Journal) recoverOwner(ctx context.Context, c *sql.Conn, owner string, notes map[int64]string, now string) ([]int64, error) {
	ids, err := queryColumn[int64](ctx, c, "SELECT id FROM calls WHERE state = 'in_flight' AND owner = ?", owner)
	if err != nil {
		return nil, err
	}
	for _, id := range ids {
		reason := ReasonRecovered
		if why, ok := notes[id]; ok {
			reason = why
		}
		if err := j.loseCall(ctx, c, id, reason, "", now); err != nil {
			return nil, err
		}
		if _, err := c.ExecContext(ctx, `INSERT INTO events (at, kind, call_id, detail) VALUES (?, ?, ?, ?)`,
			now, EventRecovery, id, "owner "+owner+" gone"); err != nil {
			return nil, err
		}
	}
	return ids, nil
}

// deadOwnerInFlight reports whether some in_flight call's owner, other
// than this process, no longer holds its lock. It reads without a lock and
// leaves lock files as they are.
func (j *Journal) deadOwnerInFlight(ctx context.Context) (bool, error) {
	rows, err := j.read.QueryContext(ctx, "SELECT DISTINCT owner FROM calls WHERE state = 'in_flight'")
	if err != nil {
		return false, err
	}
	var owners []string
	for rows.Next() {
		var o string
		if err := rows.Scan(&o); err != nil {
			rows.Close()
			return false, err
		}
		owners = append(owners, o)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return false, err
	}
	for _, o := range owners {
		if o == j.Owner() {
			continue
		}
		alive, err := ownerHoldsLock(j.path, o)
		if err != nil || !alive {
			return true, err
		}
	}
	return false, nil
}

// ownerHoldsLock is ownerAlive without the clean-up: a free lock is
// unlocked again at once and its file left in place.
func ownerHoldsLock(journal, id string) (bool, error) {
	if id == "" || strings.ContainsAny(id, `/\.`) {
		return false, nil
	}
	f, err := os.OpenFile(filepath.Join(ownersDir(journal), id+".lock"), os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer f.Close()
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return true, nil
	}
	return false, err
}

// sweepOwners removes lock files of dead owners that left nothing in flight.
func (j *Journal) sweepOwners() {
	entries, err := os.ReadDir(ownersDir(j.path))
	if err != nil {
		return
	}
	for _, e := range entries {
		id, ok := strings.CutSuffix(e.Name(), ".lock")
		if !ok || id == j.owner.id {
			continue
		}
		if alive, release, err := ownerAlive(j.path, id); err == nil && !alive {
			release()
		}
	}
}

// loseCall moves an in_flight call to unknown and ends its pending attempt.
func (j *Journal) loseCall(ctx context.Context, c *sql.Conn, id int64, reason, clock, now string) error {
	var state State
	if err := c.QueryRowContext(ctx, "SELECT state FROM calls WHERE id = ?"+j.forUpdate(""), id).Scan(&state); err != nil {
		return err
	}
	to, err := Transition(state, EventLost)
	if err != nil {
		return err
	}
	if _, err := c.ExecContext(ctx, "UPDATE calls SET state = ?, reason = ?, updated_at = ? WHERE id = ?", to, reason, now, id); err != nil {
		return err
	}
	var n int
	if err := j.queryRow(ctx, c, "SELECT coalesce(max(n), 0) FROM attempts WHERE call_id = ? AND outcome = 'pending'", id).Scan(&n); err != nil {
		return err
	}
	if _, err = c.ExecContext(ctx, `UPDATE attempts SET outcome = 'unknown', reason = ?, clock = ?, ended_at = ?
		WHERE call_id = ? AND outcome = 'pending'`, reason, clock, now, id); err != nil {
		return err
	}
	if n == 0 { // no attempt was open: the loss is the call's alone
		return j.appendLink(ctx, c, id, linkLost, 0, EventLost, GenesisHash)
	}
	return j.appendAttemptLink(ctx, c, id, linkLost, n, EventLost) // the call's chain (callchain.go)
}
