package oauthtest

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// tokens is a token endpoint's answer: the tokens, or its error.
type tokens struct {
	Access  string `json:"access_token"`
	Refresh string `json:"refresh_token"`
	Error   string `json:"error"`
}

func post(t *testing.T, s *Server, form url.Values) tokens {
	t.Helper()
	resp, err := http.PostForm(s.URL+"/token", form)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var tok tokens
	if err := json.NewDecoder(resp.Body).Decode(&tok); err != nil {
		t.Fatal(err)
	}
	return tok
}

// login runs the code grant with PKCE as a client does, no redirect
// followed: the code is read from the Location header.
func login(t *testing.T, s *Server, client, resource string) tokens {
	t.Helper()
	const verifier = "a-verifier-of-at-least-forty-three-characters-long"
	redirect := "http://127.0.0.1:1/callback"
	s.AddClient(client, "", redirect)
	q := url.Values{"client_id": {client}, "redirect_uri": {redirect}, "response_type": {"code"},
		"code_challenge": {challenge(verifier)}, "code_challenge_method": {"S256"}, "resource": {resource}, "state": {"s"}}
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noFollow.Get(s.URL + "/authorize?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	back, err := url.Parse(resp.Header.Get("Location"))
	if err != nil || back.Query().Get("code") == "" {
		t.Fatalf("authorize answered %d, Location %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	tok := post(t, s, url.Values{"grant_type": {"authorization_code"}, "code": {back.Query().Get("code")},
		"client_id": {client}, "redirect_uri": {redirect}, "code_verifier": {verifier}, "resource": {resource}})
	if tok.Access == "" || tok.Refresh == "" {
		t.Fatalf("code exchange: %+v", tok)
	}
	return tok
}

// Refresh tokens rotate, and one used twice is refused and revokes its
// grant, the tokens the first use gave included; another grant (another
// login) is untouched.
func TestRefreshTokenReuseRevokesTheGrant(t *testing.T) {
	s := NewServer(t, Options{AccessTTL: time.Hour})
	const resource = "http://127.0.0.1:1/mcp"
	refresh := func(client, rt string) tokens {
		return post(t, s, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {rt}, "client_id": {client}})
	}
	first := login(t, s, "c1", resource)
	other := login(t, s, "c2", resource)

	second := refresh("c1", first.Refresh)
	if second.Access == "" || second.Refresh == "" || second.Refresh == first.Refresh {
		t.Fatalf("refresh: %+v, want new tokens with a new refresh token", second)
	}
	if again := refresh("c1", first.Refresh); again.Error != "invalid_grant" {
		t.Fatalf("the used refresh token presented again: %+v, want invalid_grant", again)
	}
	if s.Valid(second.Access, resource) || s.Valid(first.Access, resource) {
		t.Error("access tokens of the grant still live after its refresh token was reused")
	}
	if third := refresh("c1", second.Refresh); third.Error != "invalid_grant" {
		t.Errorf("the refresh token the first refresh gave: %+v, want it revoked with its grant", third)
	}
	if !s.Valid(other.Access, resource) {
		t.Error("another grant's access token was revoked with this one")
	}
	if tok := refresh("c2", other.Refresh); tok.Access == "" {
		t.Errorf("another grant's refresh: %+v, want new tokens", tok)
	}
	c := s.Counts()
	if c.Refreshes != 2 || c.Reuses != 1 || c.Refused != 2 {
		t.Errorf("counts %+v, want 2 refreshes, 1 reuse, 2 refused", c)
	}
	if r := s.Refusals(); len(r) != 2 || !strings.Contains(r[0], "already used") {
		t.Errorf("refusals %q", r)
	}
}
