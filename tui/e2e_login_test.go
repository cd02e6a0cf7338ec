package tui

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcp-confirm/mcp-confirm/internal/oauthtest"
	"github.com/mcp-confirm/mcp-confirm/internal/testbin"
)

// The console's own login (issue 19) on the real binary in a real
// terminal, against a real authorization server and the demo server over
// HTTP behind its bearer check, on loopback. The console opens on the
// protected URL with no login kept: its start is refused, and the tools
// screen and the message say authorization is needed and that O logs in.
// O shows the authorization URL; esc cancels, and the loopback redirect
// is gone (the URL followed then reaches nothing). O again; the test,
// playing the browser, reads the URL off the screen and follows it; the
// console keeps the login where 'mcp-confirm login' keeps it (0600) and
// lists the server's tools on the screen the operator was on. Nothing is
// journaled and no order is made. The same over several servers (a host
// config with the protected server as one remote entry), where the
// server is refused when picked for a new call.
func TestEndToEndLoginInTmux(t *testing.T) {
	if _, err := exec.LookPath("tmux"); err != nil && os.Getenv("CI") != "true" {
		t.Skip("tmux is not installed")
	}
	bin := buildBinary(t, "../cmd/mcp-confirm", "mcp-confirm")
	t.Run("one server", func(t *testing.T) { testLoginInTmux(t, bin, false) })
	t.Run("several servers", func(t *testing.T) { testLoginInTmux(t, bin, true) })
}

func testLoginInTmux(t *testing.T, bin string, fleet bool) {
	dir := t.TempDir()
	journal, demoDB, state := filepath.Join(dir, "journal.db"), filepath.Join(dir, "demo.db"), filepath.Join(dir, "state")
	as := oauthtest.NewServer(t, oauthtest.Options{AccessTTL: time.Hour})
	endpoint := as.ProtectedProxy(t, testbin.HTTPDemo(t, bin, demoDB))

	env := []string{"TERM=xterm-256color", "XDG_STATE_HOME=" + state, "HOME=" + dir}
	listed := "tools on "
	var tm *term
	if fleet {
		config := filepath.Join(dir, "mcp.json")
		b, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{
			"orders": map[string]any{"type": "http", "url": endpoint},
			"local":  map[string]any{"command": bin, "args": []string{"demo-server", "--db", filepath.Join(dir, "local.db")}},
		}})
		if err := os.WriteFile(config, b, 0o600); err != nil {
			t.Fatal(err)
		}
		tm = newTerm(t, 120, 36, env, bin, "--db", journal, "--config", config)
		tm.waitFor("2 servers: local not started · orders not started")
		tm.press("c")
		tm.waitFor("Pick the server for the new call", "› local")
		tm.press("Down")
		tm.waitFor("› orders")
		tm.press("Enter")
		listed = "Pick the tool to call on orders"
	} else {
		tm = newTerm(t, 120, 36, env, bin, "--db", journal, "--url", endpoint)
	}
	tm.waitFor("authorization needed by "+endpoint+": O logs in here", "O log in")
	if !fleet {
		tm.press("t")
	}
	tm.waitFor("cannot list the tools", "It wants authorization: O logs in to "+endpoint)

	// 1. O, then esc: cancelled, nothing kept, and its redirect no longer
	// listens.
	tm.press("O")
	tm.waitFor("Logging in to "+endpoint, "Waiting for the browser:", "left. esc cancels.")
	first := screenURL(t, tm, as.URL+"/authorize?")
	tm.press("Escape")
	tm.waitFor("login to " + endpoint + " cancelled; nothing was stored")
	tm.waitFor("It wants authorization: O logs in to " + endpoint) // back on the tools screen, offered again
	if resp, err := http.Get(first); err == nil {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("the cancelled login's redirect still answers: %d %s", resp.StatusCode, body)
	}
	if files, _ := filepath.Glob(filepath.Join(state, "mcp-confirm", "oauth", "*.json")); len(files) != 0 {
		t.Fatalf("a cancelled login kept %v", files)
	}

	// 2. O again; the browser follows the URL on the screen.
	tm.press("O")
	tm.waitFor("Logging in to "+endpoint, "Waiting for the browser:")
	u := screenURL(t, tm, as.URL+"/authorize?")
	if u == first {
		t.Fatal("the second login shows the first one's URL")
	}
	resp, err := http.Get(u)
	if err != nil {
		t.Fatalf("browser: %v\nscreen:\n%s", err, tm.screen())
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !bytes.Contains(body, []byte("Logged in")) {
		t.Fatalf("browser: the redirect answered %d %s", resp.StatusCode, body)
	}
	tm.waitFor("logged in to "+endpoint+" (access token valid for", listed, "create_order", "find_orders")
	if s := tm.screen(); strings.Contains(s, "authorization needed") || strings.Contains(s, "O log in") {
		t.Errorf("the login is still offered once logged in:\n%s", s)
	}
	files, _ := filepath.Glob(filepath.Join(state, "mcp-confirm", "oauth", "*.json"))
	if len(files) != 1 {
		t.Fatalf("login files %v, want one", files)
	}
	if st, err := os.Stat(files[0]); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("%s: %v, mode %v; want 0600", files[0], err, st.Mode().Perm())
	}
	if c := as.Counts(); c.Registrations != 2 || c.Exchanges != 1 {
		t.Errorf("authorization server saw %+v; want two registrations (one a login), one code exchanged", c)
	}
	tm.press("q")
	if code := tm.exitCode(); code != "0" {
		t.Fatalf("console exit status %s", code)
	}
	if n := countOrders(t, demoDB); n != 0 {
		t.Fatalf("the login made %d orders, want none", n)
	}
	if n := countCalls(t, journal); n != 0 {
		t.Fatalf("the journal holds %d calls, want none", n)
	}
}

// screenURL is the URL starting with prefix on the login screen, its
// lines joined, as a person selecting it copies it (and a browser drops
// the line breaks).
func screenURL(t *testing.T, tm *term, prefix string) string {
	t.Helper()
	tm.waitFor(prefix)
	lines := strings.Split(tm.screen(), "\n")
	for i, l := range lines {
		if !strings.HasPrefix(l, prefix) {
			continue
		}
		var b strings.Builder
		for _, l := range lines[i:] {
			l = strings.TrimRight(l, " ")
			if l == "" {
				break
			}
			b.WriteString(l)
		}
		return b.String()
	}
	t.Fatalf("no line starts with %q:\n%s", prefix, tm.screen())
	return ""
}

// countCalls is the number of calls in a journal file.
func countCalls(t *testing.T, path string) int {
	t.Helper()
	db, err := sql.Open("sqlite", path+"?_pragma=query_only(1)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRowContext(context.Background(), "SELECT count(*) FROM calls").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
