package hostconfig

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"time"
)

// Store keeps a backup of every config file init changed, in a folder of
// its own: one sub-folder per file, named by a hash of the file's path,
// holding
//
//	original   the file's bytes before init first changed it (byte-exact)
//	written    the bytes init last wrote, to tell whether it changed since
//	info.json  {"path", "host", "created", "mode"}
//
// every file 0600, every folder 0700. The backups are kept out of the
// project folders on purpose: a .bak beside .vscode/mcp.json would be
// committed with it, and config files hold tokens.
type Store struct{ Dir string }

// DefaultStoreDir is $XDG_STATE_HOME/mcp-confirm/init, else
// ~/.local/state/mcp-confirm/init: beside the default journal.
func DefaultStoreDir(getenv func(string) string) (string, error) {
	if d := getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "mcp-confirm", "init"), nil
	}
	home := getenv("HOME")
	if home == "" {
		h, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("no home folder: %w", err)
		}
		home = h
	}
	return filepath.Join(home, ".local", "state", "mcp-confirm", "init"), nil
}

// Backup is what the store holds for one config file.
type Backup struct {
	Path     string // the config file, symlinks resolved
	Host     string
	Created  time.Time // when init first changed it
	Mode     fs.FileMode
	Original []byte
	Written  []byte
	dir      string
}

// OriginalPath is where the byte-exact copy of the file before init is.
func (b *Backup) OriginalPath() string { return filepath.Join(b.dir, "original") }

type backupInfo struct {
	Path    string      `json:"path"`
	Host    string      `json:"host"`
	Created time.Time   `json:"created"`
	Mode    fs.FileMode `json:"mode"`
}

func (s Store) dirFor(path string) string {
	sum := sha256.Sum256([]byte(path))
	return filepath.Join(s.Dir, hex.EncodeToString(sum[:8]))
}

// Load is the backup of path, or nil when there is none.
func (s Store) Load(path string) (*Backup, error) {
	return s.load(s.dirFor(path))
}

func (s Store) load(dir string) (*Backup, error) {
	raw, err := os.ReadFile(filepath.Join(dir, "info.json"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read backup %s: %w", dir, err)
	}
	var info backupInfo
	if err := json.Unmarshal(raw, &info); err != nil {
		return nil, fmt.Errorf("read backup %s: %w", dir, err)
	}
	b := &Backup{Path: info.Path, Host: info.Host, Created: info.Created, Mode: info.Mode, dir: dir}
	if b.Original, err = os.ReadFile(filepath.Join(dir, "original")); err != nil {
		return nil, fmt.Errorf("read backup %s: %w", dir, err)
	}
	if b.Written, err = os.ReadFile(filepath.Join(dir, "written")); err != nil {
		return nil, fmt.Errorf("read backup %s: %w", dir, err)
	}
	return b, nil
}

// List is every backup in the store, of host (all when host is ""), by path.
func (s Store) List(host string) ([]*Backup, error) {
	ents, err := os.ReadDir(s.Dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read backups: %w", err)
	}
	var out []*Backup
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		b, err := s.load(filepath.Join(s.Dir, e.Name()))
		if err != nil {
			return nil, err
		}
		if b != nil && (host == "" || b.Host == host) {
			out = append(out, b)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

// save writes b; the original only for a fresh backup, so that a kept one
// stays the bytes it was first written with.
func (s Store) save(b *Backup, fresh bool) error {
	b.dir = s.dirFor(b.Path)
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return &WriteError{Path: s.Dir, ReadOnly: errors.Is(err, fs.ErrPermission), Err: err}
	}
	if err := os.Mkdir(b.dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return &WriteError{Path: b.dir, ReadOnly: errors.Is(err, fs.ErrPermission), Err: err}
	}
	info, err := json.MarshalIndent(backupInfo{Path: b.Path, Host: b.Host, Created: b.Created.UTC(), Mode: b.Mode}, "", "  ")
	if err != nil {
		return err
	}
	if fresh {
		if err := writeAtomic(filepath.Join(b.dir, "original"), b.Original, 0o600, nil); err != nil {
			return err
		}
	}
	if err := writeAtomic(filepath.Join(b.dir, "written"), b.Written, 0o600, nil); err != nil {
		return err
	}
	return writeAtomic(filepath.Join(b.dir, "info.json"), append(info, '\n'), 0o600, nil)
}

// remove deletes b from the store.
func (s Store) remove(b *Backup) error {
	if err := os.RemoveAll(s.dirFor(b.Path)); err != nil {
		return &WriteError{Path: s.dirFor(b.Path), Err: err}
	}
	return nil
}
