package mcpclient

import (
	"slices"
	"testing"
)

func TestAuthParam(t *testing.T) {
	for _, c := range []struct{ challenge, name, want string }{
		{`Bearer resource_metadata="https://h/.well-known/oauth-protected-resource/mcp"`, "resource_metadata", "https://h/.well-known/oauth-protected-resource/mcp"},
		{`Bearer error="invalid_token", resource_metadata="https://h/m", scope="a b"`, "scope", "a b"},
		{`Bearer realm="x", scope=files`, "scope", "files"},
		{`Bearer realm="x"`, "resource_metadata", ""},
		{`Bearer xresource_metadata="no", resource_metadata="yes"`, "resource_metadata", "yes"},
		{`Bearer resource_metadata="unterminated`, "resource_metadata", ""},
		{``, "scope", ""},
	} {
		if got := authParam(c.challenge, c.name); got != c.want {
			t.Errorf("authParam(%q, %q) = %q, want %q", c.challenge, c.name, got, c.want)
		}
	}
}

func TestWellKnownURLs(t *testing.T) {
	for _, c := range []struct {
		in   string
		prm  []string
		auth []string
	}{
		{"https://h/mcp", []string{"https://h/.well-known/oauth-protected-resource/mcp", "https://h/.well-known/oauth-protected-resource"},
			[]string{"https://h/.well-known/oauth-authorization-server/mcp", "https://h/.well-known/openid-configuration/mcp", "https://h/mcp/.well-known/openid-configuration"}},
		{"https://h", []string{"https://h/.well-known/oauth-protected-resource"},
			[]string{"https://h/.well-known/oauth-authorization-server", "https://h/.well-known/openid-configuration"}},
	} {
		if got := wellKnownPRM(c.in); !slices.Equal(got, c.prm) {
			t.Errorf("wellKnownPRM(%q) = %q, want %q", c.in, got, c.prm)
		}
		if got := wellKnownAS(c.in); !slices.Equal(got, c.auth) {
			t.Errorf("wellKnownAS(%q) = %q, want %q", c.in, got, c.auth)
		}
	}
}

func TestRefreshMargin(t *testing.T) {
	for in, want := range map[int64]string{0: "0s", 1: "250ms", 60: "15s", 3600: "30s"} {
		if got := refreshMargin(in).String(); got != want {
			t.Errorf("refreshMargin(%d) = %s, want %s", in, got, want)
		}
	}
}
