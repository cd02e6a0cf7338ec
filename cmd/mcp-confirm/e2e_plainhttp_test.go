package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcp-confirm/mcp-confirm/internal/oauthtest"
)

// nonLoopbackIP is an IPv4 address of this machine that is not loopback,
// for a server a test reaches as "another host" for real; "" when the
// machine has none.
func nonLoopbackIP(t *testing.T) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return ""
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() && !n.IP.IsLinkLocalUnicast() {
			return n.IP.String()
		}
	}
	return ""
}

// countingServer serves h on ip (a port of its own) and counts every
// request that reaches it; it stops at the test's end.
type countingServer struct {
	URL string // http://IP:PORT
	n   atomic.Int64
}

func (c *countingServer) requests() int64 { return c.n.Load() }

func newCountingServer(t *testing.T, ip string, h http.Handler) *countingServer {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatalf("listen on %s: %v", ip, err)
	}
	c := &countingServer{URL: "http://" + ln.Addr().String()}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.n.Add(1)
		if h == nil {
			http.Error(w, "nothing here", http.StatusNotFound)
			return
		}
		h.ServeHTTP(w, r)
	}), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })
	return c
}

// A remote server on another host over plain http://: a bearer header,
// a header from the environment, a user name and password in the URL are
// each refused before anything is sent (exit 2, two lines naming the URL
// and what to do, nothing journaled, the server saw no request), by call,
// tools and proxy alike. The same server with no credential is used: its
// tools are listed.
func TestPlainHTTPRemoteWithCredentialsRefused(t *testing.T) {
	ip := nonLoopbackIP(t)
	if ip == "" {
		t.Skip("this machine has no non-loopback address to serve plain http on")
	}
	w := newWorld(t, t.TempDir())
	demo, err := url.Parse(startHTTPDemo(t, w))
	if err != nil {
		t.Fatal(err)
	}
	// The demo answers only its own Host (DNS rebinding protection): the
	// relay names it.
	relay := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) {
		pr.SetURL(&url.URL{Scheme: "http", Host: demo.Host})
	}}
	srv := newCountingServer(t, ip, relay)
	endpoint := srv.URL + demo.Path
	withUser := strings.Replace(endpoint, "http://", "http://ann:pa55word@", 1)
	t.Setenv("MCP_CONFIRM_TEST_HEADER", "X-Api-Key: k3y")
	args := `{"item":"widget","quantity":1,"buyer":"bob"}`
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"h","version":"1"}}}` + "\n"

	for _, c := range []struct {
		name  string
		stdin string
		args  []string
		shown string // what the message names
	}{
		{"call with a bearer header", "", []string{"call", "create_order", "--args", args, "--url", endpoint, "--header", "Authorization: Bearer t0ken"}, endpoint},
		{"tools with a header from the environment", "", []string{"tools", "--url", endpoint, "--header-env", "MCP_CONFIRM_TEST_HEADER"}, endpoint},
		{"call with a password in the URL", "", []string{"call", "create_order", "--args", args, "--url", withUser}, strings.Replace(withUser, "pa55word", "***", 1)},
		{"proxy with a bearer header", init, []string{"proxy", "--url", endpoint, "--header", "Authorization: Bearer t0ken"}, endpoint},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := cliIn(t, w.bin, w.dir, c.stdin, w.withDB(c.args)...)
			wantExit(t, r, exitBadInput, c.name)
			for _, want := range []string{c.shown, "plain http://", "https://", "loopback"} {
				if !strings.Contains(r.stderr, want) {
					t.Errorf("stderr does not say %q:\n%s", want, r.stderr)
				}
			}
			if n := len(strings.Split(strings.TrimSpace(r.stderr), "\n")); n > 2 {
				t.Errorf("%d lines on stderr, want one or two:\n%s", n, r.stderr)
			}
			if strings.Contains(r.stderr+r.stdout, "pa55word") || strings.Contains(r.stderr+r.stdout, "t0ken") {
				t.Errorf("the credential is printed:\n%s", r)
			}
			if n := srv.requests(); n != 0 {
				t.Fatalf("the server on %s saw %d requests, want none", ip, n)
			}
		})
	}
	if calls := w.list(); len(calls) != 0 {
		t.Errorf("journal holds %d calls after the refusals, want none", len(calls))
	}

	// No credential: plain http to another host may be used (README).
	r := w.run("tools", "--url", endpoint)
	wantExit(t, r, exitOK, "tools over plain http without a credential")
	if !strings.Contains(r.stdout, "create_order") || srv.requests() == 0 {
		t.Errorf("tools did not list the server's tools through %s (%d requests):\n%s", endpoint, srv.requests(), r)
	}
}

// login to a server whose authorization server's metadata names a token
// endpoint over plain http:// on another host: refused before anything
// is registered or authorized (exit 5, naming the endpoint), and the
// endpoint, which counts what reaches it, saw nothing: no code, no PKCE
// verifier. A token endpoint named so after the login is refused at the
// refresh too: the refresh token is not sent, and the call is not made.
func TestOAuthPlainHTTPTokenEndpointRefused(t *testing.T) {
	ip := nonLoopbackIP(t)
	if ip == "" {
		t.Skip("this machine has no non-loopback address to serve plain http on")
	}
	w := newWorld(t, t.TempDir())
	as := oauthtest.NewServer(t, oauthtest.Options{AccessTTL: time.Second})
	endpoint := as.ProtectedProxy(t, startHTTPDemo(t, w))
	tokenSrv := newCountingServer(t, ip, nil)
	plainToken := tokenSrv.URL + "/token"
	as.SetTokenEndpoint(plainToken)

	l := startLogin(t, w, "--url", endpoint, "--wait", "20s")
	select {
	case u, ok := <-l.lines:
		if ok {
			// The old way: the URL is printed; play the browser, so that
			// the code goes where the metadata says.
			if resp, err := http.Get(u); err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("login neither printed a URL nor ended in 30s:\n%s", l.stderr.String())
	}
	r := l.wait(t)
	wantExit(t, r, exitUnavailable, "login with a plain http token endpoint")
	for _, want := range []string{plainToken, "token_endpoint", "https://"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr does not say %q:\n%s", want, r.stderr)
		}
	}
	if n := len(strings.Split(strings.TrimSpace(r.stderr), "\n")); n > 2 {
		t.Errorf("%d lines on stderr, want one or two:\n%s", n, r.stderr)
	}
	if n := tokenSrv.requests(); n != 0 {
		t.Fatalf("the plain http token endpoint saw %d requests, want none", n)
	}
	if c := as.Counts(); c.Registrations != 0 || c.Authorizations != 0 {
		t.Errorf("authorization server saw %+v, want no registration and no authorization", c)
	}
	if files, _ := filepath.Glob(filepath.Join(w.dir, "state", "mcp-confirm", "oauth", "*.json")); len(files) != 0 {
		t.Errorf("login files %v, want none", files)
	}

	// A login made while the endpoint was https-or-loopback, then the
	// metadata names a plain one: the refresh is refused, nothing sent.
	as.SetTokenEndpoint("")
	wantExit(t, w.login(t, endpoint), exitOK, "login")
	as.SetTokenEndpoint(plainToken)
	_, expires := w.tokenFile(t)
	time.Sleep(time.Until(expires) + 50*time.Millisecond)
	r = w.run("call", "create_order", "--args", `{"item":"widget","quantity":1,"buyer":"bob"}`, "--url", endpoint)
	wantExit(t, r, exitUnavailable, "a call whose refresh would go over plain http")
	if n := tokenSrv.requests(); n != 0 {
		t.Fatalf("the plain http token endpoint saw %d requests (the refresh token), want none", n)
	}
	if n := totalOrders(t, w.db()); n != 0 {
		t.Errorf("%d orders, want none", n)
	}
}

// OAuth discovery that a server redirects to another origin (its
// protected-resource metadata, or its authorization server's metadata,
// answered with a 302 to another host:port) is refused, naming both
// origins; nothing is registered.
func TestOAuthDiscoveryCrossOriginRedirectRefused(t *testing.T) {
	w := newWorld(t, t.TempDir())
	as := oauthtest.NewServer(t, oauthtest.Options{})
	demo := startHTTPDemo(t, w)
	protected := as.ProtectedProxy(t, demo)
	pu, err := url.Parse(protected)
	if err != nil {
		t.Fatal(err)
	}
	// other serves, at another origin, the metadata front would: for the
	// resource at front, naming front as its authorization server, whose
	// endpoints are as's. Followed, the redirect would lead to a login.
	var frontURL atomic.Value // the running case's front server
	asMetadata := func(issuer string) string {
		return fmt.Sprintf(`{"issuer":%q,"authorization_endpoint":%q,"token_endpoint":%q,"registration_endpoint":%q,`+
			`"response_types_supported":["code"],"code_challenge_methods_supported":["S256"],"token_endpoint_auth_methods_supported":["none"]}`,
			issuer, as.URL+"/authorize", as.URL+"/token", as.URL+"/register")
	}
	other := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		front, _ := frontURL.Load().(string)
		rw.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case oauthtest.MetadataPath(pu.Path):
			fmt.Fprintf(rw, `{"resource":%q,"authorization_servers":[%q]}`, front+pu.Path, front)
		case "/.well-known/oauth-authorization-server":
			fmt.Fprint(rw, asMetadata(front))
		default:
			http.NotFound(rw, r)
		}
	}))
	t.Cleanup(other.Close)

	for _, c := range []struct{ name, redirect string }{
		{"protected-resource metadata", oauthtest.MetadataPath(pu.Path)},
		{"authorization-server metadata", "/.well-known/oauth-authorization-server"},
	} {
		t.Run(c.name, func(t *testing.T) {
			// front is the MCP server: it forwards to the protected proxy,
			// but answers the metadata's well-known place with a redirect.
			target, _ := url.Parse(protected)
			rp := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: target.Host})
			// Made, then started: its handler reads front.URL.
			var front *httptest.Server
			front = httptest.NewUnstartedServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
				switch {
				case r.URL.Path == c.redirect:
					http.Redirect(rw, r, other.URL+r.URL.Path, http.StatusFound)
				case r.URL.Path == pu.Path && r.Header.Get("Authorization") == "":
					meta := front.URL + oauthtest.MetadataPath(pu.Path)
					rw.Header().Set("WWW-Authenticate", `Bearer resource_metadata="`+meta+`"`)
					http.Error(rw, "unauthorized", http.StatusUnauthorized)
				case r.URL.Path == oauthtest.MetadataPath(pu.Path):
					rw.Header().Set("Content-Type", "application/json")
					fmt.Fprintf(rw, `{"resource":%q,"authorization_servers":[%q]}`, front.URL+pu.Path, front.URL)
				case r.URL.Path == "/.well-known/oauth-authorization-server":
					rw.Header().Set("Content-Type", "application/json")
					fmt.Fprint(rw, asMetadata(front.URL))
				default:
					rp.ServeHTTP(rw, r)
				}
			}))
			front.Start()
			t.Cleanup(front.Close)
			frontURL.Store(front.URL)
			endpoint := front.URL + pu.Path

			l := startLogin(t, w, "--url", endpoint, "--wait", "3s")
			select {
			case u, ok := <-l.lines:
				if ok {
					t.Errorf("login printed an authorization URL %q after a cross-origin redirect", u)
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("login neither printed a URL nor ended in 30s:\n%s", l.stderr.String())
			}
			r := l.wait(t)
			wantExit(t, r, exitUnavailable, "login redirected across origins")
			for _, want := range []string{strings.TrimPrefix(front.URL, "http://"), strings.TrimPrefix(other.URL, "http://"), "another origin"} {
				if !strings.Contains(r.stderr, want) {
					t.Errorf("stderr does not name %q:\n%s", want, r.stderr)
				}
			}
			if n := len(strings.Split(strings.TrimSpace(r.stderr), "\n")); n > 2 {
				t.Errorf("%d lines on stderr, want one or two:\n%s", n, r.stderr)
			}
		})
	}
	if c := as.Counts(); c.Registrations != 0 {
		t.Errorf("authorization server saw %+v, want no registration", c)
	}
}
