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
