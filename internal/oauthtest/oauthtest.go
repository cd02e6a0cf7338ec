// Package oauthtest is a small, real OAuth 2.1 authorization server for
// tests, on loopback, as the MCP authorization spec wants one: metadata
// (RFC 8414), dynamic client registration (RFC 7591), the authorization
// code grant with PKCE S256 only, and the refresh_token grant with
// rotation; access tokens are short-lived and bound to the resource they
// were asked for (RFC 8707). /authorize asks nobody: it redirects straight
// back with a code, so a test plays the browser by fetching the URL.
//
// A refresh token is good for one refresh. One presented again after its
// use is taken for a stolen one, as OAuth 2.1 (§4.3.1) and the OAuth
// security BCP (RFC 9700 §4.14.2) have servers do: the request is refused
// and the whole grant (every access and refresh token descended from the
// one authorization code) is revoked, so that the client that refreshed
// first is logged out too.
//
// Protect wraps an MCP endpoint as a protected resource (RFC 9728): it
// serves the resource's metadata and answers 401 with a WWW-Authenticate
// resource_metadata challenge to a request without a valid token.
package oauthtest

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// Options configure a Server.
type Options struct {
	// AccessTTL is the lifetime the server gives its access tokens
	// (expires_in, whole seconds; at least 1s). Default 1s, so that a test
	// sees them expire. The server itself accepts one for Leeway longer,
	// as real servers allow for clock skew.
	AccessTTL time.Duration
	Leeway    time.Duration // default 2s
	// NoRegistration leaves out the registration endpoint.
	NoRegistration bool
	// NoPKCE leaves code_challenge_methods_supported out of the metadata.
	NoPKCE bool
	// RefreshDelay is how long the token endpoint takes to answer a
	// refresh_token grant, as a remote server over a network does: it
	// widens the window in which two clients refresh at once.
	RefreshDelay time.Duration
	// AuthorizationEndpointSuffix is put after "/authorize" in the
	// metadata's authorization_endpoint, as a hostile server may put
	// terminal escape sequences there for a client that prints the URL.
	// The server still answers /authorize.
	AuthorizationEndpointSuffix string
}

// Server is a running authorization server. Its counters say what clients
// did, for tests to check.
type Server struct {
	URL  string // the issuer, http://127.0.0.1:PORT
	opts Options

	mu       sync.Mutex
	clients  map[string][]string // client_id → redirect URIs
	secrets  map[string]string   // client_id → secret, for a confidential client added with AddClient
	codes    map[string]grant    // authorization codes, single use
	access   map[string]grant    // access token → its grant; expires
	refresh  map[string]grant    // refresh token → its grant; single use (rotated)
	used     map[string]string   // refresh token already used → its grant's family
	counts   Counts
	refusals []string // why the token endpoint refused, for test messages
	// tokenEndpoint, when set, is the token_endpoint the metadata names
	// instead of this server's own (SetTokenEndpoint).
	tokenEndpoint string
}

// Counts are what the server has done since it started.
type Counts struct {
	Registrations  int
	Authorizations int // codes issued
	Exchanges      int // codes exchanged for tokens
	Refreshes      int // refresh_token grants answered with new tokens
	Refused        int // token requests refused
	// Reuses are refresh_token grants with a refresh token already used
	// (refused, and their grant revoked): a client that refreshed twice
	// with one token, or two clients that refreshed at once.
	Reuses int
}

type grant struct {
	family    string // one per authorization code: the tokens it and its refreshes gave
	client    string
	redirect  string
	challenge string
	resource  string
	scope     string
	expires   time.Time
}

// NewServer starts an authorization server; it stops at the test's end.
func NewServer(t testing.TB, opts Options) *Server {
	t.Helper()
	if opts.AccessTTL < time.Second {
		opts.AccessTTL = time.Second
	}
	if opts.Leeway == 0 {
		opts.Leeway = 2 * time.Second
	}
	s := &Server{opts: opts, clients: map[string][]string{}, secrets: map[string]string{}, codes: map[string]grant{},
		access: map[string]grant{}, refresh: map[string]grant{}, used: map[string]string{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/oauth-authorization-server", s.metadata)
	if !opts.NoRegistration {
		mux.HandleFunc("POST /register", s.register)
	}
	mux.HandleFunc("GET /authorize", s.authorize)
	mux.HandleFunc("POST /token", s.token)
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	s.URL = ts.URL
	return s
}

// Counts returns what the server has done so far.
func (s *Server) Counts() Counts {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts
}

// Refusals are the reasons of the token requests refused so far.
func (s *Server) Refusals() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.refusals...)
}

// RevokeRefreshTokens makes every refresh token issued so far unusable, as
// when a refresh token expires: the next refresh is refused.
func (s *Server) RevokeRefreshTokens() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.refresh)
}

// RevokeAccessTokens makes every access token issued so far unusable
// before its time, as a server that restarted and forgot them does.
func (s *Server) RevokeAccessTokens() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.access)
}

// Valid reports whether token is a live access token for resource.
func (s *Server) Valid(token, resource string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	g, ok := s.access[token]
	return ok && time.Now().Before(g.expires.Add(s.opts.Leeway)) && strings.TrimSuffix(g.resource, "/") == strings.TrimSuffix(resource, "/")
}

// SetTokenEndpoint makes the metadata name u as the token endpoint from
// now on ("" for this server's own), as a misconfigured authorization
// server may name a plain http:// one on another host.
func (s *Server) SetTokenEndpoint(u string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tokenEndpoint = u
}

func (s *Server) metadata(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	token := s.tokenEndpoint
	s.mu.Unlock()
	if token == "" {
		token = s.URL + "/token"
	}
	md := map[string]any{
		"issuer":                                s.URL,
		"authorization_endpoint":                s.URL + "/authorize" + s.opts.AuthorizationEndpointSuffix,
		"token_endpoint":                        token,
		"response_types_supported":              []string{"code"},
		"grant_types_supported":                 []string{"authorization_code", "refresh_token"},
		"token_endpoint_auth_methods_supported": []string{"none"},
	}
	if !s.opts.NoRegistration {
		md["registration_endpoint"] = s.URL + "/register"
	}
	if !s.opts.NoPKCE {
		md["code_challenge_methods_supported"] = []string{"S256"}
	}
	writeJSON(w, http.StatusOK, md)
}

// AddClient registers a client beforehand, as an administrator does at an
// authorization server without dynamic registration; with a secret, the
// token endpoint asks for it (client_secret_post or client_secret_basic).
func (s *Server) AddClient(id, secret string, redirects ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clients[id] = redirects
	if secret != "" {
		s.secrets[id] = secret
	}
}

// clientSecretOK: the request proves the client's secret, if it has one.
func (s *Server) clientSecretOK(r *http.Request, client string) bool {
	want, ok := s.secrets[client]
	if !ok {
		return true
	}
	if id, secret, basic := r.BasicAuth(); basic {
		return id == client && secret == want
	}
	return r.PostForm.Get("client_secret") == want
}

func (s *Server) register(w http.ResponseWriter, r *http.Request) {
	var req struct {
		RedirectURIs []string `json:"redirect_uris"`
		ClientName   string   `json:"client_name"`
		AuthMethod   string   `json:"token_endpoint_auth_method"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.RedirectURIs) == 0 {
		oauthError(w, http.StatusBadRequest, "invalid_client_metadata", "redirect_uris is required")
		return
	}
	for _, u := range req.RedirectURIs {
		if p, err := url.Parse(u); err != nil || p.Scheme != "http" || (p.Hostname() != "127.0.0.1" && p.Hostname() != "localhost") {
			oauthError(w, http.StatusBadRequest, "invalid_redirect_uri", "only loopback redirect URIs here")
			return
		}
	}
	id := "client-" + random()
	s.mu.Lock()
	s.clients[id] = req.RedirectURIs
	s.counts.Registrations++
	s.mu.Unlock()
	writeJSON(w, http.StatusCreated, map[string]any{
		"client_id": id, "client_id_issued_at": time.Now().Unix(), "client_name": req.ClientName,
		"redirect_uris": req.RedirectURIs, "token_endpoint_auth_method": "none",
		"grant_types": []string{"authorization_code", "refresh_token"}, "response_types": []string{"code"},
	})
}

// authorize approves at once (no user here) and redirects back with a
// code. Errors a client could cause are answered 400, not redirected: the
// redirect URI is not known to be the client's until it is checked.
func (s *Server) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	client, redirect := q.Get("client_id"), q.Get("redirect_uri")
	s.mu.Lock()
	uris, known := s.clients[client]
	s.mu.Unlock()
	switch {
	case !known:
		http.Error(w, "unknown client_id", http.StatusBadRequest)
		return
	case !contains(uris, redirect):
		http.Error(w, "redirect_uri not registered for this client", http.StatusBadRequest)
		return
	case q.Get("response_type") != "code":
		http.Error(w, "response_type must be code", http.StatusBadRequest)
		return
	case q.Get("code_challenge") == "" || q.Get("code_challenge_method") != "S256":
		http.Error(w, "PKCE with S256 is required", http.StatusBadRequest)
		return
	case q.Get("resource") == "":
		http.Error(w, "resource (RFC 8707) is required", http.StatusBadRequest)
		return
	}
	code := "code-" + random()
	s.mu.Lock()
	s.codes[code] = grant{client: client, redirect: redirect, challenge: q.Get("code_challenge"),
		resource: q.Get("resource"), scope: q.Get("scope"), expires: time.Now().Add(time.Minute)}
	s.counts.Authorizations++
	s.mu.Unlock()
	back, _ := url.Parse(redirect)
	bq := back.Query()
	bq.Set("code", code)
	bq.Set("state", q.Get("state"))
	bq.Set("iss", s.URL)
	back.RawQuery = bq.Encode()
	http.Redirect(w, r, back.String(), http.StatusFound)
}

func (s *Server) token(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		oauthError(w, http.StatusBadRequest, "invalid_request", "not a form")
		return
	}
	f := r.PostForm
	if f.Get("grant_type") == "refresh_token" && s.opts.RefreshDelay > 0 {
		time.Sleep(s.opts.RefreshDelay) // before the lock: refreshes overlap
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	refuse := func(code, why string) {
		s.counts.Refused++
		s.refusals = append(s.refusals, code+": "+why)
		oauthError(w, http.StatusBadRequest, code, why)
	}
	client := f.Get("client_id")
	if client == "" {
		client, _, _ = r.BasicAuth()
		f.Set("client_id", client)
	}
	if !s.clientSecretOK(r, client) {
		refuse("invalid_client", "client authentication failed")
		return
	}
	var g grant
	switch f.Get("grant_type") {
	case "authorization_code":
		c, ok := s.codes[f.Get("code")]
		delete(s.codes, f.Get("code"))
		switch {
		case !ok || time.Now().After(c.expires):
			refuse("invalid_grant", "unknown, used or expired code")
			return
		case c.client != f.Get("client_id"):
			refuse("invalid_grant", "code issued to another client")
			return
		case c.redirect != f.Get("redirect_uri"):
			refuse("invalid_grant", "redirect_uri differs from the authorization request's")
			return
		case challenge(f.Get("code_verifier")) != c.challenge:
			refuse("invalid_grant", "PKCE code_verifier does not match the code_challenge")
			return
		case f.Get("resource") != "" && f.Get("resource") != c.resource:
			refuse("invalid_target", "resource differs from the authorization request's")
			return
		}
		g = c
		g.family = "grant-" + random()
		s.counts.Exchanges++
	case "refresh_token":
		presented := f.Get("refresh_token")
		if family, reused := s.used[presented]; reused {
			s.counts.Reuses++
			s.revokeFamily(family)
			refuse("invalid_grant", "refresh token already used; its grant is revoked")
			return
		}
		old, ok := s.refresh[presented]
		delete(s.refresh, presented) // rotated: single use
		if ok {
			s.used[presented] = old.family
		}
		switch {
		case !ok:
			refuse("invalid_grant", "unknown, used or revoked refresh token")
			return
		case old.client != f.Get("client_id"):
			refuse("invalid_grant", "refresh token issued to another client")
			return
		case f.Get("resource") != "" && f.Get("resource") != old.resource:
			refuse("invalid_target", "resource differs from the grant's")
			return
		}
		g = old
		s.counts.Refreshes++
	default:
		refuse("unsupported_grant_type", "grant_type "+f.Get("grant_type"))
		return
	}
	access, refresh := "at-"+random(), "rt-"+random()
	g.expires = time.Now().Add(s.opts.AccessTTL)
	s.access[access] = g
	s.refresh[refresh] = g
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, map[string]any{
		"access_token": access, "token_type": "Bearer", "expires_in": int(s.opts.AccessTTL / time.Second),
		"refresh_token": refresh, "scope": g.scope,
	})
}

// revokeFamily revokes every access and refresh token of the grant
// family. s.mu is held.
func (s *Server) revokeFamily(family string) {
	for _, m := range []map[string]grant{s.access, s.refresh} {
		for tok, g := range m {
			if g.family == family {
				delete(m, tok)
			}
		}
	}
}

// MetadataPath is where Protect serves the metadata of a resource at path
// (RFC 9728 §3.1: the well-known segment goes before the resource's path).
func MetadataPath(path string) string {
	return "/.well-known/oauth-protected-resource" + path
}

// Protect makes next, an MCP endpoint at path, a protected resource whose
// tokens come from s: it serves the resource's metadata, and answers 401
// with a WWW-Authenticate challenge naming it to any request on path that
// carries no live token for the resource (http://HOST{path}).
func (s *Server) Protect(next http.Handler, path string) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+MetadataPath(path), func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{
			"resource":                 "http://" + r.Host + path,
			"authorization_servers":    []string{s.URL},
			"bearer_methods_supported": []string{"header"},
		})
	})
	mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
		token, hasToken := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !hasToken || !s.Valid(token, "http://"+r.Host+path) {
			challenge := fmt.Sprintf(`Bearer resource_metadata="http://%s%s"`, r.Host, MetadataPath(path))
			if hasToken {
				challenge += `, error="invalid_token", error_description="the access token expired or is not for this resource"`
			}
			w.Header().Set("WWW-Authenticate", challenge)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
	return mux
}

// ProtectedProxy runs a loopback reverse proxy to upstream (an MCP
// endpoint URL, such as the demo server's over HTTP) that is protected by
// s, and returns its endpoint's URL. It stops at the test's end.
func (s *Server) ProtectedProxy(t testing.TB, upstream string) string {
	t.Helper()
	target, err := url.Parse(upstream)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: target.Scheme, Host: target.Host})
	ts := httptest.NewServer(s.Protect(rp, target.Path))
	t.Cleanup(ts.Close)
	return ts.URL + target.Path
}

func challenge(verifier string) string {
	sum := sha256.Sum256([]byte(verifier))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

func random() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func oauthError(w http.ResponseWriter, status int, code, desc string) {
	writeJSON(w, status, map[string]string{"error": code, "error_description": desc})
}
