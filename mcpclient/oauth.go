package mcpclient

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// OAuth 2.1 as the MCP authorization spec has it: the server names its
// authorization server in its protected-resource metadata (RFC 9728); that
// server publishes its own metadata (RFC 8414), registers the client
// (RFC 7591) and grants a token for the authorization code, with PKCE, to
// the loopback redirect. mcp-go's OAuthHandler does the registration, the
// authorization URL, the code exchange, the bearer header and the refresh;
// this file checks what it would otherwise assume (it falls back to
// guessed endpoints when a server publishes no metadata), runs the
// loopback redirect, and keeps what a login yields in a file of its own.

// ErrNoOAuth: the server does not offer an OAuth login mcp-confirm can do
// (no protected-resource or authorization-server metadata, no dynamic
// registration and no client id given, no PKCE). Nothing was stored.
var ErrNoOAuth = errors.New("no OAuth login offered")

// ErrLoginDenied: the authorization server said no to the authorization
// request (the user declined, say): its error came to the redirect.
var ErrLoginDenied = errors.New("authorization denied")

// ErrLoginWait: the browser step was not completed in time.
var ErrLoginWait = errors.New("the browser step was not completed in time")

// ErrNotLoggedIn: no login is stored for the server.
var ErrNotLoggedIn = errors.New("not logged in")

// ErrLoginFileOpen: a login file others can read or write is refused, as
// ssh refuses such a key.
var ErrLoginFileOpen = errors.New("login file readable or writable by others")

// ErrLoginBusy: another process held a login's lock for longer than
// Logins.LockWait; nothing was refreshed or written.
var ErrLoginBusy = errors.New("login locked by another process")

// Login is what a login to one server yields and Logins keeps: the client
// the authorization server registered and its tokens.
type Login struct {
	URL string `json:"url"` // the MCP endpoint, as given to login
	// ResourceMetadataURL is the protected-resource metadata's URL when it
	// must be given to discovery (the server named it in its 401, or it is
	// at the origin's root); empty: at the well-known URL built from URL.
	ResourceMetadataURL string          `json:"resource_metadata_url,omitempty"`
	Issuer              string          `json:"issuer"`
	ClientID            string          `json:"client_id"`
	ClientSecret        string          `json:"client_secret,omitempty"`
	ClientAuthMethod    string          `json:"token_endpoint_auth_method,omitempty"`
	Scopes              []string        `json:"scopes,omitempty"`
	Token               transport.Token `json:"token"`
	SavedAt             time.Time       `json:"saved_at"`
}

// Logins is the folder of stored logins, one file per server URL, mode
// 0600 in a folder of mode 0700.
//
// Several processes use one login (a proxy per host, the console, a CLI
// call), and an authorization server may rotate its refresh tokens and
// revoke the whole grant when a used one comes back: two processes that
// refreshed at once would log the user out. So whatever writes a login
// file (a refresh, Save, expireToken) first takes an exclusive lock on a
// file beside it (LockPath, flock), and reads the login again under it.
type Logins struct {
	Dir string
	// LockWait bounds the wait for a login's lock, which another process
	// holds while it refreshes (at most refreshTimeout, normally a round
	// trip); 0: DefaultLockWait. Once it runs out: ErrLoginBusy.
	LockWait time.Duration
}

// DefaultLockWait is Logins.LockWait's default: longer than a refresh
// that runs to its timeout.
const DefaultLockWait = refreshTimeout + 15*time.Second

// refreshTimeout bounds a refresh of a login's token, once its lock is
// taken (mcp-go bounds its own refreshes so).
const refreshTimeout = 30 * time.Second

// LockPath is the lock file of serverURL's login, beside it. It is made
// on first use and never removed (a process that removed it could leave
// two others each holding a lock on a file of that name); what is in it
// does not matter.
func (l Logins) LockPath(serverURL string) string { return l.Path(serverURL) + ".lock" }

// lock takes serverURL's login lock, waiting for another process's (or
// another session's) refresh to end, up to LockWait or ctx's end; the
// lock is released by calling unlock. The lock is an flock on LockPath,
// which the system releases when its holder dies: a killed process
// leaves nothing stale.
func (l Logins) lock(ctx context.Context, serverURL string) (unlock func(), err error) {
	path := l.LockPath(serverURL)
	if err := os.MkdirAll(l.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("lock login: %w", err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock login: %w", err) // the *PathError names the file
	}
	wait := l.LockWait
	if wait <= 0 {
		wait = DefaultLockWait
	}
	deadline := time.Now().Add(wait)
	for pause := 2 * time.Millisecond; ; pause = min(2*pause, 50*time.Millisecond) {
		ok, err := tryLock(f)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("lock login %s: %w", path, err)
		}
		if ok {
			return func() { f.Close() }, nil // the lock goes with the file
		}
		left := time.Until(deadline)
		if left <= 0 {
			f.Close()
			return nil, fmt.Errorf("%w: %s still locked after %s (another mcp-confirm's token refresh hangs?)", ErrLoginBusy, path, wait)
		}
		timer := time.NewTimer(min(pause, left))
		select {
		case <-ctx.Done():
			timer.Stop()
			f.Close()
			return nil, fmt.Errorf("wait for the login lock %s: %w", path, ctx.Err())
		case <-timer.C:
		}
	}
}

// Path is the file of serverURL's login: its host, for a person, and a
// hash of the whole URL, so that two endpoints on one host do not share.
func (l Logins) Path(serverURL string) string {
	host := "server"
	if u, err := url.Parse(serverURL); err == nil && u.Host != "" {
		host = u.Host
	}
	safe := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' {
			return r
		}
		return '_'
	}, host)
	sum := sha256.Sum256([]byte(serverURL))
	return filepath.Join(l.Dir, safe+"-"+hex.EncodeToString(sum[:8])+".json")
}

// Load reads serverURL's login: ErrNotLoggedIn when there is none.
func (l Logins) Load(serverURL string) (Login, error) {
	path := l.Path(serverURL)
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Login{}, fmt.Errorf("%w to %s", ErrNotLoggedIn, serverURL)
	}
	if err != nil {
		return Login{}, fmt.Errorf("read login %s: %w", path, err)
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Mode().Perm()&0o077 != 0 {
		return Login{}, fmt.Errorf("%s: %w (mode %04o): chmod 600 it, or log in again", path, ErrLoginFileOpen, st.Mode().Perm())
	}
	var login Login
	if err := json.NewDecoder(io.LimitReader(f, 1<<20)).Decode(&login); err != nil {
		return Login{}, fmt.Errorf("read login %s: %w", path, err)
	}
	if login.URL != serverURL {
		return Login{}, fmt.Errorf("%w to %s (%s is for %s)", ErrNotLoggedIn, serverURL, path, login.URL)
	}
	return login, nil
}

// Save writes login atomically (a new file renamed over the old one, both
// mode 0600): a reader sees the old login or the new, never half of one.
// It takes the login's lock, so that a refresh another process is making
// does not put its token into this new login.
func (l Logins) Save(login Login) error {
	unlock, err := l.lock(context.Background(), login.URL)
	if err != nil {
		return fmt.Errorf("save login: %w", err)
	}
	defer unlock()
	return l.save(login)
}

// save is Save with the login's lock already held.
func (l Logins) save(login Login) error {
	if err := os.MkdirAll(l.Dir, 0o700); err != nil {
		return fmt.Errorf("save login: %w", err)
	}
	login.SavedAt = time.Now().UTC()
	data, err := json.MarshalIndent(login, "", "  ")
	if err != nil {
		return fmt.Errorf("save login: %w", err)
	}
	path := l.Path(login.URL)
	tmp, err := os.CreateTemp(l.Dir, ".login-*.tmp") // mode 0600
	if err != nil {
		return fmt.Errorf("save login: %w", err)
	}
	defer os.Remove(tmp.Name()) // a no-op once renamed
	err = tmp.Chmod(0o600)      // whatever the umask made of it
	if err == nil {
		_, err = tmp.Write(append(data, '\n'))
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("save login %s: %w", path, err)
	}
	if d, err := os.Open(l.Dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}

// oauthFor is the OAuth configuration for a session with serverURL when a
// login is stored for it, and its token store; ok false when there is
// none. The token is read from the file at each request, so that a
// refresh by another process is seen, and refreshed under the login's
// lock (loginTokens.GetToken). The caller gives the store the OAuth
// handler mcp-go makes of cfg (loginTokens.handler).
func (l Logins) oauthFor(serverURL string) (cfg transport.OAuthConfig, tokens *loginTokens, ok bool, err error) {
	login, err := l.Load(serverURL)
	if errors.Is(err, ErrNotLoggedIn) {
		return cfg, nil, false, nil
	}
	if err != nil {
		return cfg, nil, false, err
	}
	tokens = &loginTokens{logins: l, url: serverURL}
	return transport.OAuthConfig{
		ClientID: login.ClientID, ClientSecret: login.ClientSecret, TokenEndpointAuthMethod: login.ClientAuthMethod,
		Scopes: login.Scopes, PKCEEnabled: true, ProtectedResourceMetadataURL: login.ResourceMetadataURL,
		TokenStore: tokens,
		HTTPClient: discoveryClient(nil),
	}, tokens, true, nil
}

// loginRefusedError: the handshake was refused although a login was used.
type loginRefusedError struct{ err error }

func (e *loginRefusedError) Error() string { return e.err.Error() }
func (e *loginRefusedError) Unwrap() error { return e.err }

// expireToken marks serverURL's stored access token expired, so that the
// next request refreshes it; false when that cannot help (no login, no
// refresh token, or it is expired already: its refresh was just refused).
// It holds the login's lock: written back without it, the login it read
// could undo another process's refresh, putting back a spent refresh
// token.
func (l *Logins) expireToken(serverURL string) bool {
	if l == nil {
		return false
	}
	unlock, err := l.lock(context.Background(), serverURL)
	if err != nil {
		return false
	}
	defer unlock()
	login, err := l.Load(serverURL)
	if err != nil || login.Token.RefreshToken == "" || due(login.Token, time.Now()) {
		return false
	}
	login.Token.ExpiresAt = time.Now().Add(-time.Minute)
	return l.save(login) == nil
}

// loginTokens is mcp-go's TokenStore over one stored login.
//
// mcp-go's OAuthHandler asks it for the token before each request and,
// when that token has expired, refreshes it and hands the new one to
// SaveToken. Its refresh is shared among the callers of one handler, but
// nothing serializes it between processes, and between its reading the
// store and its saving there is a round trip to the authorization server.
// So GetToken does the refresh itself, before mcp-go would: when the
// token is due, it takes the login's lock, reads the login again (another
// process may have refreshed it meanwhile: then that token is the
// answer), and otherwise refreshes through the handler's RefreshToken,
// which saves through SaveToken, the lock still held. GetToken never
// hands mcp-go a token it would refresh itself: one due comes back
// refreshed, or with no refresh token (mcp-go then says authorization
// is required), or not at all.
type loginTokens struct {
	logins Logins
	url    string
	// handler is the session's OAuthHandler, which mcp-go makes of the
	// OAuthConfig holding this store: set before the first request.
	handler *transport.OAuthHandler
}

// GetToken returns the stored token, refreshed first when it is due: a
// quarter of its life before it expires, at most 30s, so that it is not
// refused on the way. It is given to mcp-go due that much early.
func (s *loginTokens) GetToken(ctx context.Context) (*transport.Token, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	tok, err := s.stored()
	if err != nil {
		return nil, err
	}
	if !due(tok, time.Now()) || tok.RefreshToken == "" {
		return early(tok), nil
	}
	if s.handler == nil {
		return nil, errors.New("refresh the login's token: no OAuth handler") // a wiring mistake
	}
	unlock, err := s.logins.lock(ctx, s.url)
	if err != nil {
		return nil, fmt.Errorf("refresh the login's token: %w", err)
	}
	defer unlock()
	if tok, err = s.stored(); err != nil {
		return nil, err
	}
	if !due(tok, time.Now()) || tok.RefreshToken == "" {
		return early(tok), nil // refreshed by another process meanwhile, or a new login
	}
	// The refresh runs on a context of its own: a caller that gave up
	// once the server had rotated the refresh token would lose the new one.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), refreshTimeout)
	defer cancel()
	// The refresh token (and a client secret) go to the token endpoint
	// the authorization server's metadata names now, which may have
	// changed since the login.
	md, err := s.handler.GetServerMetadata(rctx)
	if err != nil {
		return nil, fmt.Errorf("refresh the login's token: %w", err)
	}
	if err := CheckCredentialsURL(md.TokenEndpoint, "the refresh token"); err != nil {
		return nil, fmt.Errorf("refresh the login's token: %w", err)
	}
	fresh, err := s.handler.RefreshToken(rctx, tok.RefreshToken)
	if err != nil {
		// As mcp-go's own refresh: a refused refresh means logging in again.
		return nil, fmt.Errorf("%w: refresh the login's token: %w", transport.ErrNoToken, err)
	}
	return early(*fresh), nil
}

// stored is the login's token as stored; ErrNoToken when there is none.
func (s *loginTokens) stored() (transport.Token, error) {
	login, err := s.logins.Load(s.url)
	if errors.Is(err, ErrNotLoggedIn) {
		return transport.Token{}, fmt.Errorf("%w: %w", transport.ErrNoToken, err)
	}
	if err != nil {
		return transport.Token{}, err
	}
	if login.Token.AccessToken == "" {
		return transport.Token{}, transport.ErrNoToken
	}
	return login.Token, nil
}

// due: tok should be refreshed now, being within its refresh margin of
// its expiry (a token without expiry never is).
func due(tok transport.Token, now time.Time) bool {
	return !tok.ExpiresAt.IsZero() && !now.Before(tok.ExpiresAt.Add(-refreshMargin(tok.ExpiresIn)))
}

// early is tok for mcp-go: a copy expiring at its refresh margin.
func early(tok transport.Token) *transport.Token {
	if !tok.ExpiresAt.IsZero() {
		tok.ExpiresAt = tok.ExpiresAt.Add(-refreshMargin(tok.ExpiresIn))
	}
	return &tok
}

func refreshMargin(expiresIn int64) time.Duration {
	return min(30*time.Second, time.Duration(expiresIn)*time.Second/4)
}

// SaveToken keeps a refreshed token in the login's file. mcp-go calls it
// at the end of the refresh GetToken makes, which holds the login's lock;
// so it does not take the lock (a second flock of this process would wait
// on the first).
func (s *loginTokens) SaveToken(ctx context.Context, tok *transport.Token) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	login, err := s.logins.Load(s.url)
	if err != nil {
		return err
	}
	login.Token = *tok
	return s.logins.save(login)
}

// AuthorizeOptions configure Authorize.
type AuthorizeOptions struct {
	ClientName string   // client_name at registration; default "mcp-confirm"
	Scopes     []string // default: the scope of the server's challenge, else none
	// Wait bounds the browser step: from the authorization URL's showing to
	// the redirect's coming back. Default 5 minutes.
	Wait time.Duration
	// OnAuthorizationURL is given the URL the user opens in a browser, once
	// the loopback redirect listens.
	OnAuthorizationURL func(string)
	HTTPClient         *http.Client // discovery, registration, tokens; default 30s timeout
	// ClientID, when set, is a client registered beforehand with the
	// authorization server (one without dynamic registration, or a host
	// config's oauth.clientId): no registration is made. ClientSecret is
	// its secret, "" for a public client.
	ClientID, ClientSecret string
	// CallbackPort, when not 0, is the loopback port of the redirect
	// (http://127.0.0.1:PORT/callback), for a client registered with that
	// exact redirect URI; 0 takes a free port.
	CallbackPort int
}

// Authorize logs in to the MCP server at serverURL: it finds the server's
// authorization server, registers mcp-confirm with it, waits for the
// authorization code on a loopback redirect (127.0.0.1, a free port) and
// exchanges it, with PKCE, for tokens. The Login it returns is for
// Logins.Save; nothing is stored here.
func Authorize(ctx context.Context, serverURL string, o AuthorizeOptions) (Login, error) {
	if o.ClientName == "" {
		o.ClientName = "mcp-confirm"
	}
	if o.Wait <= 0 {
		o.Wait = 5 * time.Minute
	}
	// The login's token goes to serverURL with every request.
	if err := CheckCredentialsURL(serverURL, "the login's bearer token"); err != nil {
		return Login{}, err
	}
	o.HTTPClient = discoveryClient(o.HTTPClient)
	d, err := discoverOAuth(ctx, o.HTTPClient, serverURL)
	if err != nil {
		return Login{}, err
	}
	if err := CheckCredentialsURL(d.issuer, "the authorization code, PKCE verifier and client credentials"); err != nil {
		return Login{}, fmt.Errorf("authorization server of %s: %w", MaskURL(serverURL), err)
	}
	scopes := o.Scopes
	if len(scopes) == 0 && d.scope != "" {
		scopes = strings.Fields(d.scope)
	}

	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", o.CallbackPort))
	if err != nil {
		return Login{}, fmt.Errorf("listen for the redirect on loopback: %w", err)
	}
	defer ln.Close()
	redirect := "http://" + ln.Addr().String() + "/callback"

	tokens := transport.NewMemoryTokenStore()
	cfg := transport.OAuthConfig{
		RedirectURI: redirect, Scopes: scopes, PKCEEnabled: true, TokenStore: tokens,
		ProtectedResourceMetadataURL: d.explicitPRM, HTTPClient: o.HTTPClient,
		ClientID: o.ClientID, ClientSecret: o.ClientSecret,
	}
	if o.ClientID != "" && o.ClientSecret == "" {
		cfg.TokenEndpointAuthMethod = "none" // a public client proves itself with PKCE alone
	}
	h := transport.NewOAuthHandler(cfg)
	h.SetBaseURL(baseURL(serverURL)) // what mcp-go's transport sets for a session
	md, err := h.GetServerMetadata(ctx)
	if err != nil {
		return Login{}, fmt.Errorf("%w by %s: %w", ErrNoOAuth, serverURL, err)
	}
	if strings.TrimSuffix(md.Issuer, "/") != strings.TrimSuffix(d.issuer, "/") {
		return Login{}, fmt.Errorf("%w by %s: metadata discovery found issuer %q, not %q", ErrNoOAuth, serverURL, md.Issuer, d.issuer)
	}
	// What mcp-go will use, checked before anything is sent to it: the
	// registration (a client secret comes back), the authorization (the
	// browser goes there) and the token endpoint (the code, the verifier,
	// the secret, the refresh token).
	for _, ep := range []struct{ url, name, carries string }{
		{md.RegistrationEndpoint, "registration_endpoint", "the client registration"},
		{md.AuthorizationEndpoint, "authorization_endpoint", "the authorization request"},
		{md.TokenEndpoint, "token_endpoint", "the authorization code, PKCE verifier and client credentials"},
	} {
		if err := CheckCredentialsURL(ep.url, ep.carries); err != nil {
			return Login{}, fmt.Errorf("%s's %s: %w", d.issuer, ep.name, err)
		}
	}
	if o.ClientID == "" {
		if !d.canRegister {
			return Login{}, fmt.Errorf("%w by %s: its authorization server %s offers no dynamic client registration; "+
				"register a client there (redirect http://127.0.0.1:PORT/callback) and give it with --client-id and --callback-port", ErrNoOAuth, serverURL, d.issuer)
		}
		if err := h.RegisterClient(ctx, o.ClientName); err != nil {
			return Login{}, fmt.Errorf("register with %s: %w", d.issuer, err)
		}
	}
	verifier, err := transport.GenerateCodeVerifier()
	if err != nil {
		return Login{}, err
	}
	state, err := transport.GenerateState()
	if err != nil {
		return Login{}, err
	}
	authURL, err := h.GetAuthorizationURL(ctx, state, transport.GenerateCodeChallenge(verifier))
	if err != nil {
		return Login{}, fmt.Errorf("authorization URL: %w", err)
	}

	got := make(chan redirectResult, 1)
	srv := &http.Server{Handler: redirectHandler(state, got), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer func() {
		// Let the browser have its page, briefly, then stop.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		if srv.Shutdown(sctx) != nil {
			srv.Close()
		}
	}()
	if o.OnAuthorizationURL != nil {
		o.OnAuthorizationURL(authURL)
	}
	wctx, cancel := context.WithTimeoutCause(ctx, o.Wait, ErrLoginWait)
	defer cancel()
	var res redirectResult
	select {
	case res = <-got:
	case <-wctx.Done():
		if errors.Is(context.Cause(wctx), ErrLoginWait) {
			return Login{}, fmt.Errorf("%w (waited %s)", ErrLoginWait, o.Wait)
		}
		return Login{}, ctx.Err()
	}
	if res.err != nil {
		return Login{}, res.err
	}
	if err := h.ProcessAuthorizationResponse(ctx, res.code, state, verifier); err != nil {
		return Login{}, fmt.Errorf("exchange the authorization code at %s: %w", d.issuer, err)
	}
	tok, err := tokens.GetToken(ctx)
	if err != nil {
		return Login{}, err
	}
	return Login{URL: serverURL, ResourceMetadataURL: d.explicitPRM, Issuer: d.issuer,
		ClientID: h.GetClientID(), ClientSecret: h.GetClientSecret(), ClientAuthMethod: h.GetTokenEndpointAuthMethod(),
		Scopes: scopes, Token: *tok}, nil
}

type redirectResult struct {
	code string
	err  error
}

// redirectHandler answers the browser's return to the loopback redirect.
// A request whose state is not ours is refused and the wait goes on: any
// local process can reach the port.
func redirectHandler(state string, got chan<- redirectResult) http.Handler {
	var once sync.Once
	mux := http.NewServeMux()
	mux.HandleFunc("GET /callback", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if q.Get("state") != state {
			http.Error(w, "mcp-confirm: this is not the authorization it waits for (state differs)", http.StatusBadRequest)
			return
		}
		res := redirectResult{code: q.Get("code")}
		page := "Logged in. You can close this tab and go back to mcp-confirm."
		switch {
		case q.Get("error") != "":
			why := q.Get("error")
			if desc := q.Get("error_description"); desc != "" {
				why += ": " + desc
			}
			res = redirectResult{err: fmt.Errorf("%w by the authorization server (%s)", ErrLoginDenied, why)}
			page = "The authorization server said no (" + why + "). mcp-confirm stored nothing."
		case res.code == "":
			res = redirectResult{err: fmt.Errorf("%w: the redirect came back without a code", ErrLoginDenied)}
			page = "The redirect came back without a code. mcp-confirm stored nothing."
		}
		first := false
		once.Do(func() { first = true })
		if !first {
			page = "mcp-confirm already has its answer."
		}
		// The page is written before the answer is passed on: Authorize
		// then ends, and with it this server.
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, "<!doctype html><title>mcp-confirm</title><p>%s</p>\n", html.EscapeString(page))
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
		if first {
			got <- res // buffered for one
		}
	})
	return mux
}

// oauthDiscovery is what discoverOAuth found.
type oauthDiscovery struct {
	explicitPRM string // the protected-resource metadata URL, when discovery must be told it
	issuer      string
	scope       string // the scope the server's challenge asked for
	canRegister bool   // the authorization server offers dynamic registration
}

// discoverOAuth checks that serverURL offers an OAuth login mcp-confirm
// can do, by the MCP authorization spec: protected-resource metadata,
// naming an authorization server that publishes metadata with PKCE S256
// (and whether it offers dynamic registration). mcp-go would guess /authorize,
// /token and /register on the server's own origin instead of failing.
func discoverOAuth(ctx context.Context, hc *http.Client, serverURL string) (oauthDiscovery, error) {
	var d oauthDiscovery
	status, challenge, err := probe(ctx, hc, serverURL)
	if err != nil {
		return d, err
	}
	advertised := authParam(challenge, "resource_metadata")
	d.scope = authParam(challenge, "scope")
	defaultPRM := wellKnownPRM(serverURL)
	if len(defaultPRM) == 0 {
		return d, fmt.Errorf("%w: %q is not a URL", ErrNoOAuth, serverURL)
	}
	var candidates []string
	if advertised != "" {
		if !sameOrigin(advertised, serverURL) {
			return d, fmt.Errorf("%w by %s: its 401 names resource metadata on another origin (%s)", ErrNoOAuth, serverURL, advertised)
		}
		candidates = []string{advertised}
	} else {
		candidates = defaultPRM
	}
	var prm struct {
		Resource             string   `json:"resource"`
		AuthorizationServers []string `json:"authorization_servers"`
	}
	found := ""
	for _, u := range candidates {
		if ok, err := getJSON(ctx, hc, u, &prm); err != nil {
			return d, fmt.Errorf("%w by %s: protected-resource metadata at %s: %w", ErrNoOAuth, serverURL, u, err)
		} else if ok {
			found = u
			break
		}
	}
	if found == "" {
		what := fmt.Sprintf("it answered HTTP %d and publishes no protected-resource metadata (%s)", status, strings.Join(candidates, ", "))
		if status != http.StatusUnauthorized {
			what = fmt.Sprintf("it does not ask for authorization (HTTP %d to an unauthenticated initialize) and publishes no protected-resource metadata", status)
		}
		return d, fmt.Errorf("%w by %s: %s", ErrNoOAuth, serverURL, what)
	}
	if len(prm.AuthorizationServers) == 0 {
		return d, fmt.Errorf("%w by %s: its resource metadata (%s) names no authorization server", ErrNoOAuth, serverURL, found)
	}
	if advertised != "" || found != defaultPRM[0] {
		d.explicitPRM = found
	}
	d.issuer = prm.AuthorizationServers[0]
	var as struct {
		Issuer               string   `json:"issuer"`
		RegistrationEndpoint string   `json:"registration_endpoint"`
		ChallengeMethods     []string `json:"code_challenge_methods_supported"`
	}
	asFound := ""
	for _, u := range wellKnownAS(d.issuer) {
		ok, err := getJSON(ctx, hc, u, &as)
		if errors.Is(err, ErrCrossOrigin) {
			return d, fmt.Errorf("%w by %s: authorization server metadata at %s: %w", ErrNoOAuth, serverURL, u, err)
		}
		if err == nil && ok {
			asFound = u
			break
		}
	}
	switch {
	case asFound == "":
		return d, fmt.Errorf("%w by %s: its authorization server %s publishes no metadata", ErrNoOAuth, serverURL, d.issuer)
	case !slices.Contains(as.ChallengeMethods, "S256"):
		return d, fmt.Errorf("%w by %s: its authorization server %s does not offer PKCE with S256", ErrNoOAuth, serverURL, d.issuer)
	}
	d.canRegister = as.RegistrationEndpoint != ""
	return d, nil
}

// probe sends an unauthenticated initialize, as a client's first request,
// and returns the status and the WWW-Authenticate challenge.
func probe(ctx context.Context, hc *http.Client, serverURL string) (int, string, error) {
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": map[string]any{
		"protocolVersion": mcp.LATEST_LEGACY_PROTOCOL_VERSION, "capabilities": map[string]any{},
		"clientInfo": map[string]string{"name": "mcp-confirm", "version": "login"}}})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, serverURL, bytes.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := hc.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	if resp.StatusCode != http.StatusUnauthorized {
		return resp.StatusCode, "", nil
	}
	return resp.StatusCode, strings.Join(resp.Header.Values("WWW-Authenticate"), ", "), nil
}

// authParam is the value of name="..." (or name=token) in a Bearer
// challenge (RFC 6750 §3, RFC 9728 §5.1); "" when absent.
func authParam(challenge, name string) string {
	for rest := challenge; rest != ""; {
		i := strings.Index(strings.ToLower(rest), name+"=")
		if i < 0 {
			return ""
		}
		if i > 0 && !strings.ContainsRune(" ,\t", rune(rest[i-1])) {
			rest = rest[i+len(name)+1:]
			continue
		}
		v := rest[i+len(name)+1:]
		if strings.HasPrefix(v, `"`) {
			if end := strings.IndexByte(v[1:], '"'); end >= 0 {
				return v[1 : end+1]
			}
			return ""
		}
		if end := strings.IndexAny(v, " ,"); end >= 0 {
			v = v[:end]
		}
		return v
	}
	return ""
}

// getJSON GETs u into v; false when it is not there (a status other than
// 200). The error is a document that is not JSON or a failed request.
func getJSON(ctx context.Context, hc *http.Client, u string, v any) (bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return false, err
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("MCP-Protocol-Version", mcp.LATEST_PROTOCOL_VERSION)
	resp, err := hc.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return false, nil
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(v); err != nil {
		return false, fmt.Errorf("not JSON: %w", err)
	}
	return true, nil
}

// wellKnownPRM are the places of serverURL's protected-resource metadata
// (RFC 9728 §3.1, path inserted; then the origin's root, as the MCP spec
// has clients try).
func wellKnownPRM(serverURL string) []string {
	u, err := url.Parse(serverURL)
	if err != nil {
		return nil
	}
	root := u.Scheme + "://" + u.Host + "/.well-known/oauth-protected-resource"
	if p := strings.TrimSuffix(u.EscapedPath(), "/"); p != "" {
		return []string{root + p, root}
	}
	return []string{root}
}

// wellKnownAS are the places of an authorization server's metadata, in
// the MCP spec's order: RFC 8414 with the path inserted, then OpenID
// Connect discovery both ways.
func wellKnownAS(issuer string) []string {
	u, err := url.Parse(issuer)
	if err != nil || u.Host == "" {
		return nil
	}
	origin := u.Scheme + "://" + u.Host
	p := strings.TrimSuffix(u.EscapedPath(), "/")
	if p == "" {
		return []string{origin + "/.well-known/oauth-authorization-server", origin + "/.well-known/openid-configuration"}
	}
	return []string{origin + "/.well-known/oauth-authorization-server" + p, origin + "/.well-known/openid-configuration" + p,
		origin + p + "/.well-known/openid-configuration"}
}

func sameOrigin(a, b string) bool {
	ua, err1 := url.Parse(a)
	ub, err2 := url.Parse(b)
	return err1 == nil && err2 == nil && strings.EqualFold(ua.Scheme, ub.Scheme) && strings.EqualFold(ua.Host, ub.Host)
}

// baseURL is serverURL without query and fragment: the resource mcp-go's
// transport names (StreamableHTTP sets its OAuthHandler's base URL so).
func baseURL(serverURL string) string {
	u, err := url.Parse(serverURL)
	if err != nil {
		return serverURL
	}
	u.RawQuery, u.Fragment = "", ""
	return u.String()
}
