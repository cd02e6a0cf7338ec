package mcpclient

import (
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

func TestLoopbackAndPlainRemote(t *testing.T) {
	for host, want := range map[string]bool{
		"127.0.0.1": true, "127.0.0.1:8808": true, "127.9.9.9": true, "[::1]:80": true, "::1": true,
		"localhost": true, "LOCALHOST:3000": true, "localhost.": true, "[::ffff:127.0.0.1]:1": true,
		"192.0.2.2": false, "10.0.0.1:80": false, "localhost.example.com": false, "127.0.0.1.nip.io": false, "[::2]:80": false,
	} {
		if got := Loopback(host); got != want {
			t.Errorf("Loopback(%q) = %v, want %v", host, got, want)
		}
	}
	for raw, want := range map[string]bool{
		"http://192.0.2.2/mcp": true, "HTTP://h.example/mcp": true,
		"https://192.0.2.2/mcp": false, "http://127.0.0.1:9/mcp": false, "http://localhost/mcp": false,
	} {
		if got := plainRemote(raw); got != want {
			t.Errorf("plainRemote(%q) = %v, want %v", raw, got, want)
		}
		err := CheckCredentialsURL(raw+"?k=s3cret", "header Authorization")
		if (err != nil) != want || err != nil && (!errors.Is(err, ErrPlainHTTP) || strings.Contains(err.Error(), "s3cret")) {
			t.Errorf("CheckCredentialsURL(%q) = %v", raw, err)
		}
	}
}

func TestSameOriginRedirects(t *testing.T) {
	req := func(u string) *http.Request {
		p, _ := url.Parse(u)
		return &http.Request{URL: p}
	}
	first := []*http.Request{req("https://a.example/.well-known/x")}
	if err := sameOriginRedirects(req("https://a.example/other"), first); err != nil {
		t.Errorf("a redirect within the origin: %v", err)
	}
	for _, to := range []string{"https://b.example/x", "http://a.example/x", "https://a.example:8443/x"} {
		err := sameOriginRedirects(req(to), first)
		if !errors.Is(err, ErrCrossOrigin) || !strings.Contains(err.Error(), "a.example") {
			t.Errorf("redirect to %s: %v, want ErrCrossOrigin naming both", to, err)
		}
	}
}
