package mcpclient_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcp-confirm/mcp-confirm/internal/oauthtest"
	"github.com/mcp-confirm/mcp-confirm/mcpclient"
)

// browse plays the user's browser: it opens the authorization URL, whose
// server approves at once and redirects to the loopback callback.
func browse(t *testing.T) func(string) {
	return func(u string) {
		go func() {
			resp, err := http.Get(u)
			if err != nil {
				t.Errorf("browser: %v", err)
				return
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "Logged in") {
				t.Errorf("browser: the redirect answered %d %s", resp.StatusCode, body)
			}
		}()
	}
}

// waitExpired waits until the stored access token is past its expiry.
func waitExpired(t *testing.T, logins mcpclient.Logins, url string) {
	t.Helper()
	l, err := logins.Load(url)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Until(l.Token.ExpiresAt) + 50*time.Millisecond)
}

// The whole login against a real authorization server and a protected
// mcp-go server on loopback: discovery from the 401, registration, the
// code with PKCE on the loopback redirect, a file of mode 0600; then a
// Remote using it calls, refreshes the expired token transparently, and,
// once the refresh token is no longer good, sends nothing and says
// authorization is needed.
func TestOAuthLoginCallRefresh(t *testing.T) {
	as := oauthtest.NewServer(t, oauthtest.Options{AccessTTL: time.Second})
	o := newOrdersServer(t)
	endpoint := as.ProtectedProxy(t, o.url)
	logins := mcpclient.Logins{Dir: filepath.Join(t.TempDir(), "oauth")}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	login, err := mcpclient.Authorize(ctx, endpoint, mcpclient.AuthorizeOptions{Wait: 10 * time.Second, OnAuthorizationURL: browse(t)})
	if err != nil {
		t.Fatal(err)
	}
	if login.Token.AccessToken == "" || login.Token.RefreshToken == "" || login.ClientID == "" || login.Issuer != as.URL {
		t.Fatalf("login %+v: want tokens, a client id and issuer %s", login, as.URL)
	}
	if err := logins.Save(login); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]os.FileMode{logins.Dir: 0o700, logins.Path(endpoint): 0o600} {
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != want {
			t.Errorf("%s: mode %04o, want %04o", path, st.Mode().Perm(), want)
		}
	}
	if c := as.Counts(); c.Registrations != 1 || c.Exchanges != 1 {
		t.Fatalf("authorization server saw %+v, want one registration and one exchange", c)
	}

	r, err := mcpclient.NewRemote(mcpclient.ServerSpec{URL: endpoint}, mcpclient.Options{OAuth: &logins})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	out := r.Call(ctx, "create_order", map[string]any{"item": "book"}, mcpclient.CallOptions{Key: "k-oauth-1", IdleTimeout: 10 * time.Second})
	if out.Kind != mcpclient.DeliveryResult || o.executed.Load() != 1 {
		t.Fatalf("first call: %s (%v), %d executed; want a result, 1", out.Kind, out.Err, o.executed.Load())
	}

	waitExpired(t, logins, endpoint)
	out = r.Call(ctx, "create_order", map[string]any{"item": "book"}, mcpclient.CallOptions{Key: "k-oauth-2", IdleTimeout: 10 * time.Second})
	if out.Kind != mcpclient.DeliveryResult || o.executed.Load() != 2 {
		t.Fatalf("call after expiry: %s (%v), %d executed; want a result, 2", out.Kind, out.Err, o.executed.Load())
	}
	if c := as.Counts(); c.Refreshes < 1 {
		t.Fatalf("authorization server saw %+v, want a refresh", c)
	}
	if after, err := logins.Load(endpoint); err != nil || after.Token.AccessToken == login.Token.AccessToken {
		t.Fatalf("the refreshed token was not kept (err %v)", err)
	}

	as.RevokeRefreshTokens()
	waitExpired(t, logins, endpoint)
	out = r.Call(ctx, "create_order", map[string]any{"item": "book"}, mcpclient.CallOptions{Key: "k-oauth-3", IdleTimeout: 10 * time.Second})
	if out.Kind != mcpclient.DeliveryNotSent || !errors.Is(out.Err, mcpclient.ErrAuthorization) {
		t.Fatalf("call with a dead refresh token: %s (%v), want not sent, authorization needed", out.Kind, out.Err)
	}
	if n := o.executed.Load(); n != 2 {
		t.Fatalf("%d executed, want still 2", n)
	}
	// A new session (a new process, say) is refused at its handshake.
	r2, err := mcpclient.NewRemote(mcpclient.ServerSpec{URL: endpoint}, mcpclient.Options{OAuth: &logins})
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	if err := r2.Start(ctx); !errors.Is(err, mcpclient.ErrAuthorization) {
		t.Fatalf("start with a dead refresh token: %v, want authorization needed", err)
	}
}

// A token the server refuses before its expiry (revoked, forgotten) is
// refreshed and the handshake made once more; a token with no refresh
// token left is not.
func TestOAuthRefusedTokenRefreshedAtHandshake(t *testing.T) {
	as := oauthtest.NewServer(t, oauthtest.Options{AccessTTL: time.Hour})
	o := newOrdersServer(t)
	endpoint := as.ProtectedProxy(t, o.url)
	logins := mcpclient.Logins{Dir: t.TempDir()}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	login, err := mcpclient.Authorize(ctx, endpoint, mcpclient.AuthorizeOptions{OnAuthorizationURL: browse(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := logins.Save(login); err != nil {
		t.Fatal(err)
	}
	as.RevokeAccessTokens()
	r, err := mcpclient.NewRemote(mcpclient.ServerSpec{URL: endpoint}, mcpclient.Options{OAuth: &logins})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := r.Start(ctx); err != nil {
		t.Fatalf("start with a revoked access token and a good refresh token: %v", err)
	}
	if c := as.Counts(); c.Refreshes != 1 {
		t.Fatalf("authorization server saw %+v, want one refresh", c)
	}

	as.RevokeAccessTokens()
	as.RevokeRefreshTokens()
	r2, err := mcpclient.NewRemote(mcpclient.ServerSpec{URL: endpoint}, mcpclient.Options{OAuth: &logins})
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	if err := r2.Start(ctx); !errors.Is(err, mcpclient.ErrAuthorization) {
		t.Fatalf("start with both tokens revoked: %v, want authorization needed", err)
	}
}

// Sessions that find one login's token expired at the same moment, here
// in one process (as the console's for one server, or two entries of one
// URL), refresh it once: each takes the login's lock on a file of its
// own, and those after the first find the token it saved. The
// authorization server rotates refresh tokens and revokes the grant on
// reuse, and answers slowly enough that unserialized refreshes overlap.
func TestOAuthSessionsRefreshOneLoginOnce(t *testing.T) {
	const n = 4
	as := oauthtest.NewServer(t, oauthtest.Options{AccessTTL: time.Hour, RefreshDelay: 300 * time.Millisecond})
	o := newOrdersServer(t)
	endpoint := as.ProtectedProxy(t, o.url)
	logins := mcpclient.Logins{Dir: t.TempDir()}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	login, err := mcpclient.Authorize(ctx, endpoint, mcpclient.AuthorizeOptions{OnAuthorizationURL: browse(t)})
	if err != nil {
		t.Fatal(err)
	}
	login.Token.ExpiresAt = time.Now().Add(-time.Minute) // the server still takes it; we think it expired
	if err := logins.Save(login); err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, n)
	for range n {
		r, err := mcpclient.NewRemote(mcpclient.ServerSpec{URL: endpoint}, mcpclient.Options{OAuth: &logins})
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		go func() { errs <- r.Start(ctx) }()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Errorf("start with an expired token: %v", err)
		}
	}
	if c := as.Counts(); c.Refreshes != 1 || c.Reuses != 0 || c.Refused != 0 {
		t.Fatalf("authorization server saw %+v (refusals %q), want one refresh, no reuse", c, as.Refusals())
	}
	after, err := logins.Load(endpoint)
	if err != nil || after.Token.RefreshToken == login.Token.RefreshToken || !as.Valid(after.Token.AccessToken, endpoint) {
		t.Fatalf("login after the refresh (err %v): want a new refresh token and a live access token", err)
	}
}

// A 401 at the start says whether a login is what the server needs
// (StartError.NeedsLogin), which the console offers then: yes for a client
// on the stored logins with none for the URL, or with one whose tokens
// are both refused; no for a client without logins, or with an
// Authorization header of its own, which a login would not replace.
func TestOAuthStartSaysWhetherALoginHelps(t *testing.T) {
	as := oauthtest.NewServer(t, oauthtest.Options{AccessTTL: time.Hour})
	o := newOrdersServer(t)
	endpoint := as.ProtectedProxy(t, o.url)
	logins := mcpclient.Logins{Dir: t.TempDir()}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := func(spec mcpclient.ServerSpec, opts mcpclient.Options) (needsLogin bool, err error) {
		t.Helper()
		r, err := mcpclient.NewRemote(spec, opts)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		err = r.Start(ctx)
		var se *mcpclient.StartError
		return errors.As(err, &se) && se.NeedsLogin, err
	}
	bare := mcpclient.ServerSpec{URL: endpoint}
	withHeader := mcpclient.ServerSpec{URL: endpoint, Headers: map[string]string{"Authorization": "Bearer wrong"}}
	for _, tc := range []struct {
		what string
		spec mcpclient.ServerSpec
		opts mcpclient.Options
		want bool
	}{
		{"no login stored", bare, mcpclient.Options{OAuth: &logins}, true},
		{"no stored logins at all", bare, mcpclient.Options{}, false},
		{"a header of its own", withHeader, mcpclient.Options{OAuth: &logins}, false},
	} {
		needs, err := start(tc.spec, tc.opts)
		if !errors.Is(err, mcpclient.ErrAuthorization) || needs != tc.want {
			t.Errorf("%s: start %v, NeedsLogin %v; want authorization needed, NeedsLogin %v", tc.what, err, needs, tc.want)
		}
	}

	login, err := mcpclient.Authorize(ctx, endpoint, mcpclient.AuthorizeOptions{OnAuthorizationURL: browse(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := logins.Save(login); err != nil {
		t.Fatal(err)
	}
	if needs, err := start(bare, mcpclient.Options{OAuth: &logins}); err != nil || needs {
		t.Fatalf("start after the login: %v (NeedsLogin %v), want started", err, needs)
	}
	as.RevokeAccessTokens()
	as.RevokeRefreshTokens()
	if needs, err := start(bare, mcpclient.Options{OAuth: &logins}); !errors.Is(err, mcpclient.ErrAuthorization) || !needs {
		t.Fatalf("start with both tokens revoked: %v (NeedsLogin %v), want authorization needed and a login", err, needs)
	}
}

// A bearer header given by hand wins over a stored login.
func TestOAuthHeaderWins(t *testing.T) {
	as := oauthtest.NewServer(t, oauthtest.Options{AccessTTL: time.Hour})
	o := newOrdersServer(t)
	endpoint := as.ProtectedProxy(t, o.url)
	logins := mcpclient.Logins{Dir: t.TempDir()}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	login, err := mcpclient.Authorize(ctx, endpoint, mcpclient.AuthorizeOptions{OnAuthorizationURL: browse(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := logins.Save(login); err != nil {
		t.Fatal(err)
	}
	r, err := mcpclient.NewRemote(mcpclient.ServerSpec{URL: endpoint, Headers: map[string]string{"Authorization": "Bearer wrong"}},
		mcpclient.Options{OAuth: &logins})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := r.Start(ctx); !errors.Is(err, mcpclient.ErrAuthorization) {
		t.Fatalf("start with a wrong header: %v, want the header used and refused", err)
	}
}

// Servers mcp-confirm cannot log in to, and a browser step never done:
// typed errors, nothing to store.
func TestOAuthAuthorizeRefusals(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	open := newOrdersServer(t) // asks for no authorization
	if _, err := mcpclient.Authorize(ctx, open.url, mcpclient.AuthorizeOptions{}); !errors.Is(err, mcpclient.ErrNoOAuth) ||
		!strings.Contains(err.Error(), "does not ask for authorization") {
		t.Errorf("server without OAuth: %v", err)
	}
	bare := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="x"`)
		http.Error(w, "no", http.StatusUnauthorized)
	})
	srv := httptest.NewServer(bare)
	defer srv.Close()
	if _, err := mcpclient.Authorize(ctx, srv.URL+"/mcp", mcpclient.AuthorizeOptions{}); !errors.Is(err, mcpclient.ErrNoOAuth) ||
		!strings.Contains(err.Error(), "no protected-resource metadata") {
		t.Errorf("401 without metadata: %v", err)
	}
	for _, c := range []struct {
		opts oauthtest.Options
		want string
	}{
		{oauthtest.Options{NoPKCE: true}, "PKCE"},
		{oauthtest.Options{NoRegistration: true}, "registration"},
	} {
		as := oauthtest.NewServer(t, c.opts)
		endpoint := as.ProtectedProxy(t, open.url)
		if _, err := mcpclient.Authorize(ctx, endpoint, mcpclient.AuthorizeOptions{}); !errors.Is(err, mcpclient.ErrNoOAuth) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("authorization server without %s: %v", c.want, err)
		}
	}
	as := oauthtest.NewServer(t, oauthtest.Options{})
	endpoint := as.ProtectedProxy(t, open.url)
	shown := ""
	_, err := mcpclient.Authorize(ctx, endpoint, mcpclient.AuthorizeOptions{Wait: 200 * time.Millisecond,
		OnAuthorizationURL: func(u string) { shown = u }})
	if !errors.Is(err, mcpclient.ErrLoginWait) || !strings.HasPrefix(shown, as.URL+"/authorize?") {
		t.Errorf("browser step never done: %v (URL shown %q)", err, shown)
	}
}

// Logins are files of their own: mode 0600, refused when others can read
// them, and for their own URL only.
func TestLoginsFiles(t *testing.T) {
	logins := mcpclient.Logins{Dir: filepath.Join(t.TempDir(), "oauth")}
	const u = "https://orders.example.com/mcp"
	if _, err := logins.Load(u); !errors.Is(err, mcpclient.ErrNotLoggedIn) {
		t.Fatalf("load before any login: %v", err)
	}
	l := mcpclient.Login{URL: u, Issuer: "https://auth.example.com", ClientID: "c1"}
	l.Token.AccessToken = "at"
	if err := logins.Save(l); err != nil {
		t.Fatal(err)
	}
	if got, err := logins.Load(u); err != nil || got.ClientID != "c1" || got.Token.AccessToken != "at" {
		t.Fatalf("load: %+v %v", got, err)
	}
	if logins.Path(u) == logins.Path(u+"2") || !strings.HasPrefix(filepath.Base(logins.Path(u)), "orders.example.com-") {
		t.Errorf("paths %s, %s: want one per URL, named by host", logins.Path(u), logins.Path(u+"2"))
	}
	if entries, _ := os.ReadDir(logins.Dir); len(entries) != 2 {
		t.Errorf("%d files in the folder, want the login and its lock file (no temporary file left)", len(entries))
	}
	if _, err := os.Stat(logins.LockPath(u)); err != nil {
		t.Errorf("no lock file beside the login: %v", err)
	}
	if err := os.Chmod(logins.Path(u), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := logins.Load(u); !errors.Is(err, mcpclient.ErrLoginFileOpen) {
		t.Errorf("load of a world-readable file: %v", err)
	}
	if err := logins.Save(l); err != nil { // a new login replaces it, 0600 again
		t.Fatal(err)
	}
	if st, _ := os.Stat(logins.Path(u)); st.Mode().Perm() != 0o600 {
		t.Errorf("mode %04o after a new save, want 0600", st.Mode().Perm())
	}
}
