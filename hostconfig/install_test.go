package hostconfig

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// copyFixtures copies testdata/home and testdata/project into a fresh
// folder, each file with mode 0640 (so that keeping the mode is seen).
func copyFixtures(t *testing.T) string {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir()) // macOS: /var is a link
	if err != nil {
		t.Fatal(err)
	}
	for _, top := range []string{"home", "project"} {
		err := filepath.WalkDir(filepath.Join("testdata", top), func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel("testdata", p)
			dst := filepath.Join(root, rel)
			if d.IsDir() {
				return os.MkdirAll(dst, 0o755)
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			return os.WriteFile(dst, b, 0o640)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return root
}

var t0 = time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)

// initAll runs init over every host's files under root and returns how
// many files it changed.
func initAll(t *testing.T, root string, s Store, w Wrap) int {
	t.Helper()
	n := 0
	for _, h := range Hosts() {
		for _, l := range h.Files(fixtureEnv(root)) {
			f, err := Read(l, w)
			if err != nil {
				t.Fatal(err)
			}
			if f == nil || !f.Changed() {
				continue
			}
			if _, err := s.Install(f, t0); err != nil {
				t.Fatal(err)
			}
			n++
		}
	}
	return n
}

// TestInitAgainUninstall: init rewrites each file into its golden, keeps a
// byte-exact 0600 backup in a 0700 folder and the file's own mode; init
// again changes nothing; uninstall puts every file back byte for byte and
// empties the store.
func TestInitAgainUninstall(t *testing.T) {
	root := copyFixtures(t)
	s := Store{Dir: filepath.Join(root, "state", "init")}
	if n := initAll(t, root, s, testWrap); n != 11 {
		t.Fatalf("init changed %d files, want 11", n)
	}
	locs, rels := fixtureFiles(t, root)
	for i, l := range locs {
		got, _ := os.ReadFile(l.Path)
		want, _ := os.ReadFile(filepath.Join("testdata", "want", rels[i]))
		if !bytes.Equal(got, want) {
			t.Errorf("%s: not its golden after init", rels[i])
		}
		if st, _ := os.Stat(l.Path); st.Mode().Perm() != 0o640 {
			t.Errorf("%s: mode %v after init, want the file's own 0640", rels[i], st.Mode().Perm())
		}
		b, err := s.Load(l.Path)
		if err != nil || b == nil {
			t.Fatalf("%s: no backup (%v)", rels[i], err)
		}
		orig, _ := os.ReadFile(filepath.Join("testdata", rels[i]))
		onDisk, _ := os.ReadFile(b.OriginalPath())
		if !bytes.Equal(onDisk, orig) || b.Host != l.Host {
			t.Errorf("%s: backup is not the original byte for byte (host %q)", rels[i], b.Host)
		}
		for _, p := range []string{b.OriginalPath(), filepath.Join(filepath.Dir(b.OriginalPath()), "written"), filepath.Join(filepath.Dir(b.OriginalPath()), "info.json")} {
			if st, _ := os.Stat(p); st.Mode().Perm() != 0o600 {
				t.Errorf("%s: mode %v, want 0600", p, st.Mode().Perm())
			}
		}
		if st, _ := os.Stat(filepath.Dir(b.OriginalPath())); st.Mode().Perm() != 0o700 {
			t.Errorf("backup folder mode %v, want 0700", st.Mode().Perm())
		}
	}
	noTempFiles(t, root)

	if n := initAll(t, root, s, testWrap); n != 0 {
		t.Fatalf("init again changed %d files, want none", n)
	}

	restores, err := s.Restores("")
	if err != nil || len(restores) != 11 {
		t.Fatalf("%d restores (%v), want 11", len(restores), err)
	}
	for _, r := range restores {
		if r.State != AsInit {
			t.Errorf("%s: state %v, want AsInit", r.Backup.Path, r.State)
		}
		if err := s.Undo(r, false); err != nil {
			t.Fatal(err)
		}
	}
	for i, l := range locs {
		got, _ := os.ReadFile(l.Path)
		orig, _ := os.ReadFile(filepath.Join("testdata", rels[i]))
		if !bytes.Equal(got, orig) {
			t.Errorf("%s: not the original after uninstall", rels[i])
		}
		if st, _ := os.Stat(l.Path); st.Mode().Perm() != 0o640 {
			t.Errorf("%s: mode %v after uninstall, want 0640", rels[i], st.Mode().Perm())
		}
	}
	if left, _ := s.List(""); len(left) != 0 {
		t.Errorf("%d backups left after uninstall", len(left))
	}
	noTempFiles(t, root)
}

// TestUninstallAfterEdit: a file edited since init is not restored (the
// edit would be lost) unless forced; forced, it is the original again.
func TestUninstallAfterEdit(t *testing.T) {
	root := copyFixtures(t)
	s := Store{Dir: filepath.Join(root, "state")}
	initAll(t, root, s, testWrap)
	path := filepath.Join(root, "home", ".cursor", "mcp.json")
	edited := bytes.Replace(mustRead(t, path), []byte(`"API_KEY": "value"`), []byte(`"API_KEY": "new-value"`), 1)
	if err := os.WriteFile(path, edited, 0o640); err != nil {
		t.Fatal(err)
	}
	r := restoreOf(t, s, path)
	if r.State != EditedSince {
		t.Fatalf("state %v, want EditedSince", r.State)
	}
	if err := s.Undo(r, false); !errors.Is(err, ErrEditedSince) {
		t.Fatalf("Undo: %v, want ErrEditedSince", err)
	}
	if !bytes.Equal(mustRead(t, path), edited) {
		t.Fatal("a refused uninstall changed the file")
	}
	if b, _ := s.Load(path); b == nil {
		t.Fatal("a refused uninstall dropped the backup")
	}
	if err := s.Undo(r, true); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(mustRead(t, path), mustRead(t, "testdata/home/.cursor/mcp.json")) {
		t.Fatal("forced uninstall did not restore the original")
	}
}

// TestInitAfterEdit: a server added after init is wrapped by a second
// init, which keeps the first backup: uninstall goes back to the file as it
// was before any init.
func TestInitAfterEdit(t *testing.T) {
	root := copyFixtures(t)
	s := Store{Dir: filepath.Join(root, "state")}
	loc := Location{Host: "windsurf", Path: filepath.Join(root, "home", ".codeium", "windsurf", "mcp_config.json"), Servers: [][]string{{"mcpServers"}}}
	install := func() Installed {
		f, err := Read(loc, testWrap)
		if err != nil {
			t.Fatal(err)
		}
		res, err := s.Install(f, t0)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := install(); !res.KeptFrom.IsZero() {
		t.Fatalf("first init kept a backup from %v", res.KeptFrom)
	}
	added := strings.Replace(string(mustRead(t, loc.Path)), `"mcpServers": {`, `"mcpServers": {
    "memory": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-memory"]},`, 1)
	os.WriteFile(loc.Path, []byte(added), 0o640)
	res := install()
	if !res.KeptFrom.Equal(t0) {
		t.Fatalf("second init: kept %v, want the first backup (%v)", res.KeptFrom, t0)
	}
	if !strings.Contains(string(mustRead(t, loc.Path)), `"--", "npx", "-y", "@modelcontextprotocol/server-memory"]`) {
		t.Fatalf("the added server was not wrapped:\n%s", mustRead(t, loc.Path))
	}
	r := restoreOf(t, s, loc.Path)
	if r.State != AsInit {
		t.Fatalf("state %v, want AsInit", r.State)
	}
	if err := s.Undo(r, false); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(mustRead(t, loc.Path), mustRead(t, "testdata/home/.codeium/windsurf/mcp_config.json")) {
		t.Fatal("uninstall did not go back to the file before the first init")
	}
}

// TestMalformedUntouched: a malformed file is a ParseError with its line;
// nothing is written and no backup is made.
func TestMalformedUntouched(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "mcp.json")
	bad := []byte("{\n  \"mcpServers\": {\n    \"a\": {\"command\": \"npx\",, \"args\": []}\n  }\n}\n")
	os.WriteFile(path, bad, 0o600)
	_, err := Read(Location{Host: "cursor", Path: path, Servers: [][]string{{"mcpServers"}}}, testWrap)
	var pe *ParseError
	if !errors.As(err, &pe) || pe.Line != 3 || pe.Path != path {
		t.Fatalf("err %v, want a ParseError at line 3 of %s", err, path)
	}
	if !bytes.Equal(mustRead(t, path), bad) {
		t.Fatal("malformed file changed")
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Fatalf("%d files in the folder, want only the config", len(ents))
	}
}

// TestReadOnlyUntouched: a read-only file is refused before anything is
// written (the rename would replace it anyway), and no backup is left.
func TestReadOnlyUntouched(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("running as root: root can write a 0444 file, so read-only cannot be seen here")
	}
	root := copyFixtures(t)
	s := Store{Dir: filepath.Join(root, "state")}
	path := filepath.Join(root, "home", ".gemini", "settings.json")
	os.Chmod(path, 0o444)
	f, err := Read(Location{Host: "gemini-cli", Path: path, Servers: [][]string{{"mcpServers"}}}, testWrap)
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Install(f, t0)
	var we *WriteError
	if !errors.As(err, &we) || !we.ReadOnly || we.Path != path {
		t.Fatalf("err %v, want a read-only WriteError for %s", err, path)
	}
	if !bytes.Equal(mustRead(t, path), mustRead(t, "testdata/home/.gemini/settings.json")) {
		t.Fatal("read-only file changed")
	}
	if left, _ := s.List(""); len(left) != 0 {
		t.Fatal("a refused init left a backup")
	}
	noTempFiles(t, root)
}

// TestSymlinkedConfig: a config that is a symlink (a dotfiles repo) is
// rewritten where it points; the link stays a link.
func TestSymlinkedConfig(t *testing.T) {
	root := copyFixtures(t)
	s := Store{Dir: filepath.Join(root, "state")}
	target := filepath.Join(root, "dotfiles", "mcp.json")
	os.MkdirAll(filepath.Dir(target), 0o755)
	link := filepath.Join(root, "home", ".cursor", "mcp.json")
	os.Rename(link, target)
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	f, err := Read(Location{Host: "cursor", Path: link, Servers: [][]string{{"mcpServers"}}}, testWrap)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Install(f, t0); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Lstat(link); st.Mode()&fs.ModeSymlink == 0 {
		t.Fatal("the link was replaced by a file")
	}
	if !bytes.Equal(mustRead(t, target), mustRead(t, "testdata/want/home/.cursor/mcp.json")) {
		t.Fatal("the link's target was not rewritten")
	}
	if err := s.Undo(restoreOf(t, s, target), false); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(mustRead(t, link), mustRead(t, "testdata/home/.cursor/mcp.json")) {
		t.Fatal("uninstall did not restore through the link")
	}
}

// TestChangedWhileWriting: if the host rewrote the file between Read and
// Install, nothing is written and the store is as before.
func TestChangedWhileWriting(t *testing.T) {
	root := copyFixtures(t)
	s := Store{Dir: filepath.Join(root, "state")}
	path := filepath.Join(root, "home", ".claude.json")
	f, err := Read(Location{Host: "claude-code", Path: path, Servers: [][]string{{"mcpServers"}}}, testWrap)
	if err != nil {
		t.Fatal(err)
	}
	hostWrote := bytes.Replace(f.Before, []byte(`"numStartups": 42`), []byte(`"numStartups": 43`), 1)
	os.WriteFile(path, hostWrote, 0o640)
	if _, err := s.Install(f, t0); !errors.Is(err, ErrChangedMeanwhile) {
		t.Fatalf("err %v, want ErrChangedMeanwhile", err)
	}
	if !bytes.Equal(mustRead(t, path), hostWrote) {
		t.Fatal("the host's write was lost")
	}
	if left, _ := s.List(""); len(left) != 0 {
		t.Fatal("a failed init left a backup")
	}
	noTempFiles(t, root)
}

// TestUninstallGone: a file removed since init is not recreated unless
// forced.
func TestUninstallGone(t *testing.T) {
	root := copyFixtures(t)
	s := Store{Dir: filepath.Join(root, "state")}
	initAll(t, root, s, testWrap)
	path := filepath.Join(root, "project", ".cursor", "mcp.json")
	os.Remove(path)
	r := restoreOf(t, s, path)
	if r.State != Gone {
		t.Fatalf("state %v, want Gone", r.State)
	}
	if err := s.Undo(r, false); !errors.Is(err, ErrEditedSince) {
		t.Fatalf("Undo: %v, want ErrEditedSince", err)
	}
	if err := s.Undo(r, true); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(mustRead(t, path), mustRead(t, "testdata/project/.cursor/mcp.json")) {
		t.Fatal("forced uninstall did not recreate the original")
	}
}

func TestRestoresByHost(t *testing.T) {
	root := copyFixtures(t)
	s := Store{Dir: filepath.Join(root, "state")}
	initAll(t, root, s, testWrap)
	rs, err := s.Restores("vscode")
	if err != nil || len(rs) != 3 {
		t.Fatalf("%d vscode restores (%v), want 3", len(rs), err)
	}
	for _, r := range rs {
		if r.Backup.Host != "vscode" {
			t.Errorf("restore of %s is %s's", r.Backup.Path, r.Backup.Host)
		}
	}
}

func TestDiff(t *testing.T) {
	if d := Diff("f", "init", []byte("a\n"), []byte("a\n")); d != "" {
		t.Errorf("diff of equal files: %q", d)
	}
	d := Diff("/h/mcp.json", "after init", []byte("{\n\"a\": 1\n}\n"), []byte("{\n\"a\": 2\n}\n"))
	for _, want := range []string{"--- /h/mcp.json\n", "+++ /h/mcp.json (after init)\n", "-\"a\": 1\n", "+\"a\": 2\n"} {
		if !strings.Contains(d, want) {
			t.Errorf("diff lacks %q:\n%s", want, d)
		}
	}
}

func restoreOf(t *testing.T, s Store, path string) Restore {
	t.Helper()
	rs, err := s.Restores("")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		if r.Backup.Path == path {
			return r
		}
	}
	t.Fatalf("no backup of %s", path)
	return Restore{}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// noTempFiles: no atomic write left its temporary file behind.
func noTempFiles(t *testing.T, root string) {
	t.Helper()
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.Contains(d.Name(), ".mcp-confirm-") {
			t.Errorf("temporary file left: %s", p)
		}
		return nil
	})
}
