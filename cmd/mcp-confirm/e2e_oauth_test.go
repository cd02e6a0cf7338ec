package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcp-confirm/mcp-confirm/internal/oauthtest"
	"github.com/mcp-confirm/mcp-confirm/internal/testbin"
)

// loginRun is one run of 'mcp-confirm login', started: its stdout is read
// line by line (the authorization URL), its stderr kept.
type loginRun struct {
	cmd    *exec.Cmd
	lines  chan string
	stderr *testbin.Buffer
	cancel context.CancelFunc
}

func startLogin(t *testing.T, w *world, args ...string) *loginRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cmdHang)
	cmd := e2eCmd(ctx, w.bin, w.dir, append([]string{"login"}, args...)...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	l := &loginRun{cmd: cmd, lines: make(chan string, 16), stderr: &testbin.Buffer{}, cancel: cancel}
	cmd.Stderr = l.stderr
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	go func() {
		defer close(l.lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			l.lines <- sc.Text()
		}
	}()
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
	})
	return l
}

// authURL is the authorization URL login printed on stdout.
func (l *loginRun) authURL(t *testing.T) string {
	t.Helper()
	select {
	case u, ok := <-l.lines:
		if !ok {
			t.Fatalf("login printed no URL:\n%s", l.stderr.String())
		}
		return u
	case <-time.After(30 * time.Second):
		t.Fatalf("login printed no URL in 30s:\n%s", l.stderr.String())
	}
	return ""
}

// wait waits for login to end and returns what it came to.
func (l *loginRun) wait(t *testing.T) cliResult {
	t.Helper()
	var rest []string
	for line := range l.lines {
		rest = append(rest, line)
	}
	err := l.cmd.Wait()
	res := cliResult{stdout: strings.Join(rest, "\n"), stderr: l.stderr.String()}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		res.code = exit.ExitCode()
	case err != nil:
		t.Fatalf("login: %v\n%s", err, res)
	}
	return res
}

// login logs in to endpoint as a user does, the test playing the browser:
// it opens the printed URL, which the test's authorization server answers
// with a redirect back to login's loopback port.
func (w *world) login(t *testing.T, endpoint string, flags ...string) cliResult {
	t.Helper()
	l := startLogin(t, w, append([]string{"--url", endpoint}, flags...)...)
	u := l.authURL(t)
	resp, err := http.Get(u)
	if err != nil {
		t.Fatalf("browser: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !bytes.Contains(body, []byte("Logged in")) {
		t.Fatalf("browser: the redirect answered %d %s", resp.StatusCode, body)
	}
	return l.wait(t)
}

// tokenFile is the one login file in the world's state folder.
func (w *world) tokenFile(t *testing.T) (string, time.Time) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(w.dir, "state", "mcp-confirm", "oauth", "*.json"))
	if len(files) != 1 {
		t.Fatalf("login files %v, want one", files)
	}
	b, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	var l struct {
		Token struct {
			ExpiresAt time.Time `json:"expires_at"`
		} `json:"token"`
	}
	if err := json.Unmarshal(b, &l); err != nil {
		t.Fatalf("%s: %v", files[0], err)
	}
	return files[0], l.Token.ExpiresAt
}

func (w *world) noUnknown(t *testing.T, what string) {
	t.Helper()
	for _, c := range w.list() {
		if c.State == "unknown" {
			t.Errorf("%s: call %d journaled as unknown", what, c.ID)
		}
	}
}

// The OAuth story through the built binary, against a real authorization
// server and the demo server behind a bearer check on loopback: with no
// login, a create_order is refused by the server (401), exit 5 with the
// login hint, nothing run or unknown; login prints the URL, waits on the
// loopback redirect, keeps the tokens 0600; the create_order then makes
// one order; an expired token is refreshed on the way; once the refresh
// token is no longer good, exit 5 and the hint again, nothing run.
func TestOAuthLoginCallRefresh(t *testing.T) {
	w := newWorld(t, t.TempDir())
	as := oauthtest.NewServer(t, oauthtest.Options{AccessTTL: time.Second})
	endpoint := as.ProtectedProxy(t, startHTTPDemo(t, w))
	args := `{"item":"widget","quantity":1,"buyer":"bob"}`
	hint := "mcp-confirm login --url " + endpoint

	r := w.run("call", "create_order", "--args", args, "--url", endpoint)
	wantExit(t, r, exitUnavailable, "a call before login")
	if !strings.Contains(r.stderr, "authorization needed") || !strings.Contains(r.stderr, hint) {
		t.Errorf("stderr does not say authorization is needed and how to log in:\n%s", r.stderr)
	}
	if n := totalOrders(t, w.db()); n != 0 {
		t.Fatalf("%d orders before login, want 0", n)
	}
	w.noUnknown(t, "before login")

	r = w.login(t, endpoint)
	wantExit(t, r, exitOK, "login")
	file, expires := w.tokenFile(t)
	if !strings.Contains(r.stderr, "logged in to "+endpoint) || !strings.Contains(r.stderr, file) {
		t.Errorf("login does not say where it kept the login:\n%s", r)
	}
	for path, want := range map[string]os.FileMode{file: 0o600, filepath.Dir(file): 0o700} {
		if st, err := os.Stat(path); err != nil || st.Mode().Perm() != want {
			t.Fatalf("%s: %v mode %v, want %04o", path, err, st.Mode().Perm(), want)
		}
	}
	if c := as.Counts(); c.Registrations != 1 || c.Exchanges != 1 {
		t.Fatalf("authorization server saw %+v, want one registration and one code exchange", c)
	}

	r = w.run("call", "create_order", "--args", args, "--url", endpoint)
	wantExit(t, r, exitOK, "a call after login")
	if n := totalOrders(t, w.db()); n != 1 {
		t.Fatalf("%d orders after one call, want 1", n)
	}

	time.Sleep(time.Until(expires) + 50*time.Millisecond)
	before := as.Counts().Refreshes
	r = w.run("call", "create_order", "--args", `{"item":"gadget","quantity":1,"buyer":"bob"}`, "--url", endpoint)
	wantExit(t, r, exitOK, "a call with an expired token")
	if n := totalOrders(t, w.db()); n != 2 {
		t.Fatalf("%d orders after the second call, want 2", n)
	}
	if as.Counts().Refreshes <= before {
		t.Fatalf("the expired token was not refreshed: %+v", as.Counts())
	}
	wantExit(t, w.run("tools", "--url", endpoint), exitOK, "tools with the stored login")

	as.RevokeRefreshTokens()
	_, expires = w.tokenFile(t)
	time.Sleep(time.Until(expires) + 50*time.Millisecond)
	r = w.run("call", "create_order", "--args", `{"item":"gizmo","quantity":1,"buyer":"bob"}`, "--url", endpoint)
	wantExit(t, r, exitUnavailable, "a call whose refresh token is no longer good")
	if !strings.Contains(r.stderr, "authorization needed") || !strings.Contains(r.stderr, hint) {
		t.Errorf("stderr does not say authorization is needed and how to log in:\n%s", r.stderr)
	}
	if n := totalOrders(t, w.db()); n != 2 {
		t.Fatalf("%d orders, want still 2", n)
	}
	w.noUnknown(t, "after the refresh token died")

	// The proxy cannot open a browser for its host: it answers the host's
	// initialize with an error naming mcp-confirm login.
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"test-host","version":"1"}}}` + "\n"
	r = cliIn(t, w.bin, w.dir, init, "proxy", "--db", w.journal, "--url", endpoint)
	wantExit(t, r, exitUnavailable, "the proxy without a usable login")
	var answer struct {
		ID    int `json:"id"`
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(strings.TrimSpace(r.stdout)), &answer); err != nil || answer.ID != 1 ||
		!strings.Contains(answer.Error.Message, "authorization needed") || !strings.Contains(answer.Error.Message, hint) {
		t.Fatalf("the proxy's answer to initialize does not name mcp-confirm login (%v):\n%s", err, r)
	}
	if !strings.Contains(r.stderr, hint) {
		t.Errorf("the proxy's stderr does not name mcp-confirm login:\n%s", r.stderr)
	}
}

// What login refuses, each in one or two lines with its exit code, and a
// browser step never completed: the wait runs out, or ctrl-C; nothing is
// stored.
func TestOAuthLoginBadInput(t *testing.T) {
	w := newWorld(t, t.TempDir())
	plain := startHTTPDemo(t, w)
	for _, c := range []struct {
		name string
		args []string
		exit int
		want string
	}{
		{"no url", nil, exitBadInput, "no server given"},
		{"not an http URL", []string{"--url", "ftp://example.com/mcp"}, exitBadInput, "not an http:// or https:// URL"},
		{"an argument", []string{"--url", plain, "extra"}, exitBadInput, "unexpected argument"},
		{"a journal flag", []string{"--url", plain, "--db", w.journal}, exitBadInput, "--db does not apply to login"},
		{"no wait", []string{"--url", plain, "--wait", "0s"}, exitBadInput, "--wait must be more than 0"},
		{"a server without OAuth", []string{"--url", plain}, exitUnavailable, "does not ask for authorization"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := cliIn(t, w.bin, w.dir, "", append([]string{"login"}, c.args...)...)
			wantExit(t, r, c.exit, c.name)
			if !strings.Contains(r.stderr, c.want) {
				t.Errorf("stderr does not say %q:\n%s", c.want, r.stderr)
			}
			if n := len(strings.Split(strings.TrimSpace(r.stderr), "\n")); n > 2 {
				t.Errorf("%d lines on stderr, want one or two:\n%s", n, r.stderr)
			}
		})
	}

	as := oauthtest.NewServer(t, oauthtest.Options{})
	endpoint := as.ProtectedProxy(t, plain)
	l := startLogin(t, w, "--url", endpoint, "--wait", "1s")
	if u := l.authURL(t); !strings.HasPrefix(u, as.URL+"/authorize?") {
		t.Errorf("printed %q, want the authorization server's URL", u)
	}
	r := l.wait(t)
	wantExit(t, r, exitFailed, "login whose browser step is never done")
	if !strings.Contains(r.stderr, "not completed") || !strings.Contains(r.stderr, "--wait") {
		t.Errorf("stderr does not say the browser step was not completed in time:\n%s", r.stderr)
	}

	l = startLogin(t, w, "--url", endpoint)
	l.authURL(t)
	if err := l.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	r = l.wait(t)
	wantExit(t, r, exitFailed, "login interrupted")
	if !strings.Contains(r.stderr, "interrupted") || !strings.Contains(r.stderr, "Nothing was stored") {
		t.Errorf("stderr does not say login was interrupted and nothing stored:\n%s", r.stderr)
	}
	if files, _ := filepath.Glob(filepath.Join(w.dir, "state", "mcp-confirm", "oauth", "*.json")); len(files) != 0 {
		t.Errorf("login files %v after logins that did not complete, want none", files)
	}
}

// An authorization server whose metadata puts terminal control sequences
// in its authorization_endpoint: login prints the URL without them, and
// what it prints is still the URL to open, so the login completes. They
// are the 8-bit forms (a window-title OSC, a clear-screen CSI) and a
// right-to-left override, which url.Parse lets through; mcp-go refuses
// metadata whose endpoints hold an ASCII control such as ESC.
func TestOAuthLoginPrintsAHostileURLInert(t *testing.T) {
	w := newWorld(t, t.TempDir())
	as := oauthtest.NewServer(t, oauthtest.Options{AuthorizationEndpointSuffix: "\u009d0;pwned\u009c\u009b2J\u202e"})
	endpoint := as.ProtectedProxy(t, startHTTPDemo(t, w))
	l := startLogin(t, w, "--url", endpoint)
	u := l.authURL(t)
	for _, bad := range []string{"\u009d", "\u009c", "\u009b", "\u202e", "pwned"} {
		if strings.Contains(u, bad) {
			t.Errorf("login printed the authorization URL with %q in it: %q", bad, u)
		}
	}
	if !strings.HasPrefix(u, as.URL+"/authorize?") {
		t.Fatalf("printed %q, want the authorization server's URL without the control sequences", u)
	}
	resp, err := http.Get(u)
	if err != nil {
		t.Fatalf("browser: %v", err)
	}
	resp.Body.Close()
	r := l.wait(t)
	wantExit(t, r, exitOK, "login through the printed URL")
	if strings.ContainsAny(r.stdout+r.stderr, "\x1b\x07\u009b\u009c\u009d\u202e") {
		t.Errorf("login's output holds a raw control character:\n%q", r)
	}
}

// The proxy in front of a remote server with a stored login: the host's
// initialize is answered, and its create_order goes out with the token and
// makes one order.
func TestOAuthProxyUsesTheLogin(t *testing.T) {
	w := newWorld(t, t.TempDir())
	as := oauthtest.NewServer(t, oauthtest.Options{AccessTTL: time.Hour})
	endpoint := as.ProtectedProxy(t, startHTTPDemo(t, w))
	wantExit(t, w.login(t, endpoint), exitOK, "login")

	ctx, cancel := context.WithTimeout(context.Background(), cmdHang)
	defer cancel()
	cmd := e2eCmd(ctx, w.bin, w.dir, "proxy", "--db", w.journal, "--url", endpoint)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr testbin.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	answers := bufio.NewReader(stdout)
	answer := func(what string) string { // the next response, past any notification
		t.Helper()
		for {
			line, err := answers.ReadString('\n')
			var m struct {
				ID     json.RawMessage `json:"id"`
				Result json.RawMessage `json:"result"`
			}
			if err == nil && json.Unmarshal([]byte(line), &m) == nil && m.ID == nil {
				continue
			}
			if err != nil || m.Result == nil {
				t.Fatalf("%s: answer %q (%v)\n%s", what, line, err, stderr.String())
			}
			return line
		}
	}
	io.WriteString(stdin, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"test-host","version":"1"}}}`+"\n")
	answer("initialize")
	io.WriteString(stdin, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n")
	io.WriteString(stdin, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"create_order","arguments":{"item":"widget","quantity":1,"buyer":"bob"}}}`+"\n")
	if line := answer("create_order"); strings.Contains(line, `"isError":true`) {
		t.Fatalf("create_order through the proxy failed: %s", line)
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("proxy: %v\n%s", err, stderr.String())
	}
	if n := totalOrders(t, w.db()); n != 1 {
		t.Fatalf("%d orders, want 1", n)
	}
}

// An authorization server without dynamic registration: login says to
// give a client registered there, and with --client-id, its secret (from
// the environment) and the redirect's port, it logs in without
// registering; the call then orders once, and the token is refreshed with
// that client's secret.
func TestOAuthLoginPreRegisteredClient(t *testing.T) {
	w := newWorld(t, t.TempDir())
	as := oauthtest.NewServer(t, oauthtest.Options{AccessTTL: time.Second, NoRegistration: true})
	endpoint := as.ProtectedProxy(t, startHTTPDemo(t, w))

	r := cliIn(t, w.bin, w.dir, "", "login", "--url", endpoint)
	wantExit(t, r, exitUnavailable, "login with no registration and no client id")
	if !strings.Contains(r.stderr, "no dynamic client registration") || !strings.Contains(r.stderr, "--client-id") {
		t.Errorf("stderr does not say to give --client-id:\n%s", r.stderr)
	}
	r = cliIn(t, w.bin, w.dir, "", "login", "--url", endpoint, "--client-secret", "x")
	wantExit(t, r, exitBadInput, "--client-secret without --client-id")

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	as.AddClient("mcp-confirm-ops", "s3cret", fmt.Sprintf("http://127.0.0.1:%d/callback", port))
	t.Setenv("ORDERS_SECRET", "s3cret")
	r = w.login(t, endpoint, "--client-id", "mcp-confirm-ops", "--client-secret", "${ORDERS_SECRET}", "--callback-port", strconv.Itoa(port))
	wantExit(t, r, exitOK, "login with a pre-registered client")
	if c := as.Counts(); c.Registrations != 0 || c.Exchanges != 1 {
		t.Fatalf("authorization server saw %+v, want no registration and one code exchange", c)
	}
	r = w.run("call", "create_order", "--args", `{"item":"widget","quantity":1,"buyer":"bob"}`, "--url", endpoint)
	wantExit(t, r, exitOK, "a call after login")
	_, expires := w.tokenFile(t)
	time.Sleep(time.Until(expires) + 50*time.Millisecond)
	r = w.run("call", "create_order", "--args", `{"item":"gadget","quantity":1,"buyer":"bob"}`, "--url", endpoint)
	wantExit(t, r, exitOK, "a call with an expired token")
	if c := as.Counts(); c.Refreshes == 0 || c.Refused != 0 {
		t.Fatalf("the refresh with the client's secret: %+v, refusals %v", c, as.Refusals())
	}
	if n := totalOrders(t, w.db()); n != 2 {
		t.Fatalf("%d orders, want 2", n)
	}
}

// init over a Claude Code entry that logs in with OAuth itself (a client
// registered beforehand, its callback port): the entry goes through proxy
// --url without the host's oauth settings, init prints the one login to
// run, and after that login the host's create_order orders once.
func TestInitWrapsAnOAuthEntry(t *testing.T) {
	w := newWorld(t, t.TempDir())
	as := oauthtest.NewServer(t, oauthtest.Options{AccessTTL: time.Hour, NoRegistration: true})
	endpoint := as.ProtectedProxy(t, startHTTPDemo(t, w))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	ln.Close()
	as.AddClient("shop-client", "", "http://127.0.0.1:"+port+"/callback")
	config := filepath.Join(w.dir, ".mcp.json")
	original := `{"mcpServers": {"shop": {"type": "http", "url": "` + endpoint + `", "oauth": {"clientId": "shop-client", "callbackPort": ` + port + `}}}}` + "\n"
	if err := os.WriteFile(config, []byte(original), 0o644); err != nil {
		t.Fatal(err)
	}
	r := w.run("init", "--host", "claude-code")
	wantExit(t, r, exitOK, "init")
	wantLogin := "login --url " + endpoint + " --client-id shop-client --callback-port " + port
	if !strings.Contains(r.stdout, "shop: wrapped: remote "+endpoint) || !strings.Contains(r.stdout, "log in once before it starts:") ||
		!strings.Contains(r.stdout, wantLogin) {
		t.Fatalf("init does not name the login to run (%q):\n%s", wantLogin, r)
	}
	var file struct {
		MCPServers map[string]map[string]any `json:"mcpServers"`
	}
	b, _ := os.ReadFile(config)
	if err := json.Unmarshal(b, &file); err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	shop := file.MCPServers["shop"]
	if shop["oauth"] != nil || shop["type"] != "stdio" {
		t.Fatalf("rewritten entry %v, want a stdio entry without the host's oauth settings", shop)
	}

	wantExit(t, w.login(t, endpoint, "--client-id", "shop-client", "--callback-port", port), exitOK, "the login init named")
	var args []string
	for _, a := range shop["args"].([]any) {
		args = append(args, a.(string))
	}
	host := startHost(t, childEnv(w.dir), shop["command"].(string), args...)
	if res := hostCall(t, host, "create_order", map[string]any{"item": "widget", "quantity": 1, "buyer": "bob"}); res.IsError {
		t.Fatalf("create_order through the wrapped entry: %+v", res)
	}
	host.Close()
	if n := totalOrders(t, w.db()); n != 1 {
		t.Errorf("%d orders, want 1", n)
	}
	wantExit(t, cliIn(t, w.bin, w.dir, "", "uninstall", "--host", "claude-code"), exitOK, "uninstall")
	if back, _ := os.ReadFile(config); string(back) != original {
		t.Errorf("uninstall did not restore the file byte for byte:\n%s", back)
	}
}

// expireLogin marks the world's stored access token expired (its refresh
// token untouched), as time would, and returns the login file and its
// refresh token. The authorization server still takes the access token:
// only mcp-confirm's own account of its expiry makes it refresh.
func (w *world) expireLogin(t *testing.T) (file, refresh string) {
	t.Helper()
	file, _ = w.tokenFile(t)
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var login map[string]any
	if err := json.Unmarshal(b, &login); err != nil {
		t.Fatal(err)
	}
	tok := login["token"].(map[string]any)
	tok["expires_at"] = time.Now().Add(-time.Minute).UTC().Format(time.RFC3339Nano)
	if b, err = json.Marshal(login); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return file, tok["refresh_token"].(string)
}

// storedToken is the access and refresh token in the world's login file.
func (w *world) storedToken(t *testing.T) (access, refresh string, expires time.Time) {
	t.Helper()
	file, expires := w.tokenFile(t)
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var l struct {
		Token struct {
			Access  string `json:"access_token"`
			Refresh string `json:"refresh_token"`
		} `json:"token"`
	}
	if err := json.Unmarshal(b, &l); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return l.Token.Access, l.Token.Refresh, expires
}

// Several mcp-confirm processes (a proxy per host, the console, a CLI
// call) share one login file. With an authorization server that rotates
// refresh tokens and revokes the grant when a used one comes back, those
// that find the token expired at the same moment must refresh it once
// between them: one refreshes under the login's lock, the others wait for
// it and take what it saved. Here several calls start at once with an
// expired token and a token endpoint slow enough that, unserialized, they
// would all send the one refresh token: every call succeeds, one refresh
// reaches the server and no reuse, and the file ends with a token the
// server takes and a refresh token that still refreshes.
func TestOAuthConcurrentRefreshOneLogin(t *testing.T) {
	const n = 4
	w := newWorld(t, t.TempDir())
	as := oauthtest.NewServer(t, oauthtest.Options{AccessTTL: time.Hour, RefreshDelay: 500 * time.Millisecond})
	endpoint := as.ProtectedProxy(t, startHTTPDemo(t, w))
	wantExit(t, w.login(t, endpoint), exitOK, "login")
	file, spent := w.expireLogin(t)

	ctx, cancel := context.WithTimeout(context.Background(), cmdHang)
	defer cancel()
	cmds := make([]*exec.Cmd, n)
	outs := make([]*testbin.Buffer, n)
	for i := range cmds {
		args := fmt.Sprintf(`{"item":"widget","quantity":%d,"buyer":"alice"}`, i+1)
		cmds[i] = e2eCmd(ctx, w.bin, w.dir, w.withDB([]string{"call", "create_order", "--args", args, "--url", endpoint})...)
		outs[i] = &testbin.Buffer{}
		cmds[i].Stdout, cmds[i].Stderr = outs[i], outs[i]
	}
	for _, cmd := range cmds { // all started before any is waited for
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
	}
	failed := 0
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			failed++
			t.Errorf("call %d: %v\n%s", i, err, outs[i].String())
		}
	}
	c := as.Counts()
	if c.Refreshes != 1 || c.Reuses != 0 || c.Refused != 0 {
		t.Errorf("authorization server saw %+v (refusals %q), want one refresh, no reuse, nothing refused", c, as.Refusals())
	}
	if got := totalOrders(t, w.db()); got != n-failed || failed > 0 {
		t.Fatalf("%d orders from %d calls, %d failed", got, n, failed)
	}

	access, refresh, expires := w.storedToken(t)
	if refresh == spent || !time.Now().Before(expires) || !as.Valid(access, endpoint) {
		t.Fatalf("login file after the refresh: refresh token rotated %v, expires %s, access token live %v",
			refresh != spent, expires, as.Valid(access, endpoint))
	}
	if st, err := os.Stat(file); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("%s: %v, mode %v, want 0600", file, err, st.Mode().Perm())
	}
	w.expireLogin(t)
	r := w.run("call", "create_order", "--args", `{"item":"gadget","quantity":1,"buyer":"bob"}`, "--url", endpoint)
	wantExit(t, r, exitOK, "a call that refreshes with the stored refresh token")
	if c := as.Counts(); c.Refreshes != 2 || c.Refused != 0 {
		t.Fatalf("authorization server saw %+v, want the stored refresh token to refresh once more", c)
	}
}
