package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// goStamp is what the go command itself reads from a binary's build info
// (`go version -m`): the reference the version command must agree with,
// however the binary was built (go test's build of it here is "(devel)"
// with no commit under -buildvcs=false or in a git worktree, and a
// pseudo-version with a commit in a plain clone).
func goStamp(t *testing.T, bin string) (module string, settings map[string]string) {
	t.Helper()
	out, err := exec.Command("go", "version", "-m", bin).Output()
	if err != nil {
		t.Fatalf("go version -m: %v", err)
	}
	settings = map[string]string{}
	// The first line is "FILE: go1.26.8": the toolchain that built it.
	if first, _, _ := strings.Cut(string(out), "\n"); strings.Contains(first, ": ") {
		settings["go"] = first[strings.LastIndex(first, ": ")+2:]
	}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) >= 3 && f[0] == "mod":
			module = f[2]
		case len(f) >= 2 && f[0] == "build":
			if k, v, ok := strings.Cut(f[1], "="); ok {
				settings[k] = v
			}
		}
	}
	return module, settings
}

// `version` and `--version` print what the go command stamped into the
// binary (module version, commit and whether the tree was dirty, commit
// time, Go version), and say "unknown" for what it did not stamp.
func TestE2EVersionIsTheBuildStamp(t *testing.T) {
	home := t.TempDir()
	module, set := goStamp(t, e2eBin)
	r := cliIn(t, e2eBin, home, "", "version")
	wantExit(t, r, exitOK, "version")
	if again := cliIn(t, e2eBin, home, "", "--version"); again.stdout != r.stdout || again.code != exitOK {
		t.Errorf("--version and version differ:\n%s\n%s", again, r)
	}
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	if len(lines) != 4 {
		t.Fatalf("version printed %d lines, want 4:\n%s", len(lines), r.stdout)
	}
	if !strings.HasPrefix(lines[0], "mcp-confirm "+module) {
		t.Errorf("first line %q does not name the module version %q", lines[0], module)
	}
	wantCommit := "commit:  unknown ("
	if rev := set["vcs.revision"]; rev != "" {
		wantCommit = "commit:  " + rev + " (clean)"
		if set["vcs.modified"] == "true" {
			wantCommit = "commit:  " + rev + " (dirty:"
		}
	}
	if !strings.HasPrefix(lines[1], wantCommit) {
		t.Errorf("commit line %q, want it to start %q", lines[1], wantCommit)
	}
	wantDate := "date:    unknown"
	if when := set["vcs.time"]; when != "" {
		wantDate = "date:    " + when + " (commit time)"
	}
	if lines[2] != wantDate {
		t.Errorf("date line %q, want %q", lines[2], wantDate)
	}
	if want := "go:      " + set["go"] + " " + set["GOOS"] + "/" + set["GOARCH"]; lines[3] != want {
		t.Errorf("go line %q, want %q", lines[3], want)
	}
	t.Logf("go version -m: mod %s, vcs.revision=%q; version says:\n%s", module, set["vcs.revision"], r.stdout)
}

// The proxy says which mcp-confirm it is in the serverInfo it gives the
// host (its description; name and version stay the server's) and on its
// log's first line, with the version that `version` prints.
func TestE2EProxyNamesItsVersion(t *testing.T) {
	dir := t.TempDir()
	r := cliIn(t, e2eBin, dir, "", "version")
	wantExit(t, r, exitOK, "version")
	first, _, _ := strings.Cut(r.stdout, "\n")
	v := strings.TrimPrefix(first, "mcp-confirm ")

	logFile := filepath.Join(dir, "proxy.log")
	ctx, cancel := context.WithTimeout(context.Background(), cmdHang)
	defer cancel()
	cmd := e2eCmd(ctx, e2eBin, dir, "proxy", "--demo", "--db", filepath.Join(dir, "journal.db"), "--log", logFile)
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
	io.WriteString(stdin, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`+"\n")
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("no answer to initialize: %v", err)
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("proxy: %v", err)
	}
	var res struct {
		Result struct {
			ServerInfo struct{ Name, Version, Description string } `json:"serverInfo"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(line), &res); err != nil {
		t.Fatalf("initialize answer %q: %v", line, err)
	}
	si := res.Result.ServerInfo
	if si.Name != "mcp-confirm-demo" || si.Version != "0.1.0" {
		t.Errorf("serverInfo name %q version %q: want the demo server's own (mcp-confirm-demo 0.1.0)", si.Name, si.Version)
	}
	if !strings.Contains(si.Description, "mcp-confirm "+v+":") {
		t.Errorf("serverInfo description %q does not name mcp-confirm %s", si.Description, v)
	}

	log, err := os.ReadFile(logFile)
	if err != nil {
		t.Fatal(err)
	}
	logFirst, _, _ := strings.Cut(string(log), "\n")
	if !strings.Contains(logFirst, `msg="mcp-confirm proxy starting"`) || !strings.Contains(logFirst, "version="+v+" ") &&
		!strings.Contains(logFirst, `version="`+v+`" `) {
		t.Errorf("the log's first line does not give version %s:\n%s", v, logFirst)
	}
}
