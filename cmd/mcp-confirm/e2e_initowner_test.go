package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// init run as root on a config file of another user (a host's file under
// that user's home): the rewritten file keeps its owner, group and mode, so
// the host, which runs as that user, can still save it; and so does the
// file uninstall puts back.
func TestInitKeepsTheConfigsOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: only root can give a file to another user, and only root's init meets a file it does not own")
	}
	const uid, gid, mode = 12345, 12345, 0o640
	w := newWorld(t, t.TempDir())
	config := filepath.Join(w.dir, ".mcp.json")
	original := `{"mcpServers":{"shop":{"command":"` + w.bin + `","args":["demo-server"]}}}` + "\n"
	if err := os.WriteFile(config, []byte(original), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(config, uid, gid); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(config, mode); err != nil {
		t.Fatal(err)
	}
	owner := func(what string) {
		t.Helper()
		st, err := os.Stat(config)
		if err != nil {
			t.Fatal(err)
		}
		sys := st.Sys().(*syscall.Stat_t)
		if sys.Uid != uid || sys.Gid != gid || st.Mode().Perm() != mode {
			t.Errorf("after %s the config is %d:%d mode %04o, want %d:%d mode %04o", what, sys.Uid, sys.Gid, st.Mode().Perm(), uid, gid, mode)
		}
	}
	r := w.run("init", "--host", "claude-code")
	wantExit(t, r, exitOK, "init")
	if b, _ := os.ReadFile(config); string(b) == original || !strings.Contains(string(b), "proxy") {
		t.Fatalf("init did not rewrite the file:\n%s\n%s", b, r)
	}
	owner("init")
	r = cliIn(t, w.bin, w.dir, "", "uninstall", "--host", "claude-code")
	wantExit(t, r, exitOK, "uninstall")
	if b, _ := os.ReadFile(config); string(b) != original {
		t.Fatalf("uninstall did not give the file back:\n%s\n%s", b, r)
	}
	owner("uninstall")
}
