//go:build linux

package pending

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// Liveness that no file cleaner can take away (issue 44, item 3). On
// Linux each owner also holds an open file description (OFD) lock on one
// byte of the journal file itself, at an offset of its own (ownerSlot):
// removing or replacing "<journal>.owners/" cannot release it, only the
// death of the process (or its Close) can. Why this lock and no other:
//
//   - OFD locks (F_OFD_SETLK) belong to the open file description, not
//     to the process. SQLite takes POSIX locks (F_SETLK) on the same file,
//     and a POSIX lock is dropped when its process closes ANY descriptor
//     of the file, which SQLite does as it pleases: a POSIX lock of ours
//     would vanish under a live owner. An OFD lock stays until its own
//     description is closed.
//   - OFD and POSIX locks conflict only where their ranges overlap.
//     SQLite's lock bytes are 0x40000000..0x400001FF of the database file
//     (and, in WAL mode, bytes of the -shm file); the slots start at
//     1 TiB, far beyond them and beyond any journal's size (a lock
//     beyond the end of a file is allowed, and extends nothing).
//   - The reverse hazard: closing a descriptor of the journal in this
//     process would drop SQLite's own POSIX locks on it (the SQLite docs'
//     "how to corrupt", 2.2). So the journal is opened once per process
//     and file (journalFD) and that descriptor is never closed: it dies
//     with the process, which is exactly when its locks must go.
//
// Owners of one process share that descriptor, and locks of one
// description never conflict with each other: within the process, liveness
// is read from liveOwners instead.

// slotBase is where owner slots start: 1 TiB, above SQLite's lock bytes.
const slotBase = 1 << 40

// ownerSlot is the byte of the journal whose lock says owner id lives: 40
// bits of SHA-256 of the id above slotBase, the same in every process. Two
// live owners on one slot cannot be: the second one's lock fails, and it
// takes another id (acquireOwner). A dead owner whose slot a live one took
// by chance (odds 1 in 2^40 per live owner) looks alive: its calls wait
// for the operator instead of being recovered, never the reverse.
func ownerSlot(id string) int64 {
	sum := sha256.Sum256([]byte("mcp-confirm owner slot " + id))
	return slotBase + int64(binary.BigEndian.Uint64(sum[:8])>>24)
}

var journalFDs struct {
	mu sync.Mutex
	m  map[[2]uint64]*os.File // by device and inode; never closed (see above)
}

// journalFD is this process's descriptor of the journal at path, opened
// read-write when it can be (to lock) and read-only otherwise (to test
// others' locks, all a read-only journal needs).
func journalFD(path string) (*os.File, error) {
	journalFDs.mu.Lock()
	defer journalFDs.mu.Unlock()
	if st, err := os.Stat(path); err == nil {
		if f := journalFDs.m[fileKey(st)]; f != nil {
			return f, nil
		}
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EROFS) {
		f, err = os.Open(path)
	}
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		return nil, err // f is kept open all the same: it may not be closed
	}
	if journalFDs.m == nil {
		journalFDs.m = map[[2]uint64]*os.File{}
	}
	if old := journalFDs.m[fileKey(st)]; old != nil {
		// Another look got here first (the file replaced between the two
		// stats): f stays open, unused, for the same reason.
		return old, nil
	}
	journalFDs.m[fileKey(st)] = f
	return f, nil
}

func fileKey(st fs.FileInfo) [2]uint64 {
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		return [2]uint64{uint64(sys.Dev), sys.Ino}
	}
	return [2]uint64{}
}

// slotLock is the fcntl lock of slot: one byte, of type typ.
func slotLock(typ int16, slot int64) *unix.Flock_t {
	return &unix.Flock_t{Type: typ, Whence: io.SeekStart, Start: slot, Len: 1}
}

// takeSlot locks id's slot of the journal. taken is false, with no error,
// when another live owner holds it; err says the lock could not be tried
// at all (a file system without locks): the caller then tags its id
// with its process instead.
func takeSlot(journal, id string) (f *os.File, taken bool, err error) {
	if f, err = journalFD(journal); err != nil {
		return nil, false, err
	}
	err = unix.FcntlFlock(f.Fd(), unix.F_OFD_SETLK, slotLock(unix.F_WRLCK, ownerSlot(id)))
	if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EACCES) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return f, true, nil
}

// freeSlot unlocks id's slot (the descriptor itself stays open).
func freeSlot(f *os.File, id string) error {
	return unix.FcntlFlock(f.Fd(), unix.F_OFD_SETLK, slotLock(unix.F_UNLCK, ownerSlot(id)))
}

// slotHeld reports whether some other process holds id's slot of the
// journal. It takes nothing (F_OFD_GETLK only asks).
func slotHeld(journal, id string) (bool, error) {
	f, err := journalFD(journal)
	if err != nil {
		return false, err
	}
	lk := slotLock(unix.F_WRLCK, ownerSlot(id))
	if err := unix.FcntlFlock(f.Fd(), unix.F_OFD_GETLK, lk); err != nil {
		return false, err
	}
	return lk.Type != unix.F_UNLCK, nil
}

// processStart is when process pid started, in clock ticks since boot
// (field 22 of /proc/<pid>/stat), to tell it from a later process that
// got its pid; "" when it cannot be read.
func processStart(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	// The command name (field 2) is in parentheses and may hold anything;
	// the fields after its last ')' start with field 3.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return ""
	}
	fields := strings.Fields(s[i+1:])
	if len(fields) < 20 {
		return ""
	}
	return fields[19]
}
