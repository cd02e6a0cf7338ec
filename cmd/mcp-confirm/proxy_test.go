package main

import (
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
