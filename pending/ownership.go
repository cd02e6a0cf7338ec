package pending

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// Ownership (SPEC §9 "Ownership"), as ssh treats its keys: the journal, its
// -wal and -shm, the fingerprint secret and the owners folder must belong
// to this user and be closed to everyone else. Another user's file is
// refused: it may have been planted (a journal pre-created 0666 in a shared
// folder would collect every call this user makes). A file of this user
// that is merely too open is tightened, and the caller is told.

var (
	// ErrNotOwned: one of the journal's files belongs to another user.
	ErrNotOwned = errors.New("a journal file belongs to another user")
	// ErrTooOpen: one of the journal's files, or its folder, can be changed
	// by other users and is not this user's to tighten.
	ErrTooOpen = errors.New("a journal file or folder can be written by other users")
)

// OwnershipError is an ErrNotOwned or ErrTooOpen that another journal
// path gets around (Problem says which rule was broken); the message says
// what is wrong and how to fix it in place, the front-end how to name
// another journal.
type OwnershipError struct {
	Problem OwnershipProblem
	typedError
}

// OwnershipProblem is the rule an OwnershipError broke.
type OwnershipProblem int

// Ownership problems.
const (
	NotAFile           OwnershipProblem = iota + 1 // a symlink or special file, or a file where a folder belongs (or the reverse)
	OtherUsersFile                                 // a journal file belongs to another user
	OtherUsersFolder                               // the journal's folder belongs to another user, not root
	FolderOpenToOthers                             // others can write to the journal's folder, and it is not sticky
)

// Tightening is a file of this user whose mode Open narrowed.
type Tightening struct {
	Path     string
	From, To fs.FileMode
}

func (t Tightening) String() string {
	return fmt.Sprintf("tightened %s from %04o to %04o", t.Path, uint32(t.From), uint32(t.To))
}

// secretPath is the fingerprint secret's file (pending/secret.go creates
// it; Open only checks it when it exists).
func secretPath(journal string) string { return journal + ".secret" }

// fileRole is what a checked path is, for messages.
type fileRole struct {
	what string      // "journal", "WAL", ...
	mode fs.FileMode // the mode it is tightened to
	dir  bool
}

var (
	roleJournal = fileRole{what: "journal", mode: 0o600}
	roleWAL     = fileRole{what: "journal's WAL", mode: 0o600}
	roleSHM     = fileRole{what: "journal's WAL index", mode: 0o600}
	roleSecret  = fileRole{what: "fingerprint secret", mode: 0o600}
	roleOwners  = fileRole{what: "owners folder", mode: 0o700, dir: true}
	roleLock    = fileRole{what: "owner lock file", mode: 0o600}
)

// checkOwned checks one path that must be this user's: missing is fine
// (it will be created with the right mode), another user's or not a
// regular file (a folder for the owners folder) is refused, too open is
// tightened and reported to tighten. A symlink is judged by itself, not
// followed: SQLite and the owners code would follow it to a file this
// check did not see.
func checkOwned(path string, role fileRole, tighten func(Tightening)) error {
	st, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if role == roleJournal && !st.Mode().IsRegular() {
		return nil // a folder, say: checkHeader says what it is
	}
	if st.Mode()&fs.ModeSymlink != 0 || st.IsDir() != role.dir || (!role.dir && !st.Mode().IsRegular()) {
		kind := "a regular file"
		if role.dir {
			kind = "a folder"
		}
		return &OwnershipError{Problem: NotAFile, typedError: typedError{kind: ErrNotOwned, msg: fmt.Sprintf(
			"the %s %s is not %s (%s); remove it", role.what, path, kind, st.Mode().Type())}}
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return nil // not a Unix file system: nothing to judge by
	}
	me := os.Geteuid()
	if int(sys.Uid) != me {
		return &OwnershipError{Problem: OtherUsersFile, typedError: typedError{kind: ErrNotOwned, msg: fmt.Sprintf(
			"the %s %s belongs to uid %d, not to this user (uid %d): another user may read or plant calls in it; "+
				"if it is yours, 'chown %d %s', else remove it", role.what, path, sys.Uid, me, me, path)}}
	}
	perm := st.Mode().Perm()
	if perm&0o077 == 0 {
		return nil
	}
	to := role.mode
	if err := os.Chmod(path, to); err != nil {
		return &typedError{kind: ErrTooOpen, cause: err, msg: fmt.Sprintf(
			"the %s %s is open to other users (mode %04o) and could not be tightened (%v); 'chmod %o %s'",
			role.what, path, uint32(perm), err, uint32(role.mode), path)}
	}
	if tighten != nil {
		tighten(Tightening{Path: path, From: perm, To: to})
	}
	return nil
}

// checkFolder judges the journal's folder as ssh judges ~/.ssh: it must
// belong to this user or to root, and no one else may write to it unless
// it is sticky (/tmp): whoever can write to it can replace the journal or
// plant its -wal, -shm, secret or owners folder between two opens. Such a
// folder is refused, not tightened: it is not mcp-confirm's (a project or
// shared folder), and changing its mode would change more than the journal.
func checkFolder(dir string) error {
	st, err := os.Stat(dir)
	if err != nil {
		return err
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	me := os.Geteuid()
	if int(sys.Uid) != me && sys.Uid != 0 {
		if st.Mode().Perm()&0o022 != 0 && st.Mode()&fs.ModeSticky != 0 {
			return nil // another's shared sticky folder: no one can replace our files in it
		}
		return &OwnershipError{Problem: OtherUsersFolder, typedError: typedError{kind: ErrNotOwned, msg: fmt.Sprintf(
			"the journal's folder %s belongs to uid %d, not to this user (uid %d), who can replace the journal in it",
			dir, sys.Uid, me)}}
	}
	if st.Mode().Perm()&0o022 != 0 && st.Mode()&fs.ModeSticky == 0 {
		return &OwnershipError{Problem: FolderOpenToOthers, typedError: typedError{kind: ErrTooOpen, msg: fmt.Sprintf(
			"the journal's folder %s can be written by other users (mode %04o, not sticky), who could replace the journal; "+
				"'chmod go-w %s'", dir, uint32(st.Mode().Perm()), dir)}}
	}
	return nil
}

// checkOwnership checks the journal (at its real path), its -wal, -shm,
// fingerprint secret, its owners folder and the lock files in it, and the
// folder that holds them.
func checkOwnership(path string, tighten func(Tightening)) error {
	if err := checkFolder(filepath.Dir(path)); err != nil {
		return err
	}
	for _, c := range []struct {
		path string
		role fileRole
	}{
		{path, roleJournal},
		{path + "-wal", roleWAL},
		{path + "-shm", roleSHM},
		{secretPath(path), roleSecret},
		{ownersDir(path), roleOwners},
	} {
		if err := checkOwned(c.path, c.role, tighten); err != nil {
			return err
		}
	}
	// The owners folder was this user's and is now closed, but while it was
	// open anyone could have put a lock file in it: another user's file
	// there is refused (their lock could make a dead owner look alive).
	entries, err := os.ReadDir(ownersDir(path))
	if err != nil {
		return nil // missing: created 0700; unreadable: acquireOwner says so
	}
	for _, e := range entries {
		if err := checkOwned(filepath.Join(ownersDir(path), e.Name()), roleLock, tighten); err != nil {
			return err
		}
	}
	return nil
}
