package pending

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/oklog/ulid/v2"
)

// Liveness (SPEC §3). Every process that opens the journal holds an
// exclusive flock on its own lock file in "<journal>.owners/". The kernel
// drops the lock when the process dies, however it dies, so "its lock file
// can be locked by someone else" is proof the owner is gone. A PID alone
// is never trusted: PIDs are reused.
//
// A lock file is only a file, though: a cleaner that empties the owners
// folder (or replaces a file in it) would make a live owner look dead, and
// another process would recover its calls as "after unclean shutdown" while
// it is still sending them (issue 44). So the lock file is not the only
// signal (ownerLive):
//
//   - on Linux, the owner also holds an OFD lock on a byte of the journal
//     file itself (liveness_linux.go), which no file cleaner can take away;
//   - where it cannot (not Linux, or a file system without such locks),
//     its id is tagged with its pid and that process's start time
//     (ownerTag), and a missing or replaced lock file is "cannot tell"
//     while that process runs;
//   - within this process, the owners of its open journals (liveOwners);
//   - and the lock file, which the owner puts back when it notices it
//     gone (ensure), and which holds its notes (unrecorded.go).
//
// An owner is dead only when every signal it has says so.

type ownerLock struct {
	id   string
	path string

	slotFD *os.File // holds the owner's slot on the journal; nil: the id is tagged instead

	mu    sync.Mutex
	f     *os.File    // the locked file; nil once released
	info  fs.FileInfo // f's identity, to tell it from whatever is at path
	noted bool        // a note was written (unrecorded.go): the file outlives this owner
}

// liveOwners are the owners of this process's open journals. Their slots
// are held through one shared descriptor, and a lock never conflicts with
// another of its own descriptor, so this process cannot see them by the
// slots: it asks here.
var liveOwners struct {
	mu  sync.Mutex
	ids map[string]bool
}

func liveHere(id string) bool {
	liveOwners.mu.Lock()
	defer liveOwners.mu.Unlock()
	return liveOwners.ids[id]
}

// slotUsedHere reports whether an owner of this process has slot already:
// a second owner on it would lose its lock when the first releases it.
func slotUsedHere(slot int64) bool {
	liveOwners.mu.Lock()
	defer liveOwners.mu.Unlock()
	for id := range liveOwners.ids {
		if ownerSlot(id) == slot {
			return true
		}
	}
	return false
}

func setLiveHere(id string, live bool) {
	liveOwners.mu.Lock()
	defer liveOwners.mu.Unlock()
	if liveOwners.ids == nil {
		liveOwners.ids = map[string]bool{}
	}
	if live {
		liveOwners.ids[id] = true
	} else {
		delete(liveOwners.ids, id)
	}
}

func ownersDir(journal string) string { return journal + ".owners" }

// slotsOff makes owners take no slot, as where there are none; tests set
// it (PENDING_NO_SLOTS) to run the fallback on Linux.
var slotsOff bool

// acquireOwner takes a fresh owner id for the journal: its slot on the
// journal where it can have one (else an id tagged with this process), and
// its locked lock file.
func acquireOwner(journal string) (*ownerLock, error) {
	var id string
	var slotFD *os.File
	for i := 0; i < 8 && !slotsOff; i++ {
		id = ulid.Make().String()
		if slotUsedHere(ownerSlot(id)) {
			continue
		}
		fd, taken, err := takeSlot(journal, id)
		if err != nil {
			break
		}
		if taken {
			slotFD = fd
			break
		}
		// Another live owner has this id's slot (1 in 2^40): another id.
	}
	if slotFD == nil {
		id = ulid.Make().String() + ownerTag(os.Getpid())
	}
	final := filepath.Join(ownersDir(journal), id+".lock")
	f, info, err := lockFile(final)
	if err != nil {
		if slotFD != nil {
			freeSlot(slotFD, id)
		}
		return nil, err
	}
	setLiveHere(id, true)
	return &ownerLock{id: id, path: final, slotFD: slotFD, f: f, info: info}, nil
}

// ownerTag is what an owner without a slot adds to its id: "-p<pid>", and
// "-s<start>" when its process start time is known. Owner ids are ULIDs
// (26 letters and digits) with nothing after them but this tag.
func ownerTag(pid int) string {
	tag := "-p" + strconv.Itoa(pid)
	if start := processStart(pid); start != "" {
		tag += "-s" + start
	}
	return tag
}

// taggedProcess is the pid and start time ("" if not given) an owner id is
// tagged with; ok is false for an id with no tag (its owner took a slot).
func taggedProcess(id string) (pid int, start string, ok bool) {
	_, tag, found := strings.Cut(id, "-p")
	if !found {
		return 0, "", false
	}
	p, start, _ := strings.Cut(tag, "-s")
	pid, err := strconv.Atoi(p)
	if err != nil || pid <= 0 {
		return 0, "", false
	}
	return pid, start, true
}

// processRuns reports whether process pid runs, and (when start is given
// and can be read) is the one that started at start, not a later one that
// got its pid. A process of another user that cannot be signalled runs.
func processRuns(pid int, start string) bool {
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	if now := processStart(pid); start != "" && now != "" && now != start {
		return false
	}
	return true
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
	// Its in-flight calls become recoverable now, as when a process dies.
	setLiveHere(o.id, false)
	if o.slotFD != nil {
		err = errors.Join(err, freeSlot(o.slotFD, o.id))
	}
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

// ownerAlive reports whether the owner id lives (ownerLive). When the
// owner is dead it returns a release func that removes the stale lock file;
// call it after the recovery that depends on the answer has committed.
func ownerAlive(journal, id string) (alive bool, release func(), err error) {
	alive, f, err := ownerLive(journal, id)
	if err != nil || alive {
		return alive, nil, err
	}
	if f == nil {
		return false, func() {}, nil
	}
	return false, func() { os.Remove(f.Name()); f.Close() }, nil
}

// ownerLive asks every signal of owner id's life (see the top of the
// file); the owner is dead only when none says it lives. For a dead owner
// with a lock file, that file is returned locked, for the caller to remove
// or close.
func ownerLive(journal, id string) (alive bool, lockFile *os.File, err error) {
	if id == "" || strings.ContainsAny(id, `/\.`) {
		return false, nil, nil
	}
	if liveHere(id) {
		return true, nil, nil
	}
	pid, start, tagged := taggedProcess(id)
	if !tagged {
		// The owner took a slot on the journal (or is of a build before
		// slots, which only the lock file tells of).
		if held, err := slotHeld(journal, id); err != nil || held {
			return held, nil, err
		}
	}
	path := filepath.Join(ownersDir(journal), id+".lock")
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	switch {
	case errors.Is(err, os.ErrNotExist):
		f = nil // removed: the other signals tell
	case err != nil:
		return false, nil, err
	default:
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return true, nil, nil
		}
		if err != nil {
			f.Close()
			return false, nil, err
		}
	}
	// No lock held. An owner without a slot may still run with its lock
	// file removed or replaced: as long as its process runs, it cannot be
	// told dead.
	if tagged && processRuns(pid, start) {
		if f != nil {
			f.Close()
		}
		return true, nil, nil
	}
	return false, f, nil
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

// ownerHoldsLock is ownerAlive without the clean-up: a free lock file is
// unlocked again at once and left in place.
func ownerHoldsLock(journal, id string) (bool, error) {
	alive, f, err := ownerLive(journal, id)
	if f != nil {
		f.Close()
	}
	return alive, err
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
