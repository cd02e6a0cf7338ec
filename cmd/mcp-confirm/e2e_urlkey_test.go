package main

import (
	"bytes"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
)

// keyGateway is a server that wants its key in the URL (?api_key=KEY), as
// several hosted MCP servers do, in front of upstream: a request without
// it is answered 401. served counts those let through.
func keyGateway(t *testing.T, upstream, key string) (endpoint string, served *atomic.Int64) {
	t.Helper()
	target, err := url.Parse(upstream)
	if err != nil {
		t.Fatal(err)
	}
	served = &atomic.Int64{}
	rp := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) {
		pr.SetURL(&url.URL{Scheme: target.Scheme, Host: target.Host})
		pr.Out.URL.RawQuery = "" // the key is the gateway's, not the demo's
	}}
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("api_key") != key {
			http.Error(rw, "unauthorized: api_key", http.StatusUnauthorized)
			return
		}
		served.Add(1)
		rp.ServeHTTP(rw, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + target.Path + "?api_key=" + key, served
}

// secretKey is a key no other process on this machine has on its
// command line.
func secretKey(t *testing.T) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "secret123" + hex.EncodeToString(b[:])
}

// The journal files of w, every one of them (the database, its WAL).
func journalBytes(t *testing.T, w *world) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	files, _ := filepath.Glob(w.journal + "*")
	for _, f := range files {
		if st, err := os.Stat(f); err != nil || st.IsDir() {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out[filepath.Base(f)] = b
	}
	return out
}

// A server reached at a URL holding its key (?api_key=...): the real URL
// is what connects (the gateway lets nothing through without the key),
// but the key is in none of the journal's files, nor in what show, list,
// export and report print, nor on stderr; the journal keeps the URL
// masked (api_key=***) and a fingerprint of the whole, so that a URL
// differing only in a masked value is another server (a retry on it is
// refused), and a retry with no server named asks for the URL again,
// since the journal cannot give it. A journal written unmasked by an
// older mcp-confirm is masked on output as well.
func TestKeyInServerURLIsStoredAndShownNowhere(t *testing.T) {
	w := newWorld(t, t.TempDir())
	key := secretKey(t)
	endpoint, served := keyGateway(t, startHTTPDemo(t, w, "--cut-after-commit", "2"), key)
	endpoint += "&tenant=a"
	args := `{"item":"widget","quantity":1,"buyer":"bob"}`
	var printed []string
	run := func(want int, what string, a ...string) cliResult {
		t.Helper()
		r := w.run(a...)
		wantExit(t, r, want, what)
		printed = append(printed, what+"\n"+r.stdout+r.stderr)
		return r
	}

	first := parseCallOut(t, run(exitUnknown, "a call cut after its commit", "call", "create_order", "--args", args, "--url", endpoint))
	second := parseCallOut(t, run(exitUnknown, "a second call cut after its commit", "call", "create_order", "--args", `{"item":"gadget","quantity":1,"buyer":"bob"}`, "--url", endpoint))
	if served.Load() == 0 {
		t.Fatal("the gateway let nothing through: the key did not reach it")
	}
	id := strconv.FormatInt(first.ID, 10)

	r := run(exitBadInput, "retry with no server named", "retry", id)
	if !strings.Contains(r.stderr, "--url") || !strings.Contains(r.stderr, "api_key=***") {
		t.Errorf("retry with no server does not ask for the URL again, naming it masked:\n%s", r.stderr)
	}
	other := strings.Replace(endpoint, "tenant=a", "tenant=b", 1)
	r = run(exitBadInput, "retry on a URL that differs in a masked value", "retry", id, "--url", other)
	if !strings.Contains(r.stderr, "another server") && !strings.Contains(r.stderr, "was made on") {
		t.Errorf("a retry on another URL is not refused as another server:\n%s", r.stderr)
	}
	run(exitOK, "retry on the call's own URL", "retry", id, "--url", endpoint)
	if n := totalOrders(t, w.db()); n != 2 {
		t.Errorf("%d orders, want 2 (the retry is a replay)", n)
	}

	// reconcile queries the second call only when given its URL again.
	policy := filepath.Join(w.dir, "policy.toml")
	if err := os.WriteFile(policy, []byte(reconcilePolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	r = run(exitUnknown, "reconcile without the URL", "reconcile", "--policy", policy, "--json")
	if out := parseReconcile(t, r); len(out.Calls) != 1 || out.Calls[0].ID != second.ID || !strings.Contains(out.Calls[0].Error+out.Calls[0].Evidence, "--url") {
		t.Errorf("reconcile without the URL does not say it needs --url:\n%s", r)
	}
	r = run(exitOK, "reconcile with the URL", "reconcile", "--policy", policy, "--json", "--apply-found", "--url", endpoint)
	if out := parseReconcile(t, r); len(out.Calls) != 1 || !out.Calls[0].Applied {
		t.Errorf("reconcile with the URL did not find and apply the second call:\n%s", r)
	}

	outputs := [][]string{
		{"show", id}, {"show", "--json", id}, {"list"}, {"list", "--json"},
		{"export", "--format", "jsonl"}, {"export", "--format", "csv"},
		{"report", "--since", "1d"}, {"report", "--since", "1d", "--format", "json"}, {"report", "--since", "1d", "--format", "csv"},
	}
	for _, cmd := range outputs {
		run(exitOK, strings.Join(cmd, " "), cmd...)
	}
	if show := w.run("show", id); !strings.Contains(show.stdout, "api_key=***&tenant=***") {
		t.Errorf("show does not name the server's URL, masked (the test would pass on a journal that keeps no URL):\n%s", show.stdout)
	}
	for name, b := range journalBytes(t, w) {
		if bytes.Contains(b, []byte(key)) {
			t.Errorf("the journal file %s holds the key", name)
		}
	}
	for _, p := range printed {
		if strings.Contains(p, key) {
			t.Errorf("printed the key:\n%s", p)
		}
	}

	// An older mcp-confirm kept the URL as given: output masks it.
	db, err := sql.Open("sqlite", "file:"+w.journal+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	old, _ := json.Marshal(map[string]string{"url": endpoint})
	if _, err := db.Exec(`UPDATE calls SET server_identity = ?`, string(old)); err != nil {
		t.Fatal(err)
	}
	db.Close()
	for _, cmd := range outputs {
		r := w.run(cmd...)
		wantExit(t, r, exitOK, "old journal: "+strings.Join(cmd, " "))
		if strings.Contains(r.stdout+r.stderr, key) {
			t.Errorf("old journal: %s printed the key:\n%s", strings.Join(cmd, " "), r.stdout)
		}
	}
}

// init on a host config whose remote entry's URL holds a key: the URL
// goes to the entry's env and the proxy reads it with --url-env, so that
// no process's command line holds the key (every local user can read
// those), and the proxy the host starts from the entry reaches the
// server (the gateway wants the key) and journals the call, the key not
// in the journal.
func TestInitMovesAURLWithAKeyToTheEnvironment(t *testing.T) {
	w := newWorld(t, t.TempDir())
	key := secretKey(t)
	endpoint, served := keyGateway(t, startHTTPDemo(t, w), key)
	config := filepath.Join(w.dir, ".mcp.json")
	original := `{
  "mcpServers": {
    "shop": {
      "type": "http",
      "url": "` + endpoint + `"
    }
  }
}
`
	if err := os.WriteFile(config, []byte(original), 0o644); err != nil {
		t.Fatal(err)
	}
	r := w.run("init", "--host", "claude-code")
	wantExit(t, r, exitOK, "init")
	if strings.Contains(r.stdout+r.stderr, key) {
		t.Errorf("init printed the key:\n%s", r)
	}
	var file struct {
		MCPServers map[string]struct {
			Command string            `json:"command"`
			Args    []string          `json:"args"`
			Env     map[string]string `json:"env"`
		} `json:"mcpServers"`
	}
	b, err := os.ReadFile(config)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &file); err != nil {
		t.Fatalf("the rewritten file is not JSON: %v\n%s", err, b)
	}
	shop := file.MCPServers["shop"]
	if strings.Contains(strings.Join(shop.Args, " "), key) {
		t.Fatalf("the key is in the proxy's arguments: %q", shop.Args)
	}

	env := childEnv(w.dir)
	for k, v := range shop.Env {
		env = append(env, k+"="+v)
	}
	host := startHost(t, env, shop.Command, shop.Args...)
	if res := hostCall(t, host, "create_order", map[string]any{"item": "widget", "quantity": 1, "buyer": "bob"}); res.IsError {
		t.Fatalf("create_order through the wrapped entry: %+v", res)
	}
	if served.Load() == 0 {
		t.Fatal("the gateway let nothing through: the proxy did not reach the server with its key")
	}
	// While the proxy runs: no command line on this machine holds the key.
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		if b, err := os.ReadFile(p); err == nil && bytes.Contains(b, []byte(key)) {
			t.Errorf("%s holds the key: %q", p, bytes.ReplaceAll(b, []byte{0}, []byte{' '}))
		}
	}
	host.Close()

	calls := w.list()
	if len(calls) != 1 || calls[0].State != "succeeded" {
		t.Fatalf("journal %+v, want one succeeded create_order", calls)
	}
	for name, b := range journalBytes(t, w) {
		if bytes.Contains(b, []byte(key)) {
			t.Errorf("the journal file %s holds the key", name)
		}
	}
	wantExit(t, cliIn(t, w.bin, w.dir, "", "uninstall", "--host", "claude-code"), exitOK, "uninstall")
	if back, _ := os.ReadFile(config); string(back) != original {
		t.Errorf("uninstall did not restore the file byte for byte:\n%s", back)
	}
}
