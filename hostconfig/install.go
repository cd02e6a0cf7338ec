package hostconfig

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/aymanbagabas/go-udiff"
)

// File is one config file as found, and what init makes of it.
type File struct {
	Location
	Real    string // Path with symlinks resolved: the file read and written
	Mode    fs.FileMode
	Before  []byte
	After   []byte // equal to Before when there is nothing to change
	Entries []Entry
}

// Changed reports whether init would change the file.
func (f *File) Changed() bool { return !bytes.Equal(f.Before, f.After) }

// Writable refuses a file init cannot write: read-only to this user, or in
// a folder where the temporary file of an atomic write cannot be made.
func (f *File) Writable() error { return checkWritable(f.Real) }

// Read reads loc and plans its rewrite by w; it is nil, with no error, when
// the file does not exist. A file that is not JSON with comments is a
// *ParseError; nothing is written either way.
func Read(loc Location, w Wrap) (*File, error) {
	real, err := filepath.EvalSymlinks(loc.Path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	st, err := os.Stat(real)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", loc.Path)
	}
	src, err := os.ReadFile(real)
	if err != nil {
		return nil, err
	}
	out, entries, err := Rewrite(src, loc, w)
	if err != nil {
		return nil, err
	}
	return &File{Location: loc, Real: real, Mode: st.Mode().Perm(), Before: src, After: out, Entries: entries}, nil
}

// Detect lists the hosts that have at least one config file in e.
func Detect(e Env) []Host {
	var out []Host
	for _, h := range hosts {
		for _, l := range h.Files(e) {
			if _, err := os.Stat(l.Path); err == nil {
				out = append(out, h)
				break
			}
		}
	}
	return out
}

// Installed is what Install did.
type Installed struct {
	Backup   string    // the byte-exact copy of the file before init first changed it
	KeptFrom time.Time // not zero: init had changed the file before, and that backup is kept
}

// Install writes f.After over the file, after keeping a byte-exact backup
// of it in the store. A file that init changed before (it still has
// servers wrapped) keeps its first backup, so that uninstall goes back to
// the file as it was before any init. The write is atomic and keeps the
// file's mode; if the file changed since Read, nothing is written
// (ErrChangedMeanwhile).
func (s Store) Install(f *File, now time.Time) (Installed, error) {
	if !f.Changed() {
		return Installed{}, nil
	}
	if err := checkWritable(f.Real); err != nil {
		return Installed{}, err
	}
	old, err := s.Load(f.Real)
	if err != nil {
		return Installed{}, err
	}
	b, fresh := old, false
	if old == nil || !hasWrapped(f.Entries) {
		b, fresh = &Backup{Path: f.Real, Host: f.Host, Created: now, Mode: f.Mode, Original: f.Before}, true
	} else {
		kept := *old
		b = &kept
	}
	b.Written = f.After
	if err := s.save(b, fresh); err != nil {
		return Installed{}, err
	}
	if err := writeAtomic(f.Real, f.After, f.Mode, f.Before); err != nil {
		// Put the store back as it was: the file was not changed.
		if old == nil {
			s.remove(b)
		} else {
			s.save(old, fresh)
		}
		return Installed{}, err
	}
	res := Installed{Backup: b.OriginalPath()}
	if !fresh {
		res.KeptFrom = b.Created
	}
	return res, nil
}

func hasWrapped(entries []Entry) bool {
	for _, e := range entries {
		if e.Action == AlreadyWrapped {
			return true
		}
	}
	return false
}

// RestoreState is where a file init changed stands now.
type RestoreState int

const (
	AsInit      RestoreState = iota // as init left it: uninstall restores the backup
	EditedSince                     // changed since init: refused unless forced
	AsOriginal                      // already as before init: uninstall only forgets the backup
	Gone                            // the file was removed since
)

// Restore is one file uninstall would put back.
type Restore struct {
	Backup  *Backup
	Current []byte // the file now; nil when Gone
	State   RestoreState
}

// ErrEditedSince: the file changed after init wrote it; restoring the
// backup would lose that change.
var ErrEditedSince = errors.New("the file changed since mcp-confirm init wrote it")

// Restores are the files of host ("" for every host) that init changed,
// each with where it stands now.
func (s Store) Restores(host string) ([]Restore, error) {
	backups, err := s.List(host)
	if err != nil {
		return nil, err
	}
	out := make([]Restore, 0, len(backups))
	for _, b := range backups {
		r := Restore{Backup: b}
		cur, err := os.ReadFile(b.Path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			r.State = Gone
		case err != nil:
			return nil, err
		case bytes.Equal(cur, b.Written):
			r.Current, r.State = cur, AsInit
		case bytes.Equal(cur, b.Original):
			r.Current, r.State = cur, AsOriginal
		default:
			r.Current, r.State = cur, EditedSince
		}
		out = append(out, r)
	}
	return out, nil
}

// Undo puts the file back as it was before init, byte for byte, and forgets
// the backup. A file edited since init, or removed, is refused
// (ErrEditedSince) unless force. The write is atomic and keeps the file's
// current mode.
func (s Store) Undo(r Restore, force bool) error {
	b := r.Backup
	if r.State == AsOriginal {
		return s.remove(b)
	}
	if (r.State == EditedSince || r.State == Gone) && !force {
		return ErrEditedSince
	}
	if err := checkWritable(b.Path); err != nil {
		return err
	}
	mode := b.Mode
	if st, err := os.Stat(b.Path); err == nil {
		mode = st.Mode().Perm()
	}
	if err := writeAtomic(b.Path, b.Original, mode, r.Current); err != nil {
		return err
	}
	return s.remove(b)
}

// Diff is the unified diff from before to after, labelled with path; ""
// when they are equal.
func Diff(path, what string, before, after []byte) string {
	if bytes.Equal(before, after) {
		return ""
	}
	return udiff.Unified(path, path+" ("+what+")", string(before), string(after))
}
