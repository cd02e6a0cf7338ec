package hostconfig

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// WriteError is a config file (or its folder, or the backup folder) that
// cannot be written. Nothing was changed.
type WriteError struct {
	Path     string
	ReadOnly bool // the file or folder is read-only to this user (or on a read-only mount)
	Err      error
}

func (e *WriteError) Error() string {
	if e.ReadOnly {
		return fmt.Sprintf("%s is read-only", e.Path)
	}
	return fmt.Sprintf("cannot write %s: %v", e.Path, e.Err)
}

func (e *WriteError) Unwrap() error { return e.Err }

// ErrChangedMeanwhile: the file changed between reading it and writing it
// (the host itself rewrote it). Nothing was changed; run again.
var ErrChangedMeanwhile = errors.New("the file changed while mcp-confirm was rewriting it")

const wOK = 0x2 // access(2) W_OK, the same on Linux and macOS

// checkWritable refuses a file this user cannot write, and a folder in
// which the temporary file of an atomic write cannot be made.
func checkWritable(path string) error {
	if err := syscall.Access(path, wOK); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return &WriteError{Path: path, ReadOnly: errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.EROFS), Err: err}
	}
	dir := filepath.Dir(path)
	if err := syscall.Access(dir, wOK|0x1); err != nil {
		return &WriteError{Path: dir, ReadOnly: errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.EROFS), Err: err}
	}
	return nil
}

// writeAtomic replaces path with data: a temporary file in the same folder,
// synced, then renamed over it, so a reader sees the old file or the new
// one and never a part. The new file has mode perm, and the owner and group
// of the file it replaces: root running init on another user's config must
// not leave it root's, which the host (running as that user) could no
// longer save; a user who cannot give the file its owner back (a file of
// another user that this one may write) is refused, nothing changed. When
// expect is not nil, the file must still hold expect just before the
// rename, else ErrChangedMeanwhile and nothing is changed.
func writeAtomic(path string, data []byte, perm fs.FileMode, expect []byte) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".mcp-confirm-*")
	if err != nil {
		return &WriteError{Path: dir, ReadOnly: errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EROFS), Err: err}
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			os.Remove(tmp)
		}
	}()
	if err := keepOwner(f, path); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(perm); err != nil {
		f.Close()
		return &WriteError{Path: path, Err: err}
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return &WriteError{Path: path, Err: err}
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return &WriteError{Path: path, Err: err}
	}
	if err := f.Close(); err != nil {
		return &WriteError{Path: path, Err: err}
	}
	if expect != nil {
		now, err := os.ReadFile(path)
		if err != nil || !bytes.Equal(now, expect) {
			return ErrChangedMeanwhile
		}
	}
	if err := os.Rename(tmp, path); err != nil {
		return &WriteError{Path: path, Err: err}
	}
	syncDir(dir)
	return nil
}

// keepOwner gives the temporary file f the owner and group of the file at
// path, when that exists and they differ from f's.
func keepOwner(f *os.File, path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return nil // a new file: this user's
	}
	want, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	mine, err := f.Stat()
	if err != nil {
		return &WriteError{Path: path, Err: err}
	}
	have, ok := mine.Sys().(*syscall.Stat_t)
	if ok && have.Uid == want.Uid && have.Gid == want.Gid {
		return nil
	}
	if err := f.Chown(int(want.Uid), int(want.Gid)); err != nil {
		if ok && have.Uid == want.Uid {
			// This user's own file in a group it is not in (a setgid
			// folder, a group changed by an administrator): the owner, who
			// runs the host, can still save it; not a reason to refuse.
			return nil
		}
		return &WriteError{Path: path, Err: fmt.Errorf("cannot keep its owner %d:%d on the rewritten file (%w); "+
			"run mcp-confirm as that user", want.Uid, want.Gid, err)}
	}
	return nil
}

// syncDir makes a rename in dir durable; a file system that cannot sync a
// folder is no reason to fail.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}

// SelfPath is the mcp-confirm a host should start: exe (os.Executable), or
// the mcp-confirm found on PATH when that is the same file (a stable link
// such as /opt/homebrew/bin/mcp-confirm rather than the versioned file it
// points to). A binary built by `go run` lives in a temporary folder that
// is gone when it exits: ErrTemporaryBinary.
func SelfPath(exe string, lookPath func(string) (string, error)) (string, error) {
	exe, err := filepath.Abs(exe)
	if err != nil {
		return "", err
	}
	if onPath, err := lookPath("mcp-confirm"); err == nil {
		if abs, err := filepath.Abs(onPath); err == nil && sameFile(abs, exe) {
			return abs, nil
		}
	}
	for _, part := range strings.Split(filepath.ToSlash(exe), "/") {
		if strings.HasPrefix(part, "go-build") {
			return "", ErrTemporaryBinary
		}
	}
	return exe, nil
}

// ErrTemporaryBinary: mcp-confirm runs from `go run`'s build folder.
var ErrTemporaryBinary = errors.New("this mcp-confirm is a temporary build (go run): a host could not start it later")

func sameFile(a, b string) bool {
	sa, err1 := os.Stat(a)
	sb, err2 := os.Stat(b)
	return err1 == nil && err2 == nil && os.SameFile(sa, sb)
}
