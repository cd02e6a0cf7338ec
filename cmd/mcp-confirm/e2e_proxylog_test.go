package main

import (
	"bufio"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A server that floods its stderr (here `yes` for 3 s, gigabytes unbounded)
// cannot fill the disk through `proxy --log`: the log is rotated at
// --log-max-mb and only --log-backups old files are kept.
func TestE2EProxyLogIsCapped(t *testing.T) {
	dir := t.TempDir()
	logFile := filepath.Join(dir, "logs", "proxy.log")
	if err := os.Mkdir(filepath.Dir(logFile), 0o700); err != nil {
		t.Fatal(err)
	}
	flood := `timeout 3 yes "the server floods its stderr with this line" >&2; exec "$0" demo-server --db "$1"`
	ctx, cancel := context.WithTimeout(context.Background(), cmdHang)
	defer cancel()
	cmd := e2eCmd(ctx, e2eBin, dir, "proxy", "--db", filepath.Join(dir, "journal.db"), "--log", logFile,
		"--log-max-mb", "1", "--log-backups", "2", "--", "/bin/bash", "-c", flood, e2eBin, filepath.Join(dir, "demo.db"))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	io.WriteString(stdin, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`+"\n")
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || !strings.Contains(line, `"result"`) {
		t.Fatalf("no answer to initialize after the flood: %q %v", line, err)
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("proxy: %v", err)
	}

	files, err := os.ReadDir(filepath.Dir(logFile))
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, f := range files {
		info, err := f.Info()
		if err != nil {
			t.Fatal(err)
		}
		total += info.Size()
		if info.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v, want 0600", f.Name(), info.Mode().Perm())
		}
	}
	// One current file and two backups of 1 MiB, and one more backup for
	// the moment between a rotation and lumberjack's clean-up of the oldest.
	const mib = 1 << 20
	if len(files) < 2 || total > 4*mib {
		t.Errorf("log folder holds %d files, %d bytes; want a rotation and at most 4 MiB", len(files), total)
	}
	t.Logf("log folder: %d files, %d bytes", len(files), total)
}

// A policy section for a tool the server does not list is named on the
// proxy's stderr at start, with the closest tool name, as call and tools
// warn; the host is served all the same.
func TestE2EProxyLogsPolicyProblemsOnStderr(t *testing.T) {
	dir := t.TempDir()
	policy := filepath.Join(dir, "policy.toml")
	if err := os.WriteFile(policy, []byte("[tools.create_ordr]\nredact = [\"buyer\"]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}` + "\n"
	r := cliIn(t, e2eBin, dir, initialize, "proxy", "--db", filepath.Join(dir, "journal.db"), "--policy", policy,
		"--", e2eBin, "demo-server", "--db", filepath.Join(dir, "demo.db"))
	wantExit(t, r, 0, "proxy")
	if !strings.Contains(r.stdout, `"result"`) {
		t.Errorf("the host's initialize was not answered: %s", r)
	}
	want := `level=WARN msg="policy: a part of it does not apply to the server's tools" from="mcp-confirm proxy" section=tools.create_ordr ` +
		`problem="the server lists no tool \"create_ordr\", so this section never applies" did_you_mean=create_order`
	if !strings.Contains(r.stderr, want) {
		t.Errorf("stderr lacks the policy line\nwant %s\n%s", want, r)
	}
	if strings.Contains(r.stdout, "create_ordr") {
		t.Errorf("the policy warning reached stdout, which carries MCP messages only: %s", r.stdout)
	}
}
