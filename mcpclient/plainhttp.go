package mcpclient

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"time"
)

// OAuth 2.1 (§1.5) wants TLS for every endpoint that carries a
// credential, except a loopback one. mcp-confirm holds to that for all it
// sends: a bearer token, a header, a client secret, an authorization code,
// a PKCE verifier or a refresh token goes over plain http:// only to
// loopback (127.0.0.0/8, ::1, "localhost"), where nothing crosses a
// network. A plain http:// server given no credential may still be used.

// ErrPlainHTTP: a credential would cross the network in clear; nothing
// was sent.
var ErrPlainHTTP = errors.New("credentials over plain http")

// ErrCrossOrigin: OAuth discovery was redirected to another origin;
// discovery follows a redirect only within one origin.
var ErrCrossOrigin = errors.New("redirected to another origin")

// Loopback reports whether host (a URL's host, port or not) is on this
// machine by its name alone: 127.0.0.0/8, ::1, or "localhost". No name is
// resolved: what a name resolves to can change between the check and the
// connection.
func Loopback(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.Trim(host, "[]"), ".")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

// plainRemote: raw is an http:// URL whose host is not loopback.
func plainRemote(raw string) bool {
	u, err := url.Parse(raw)
	return err == nil && strings.EqualFold(u.Scheme, "http") && !Loopback(u.Host)
}

// CheckCredentialsURL refuses to send what (a credential, named for the
// person reading) to raw when raw is plain http:// to another machine.
func CheckCredentialsURL(raw, what string) error {
	if !plainRemote(raw) {
		return nil
	}
	return fmt.Errorf("%w: refusing to send %s to %s, which is plain http:// and not loopback; "+
		"use its https:// URL (or reach it on 127.0.0.1, ::1 or localhost)", ErrPlainHTTP, what, MaskURL(raw))
}

// remoteCredentials names the credentials a session with spec would send
// (its headers, a userinfo in its URL, a login stored for it); "" for
// none.
func remoteCredentials(spec ServerSpec, logins *Logins) string {
	var what []string
	for k := range spec.Headers {
		what = append(what, "header "+http.CanonicalHeaderKey(k))
	}
	if u, err := url.Parse(spec.URL); err == nil && u.User != nil {
		what = append(what, "the user name and password in the URL")
	}
	if logins != nil && len(spec.Headers) == 0 {
		if _, err := logins.Load(spec.URL); err == nil {
			what = append(what, "the stored login's bearer token")
		}
	}
	if len(what) == 0 {
		return ""
	}
	slices.Sort(what) // the headers' order is a map's
	return strings.Join(what, ", ")
}

// sameOriginRedirects is an http.Client's CheckRedirect for OAuth
// discovery: a redirect within the first request's origin is followed (at
// most 10), one to another origin is an error naming both, as is one
// from https to http.
func sameOriginRedirects(req *http.Request, via []*http.Request) error {
	if len(via) >= 10 {
		return errors.New("stopped after 10 redirects")
	}
	from := via[0].URL
	if !strings.EqualFold(from.Scheme, req.URL.Scheme) || !strings.EqualFold(from.Host, req.URL.Host) {
		return fmt.Errorf("%w: %s://%s sent discovery to %s://%s; mcp-confirm follows no redirect across origins while it discovers OAuth metadata",
			ErrCrossOrigin, from.Scheme, from.Host, req.URL.Scheme, req.URL.Host)
	}
	return nil
}

// discoveryClient is hc (nil: a new client with a 30s timeout) whose
// redirects stay within an origin (sameOriginRedirects).
func discoveryClient(hc *http.Client) *http.Client {
	if hc == nil {
		return &http.Client{Timeout: 30 * time.Second, CheckRedirect: sameOriginRedirects}
	}
	c := *hc
	c.CheckRedirect = sameOriginRedirects
	return &c
}
