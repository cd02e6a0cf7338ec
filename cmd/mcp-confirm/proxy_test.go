package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The proxy command's own edges: flags and a server that does not start.
// What the proxy does with a host is tested in package proxy.
func TestProxyCommandEdges(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "journal.db")
	badPolicy := filepath.Join(dir, "bad.toml")
	if err := os.WriteFile(badPolicy, []byte("[tools.x]\nkind = \"sometimes\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		args   []string
		code   int
		stderr string
	}{
		{"help", []string{"proxy", "--help"}, exitOK, ""},
		{"stray argument", []string{"proxy", "--db", db, "stray", "--", "true"}, exitBadInput, "unexpected argument"},
		{"negative timeout", []string{"proxy", "--db", db, "--timeout", "-1s", "--", "true"}, exitBadInput, "--timeout"},
		{"bad policy", []string{"proxy", "--db", db, "--policy", badPolicy, "--", "true"}, exitBadInput, "policy"},
		{"unwritable log", []string{"proxy", "--db", db, "--log", filepath.Join(dir, "no", "such", "dir", "x.log"), "--", "true"}, exitBadInput, "--log"},
		{"server does not start", []string{"proxy", "--db", db, "--", filepath.Join(dir, "no-such-server")}, exitUnavailable, "starts on its own"},
		{"log cap zero", []string{"proxy", "--db", db, "--log", filepath.Join(dir, "x.log"), "--log-max-mb", "0", "--", "true"}, exitBadInput, "--log-max-mb"},
		{"no server", []string{"proxy", "--db", db}, exitBadInput, "no server given"},
		{"both server forms", []string{"proxy", "--db", db, "--config", "x.json", "--server", "s", "--", "true"}, exitBadInput, "not both"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			args := c.args
			stdout, stderr, code := runIn(t, args...)
			if code != c.code {
				t.Fatalf("exit %d, want %d\nstderr: %s", code, c.code, stderr)
			}
			if c.name == "help" {
				for _, f := range []string{"--log", "--timeout", "--policy", "--db"} {
					if !strings.Contains(stdout, f) {
						t.Errorf("help lacks %s:\n%s", f, stdout)
					}
				}
				return
			}
			if stdout != "" {
				t.Errorf("stdout must carry nothing but MCP, got %q", stdout)
			}
			if !strings.Contains(stderr, c.stderr) {
				t.Errorf("stderr %q does not mention %q", stderr, c.stderr)
			}
		})
	}
}

// A proxy that cannot serve answers the host's initialize with the reason,
// so that the host shows it (Claude Desktop says only "server
// disconnected" when the process just exits).
func TestProxyTellsTheHostWhyItCannotServe(t *testing.T) {
	dir := t.TempDir()
	notJournal := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(notJournal, []byte("my notes"), 0o600); err != nil {
		t.Fatal(err)
	}
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"host","version":"1"}}}` + "\n"
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"bad --db", []string{"proxy", "--db", notJournal, "--", "true"}, exitUnavailable, "not an mcp-confirm journal"},
		{"no server", []string{"proxy", "--db", filepath.Join(dir, "j.db")}, exitBadInput, "no server given"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			e := &env{stdin: strings.NewReader(initialize), stdout: &out, stderr: &errb, getenv: func(string) string { return "" }}
			code := run(context.Background(), tc.args, e)
			var answer struct {
				ID    int `json:"id"`
				Error struct {
					Code    int    `json:"code"`
					Message string `json:"message"`
				} `json:"error"`
			}
			if err := json.Unmarshal(out.Bytes(), &answer); err != nil {
				t.Fatalf("stdout %q is not one JSON-RPC answer: %v", out.String(), err)
			}
			if code != tc.code || answer.ID != 1 || answer.Error.Code != -32603 || !strings.Contains(answer.Error.Message, tc.want) {
				t.Fatalf("exit %d (want %d), answer %+v (want id 1, code -32603, %q)\nstderr: %s", code, tc.code, answer, tc.want, errb.String())
			}
			if !strings.Contains(errb.String(), tc.want) {
				t.Errorf("stderr %q does not say %q", errb.String(), tc.want)
			}
		})
	}
	if b, _ := os.ReadFile(notJournal); string(b) != "my notes" {
		t.Fatal("the refused --db file was changed")
	}
}

// A server that fails to start after writing control sequences to its
// stderr: the proxy's own message, which quotes that stderr's last lines,
// shows them without the sequences. The server's stderr itself goes to
// the --log file, as the proxy's log does.
func TestProxyStartFailureIsInert(t *testing.T) {
	dir := t.TempDir()
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"host","version":"1"}}}` + "\n"
	var out, errb bytes.Buffer
	e := &env{stdin: strings.NewReader(initialize), stdout: &out, stderr: &errb, getenv: func(string) string { return "" }}
	code := run(context.Background(), []string{"proxy", "--db", filepath.Join(dir, "j.db"), "--log", filepath.Join(dir, "proxy.log"),
		"--", "sh", "-c", `printf '\033]0;pwned\007boom\033[2J\n' >&2; exit 1`}, e)
	if code != exitUnavailable {
		t.Fatalf("exit %d, want %d\nstderr: %q", code, exitUnavailable, errb.String())
	}
	if !strings.Contains(errb.String(), "boom") {
		t.Errorf("stderr does not quote the server's last stderr line:\n%q", errb.String())
	}
	if strings.ContainsAny(errb.String(), "\x1b\x07") {
		t.Errorf("stderr holds the server's raw control sequences:\n%q", errb.String())
	}
}
