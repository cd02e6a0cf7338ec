package mcpclient_test

import (
	"testing"

	"github.com/mcp-confirm/mcp-confirm/mcpclient"
)

func TestMaskURL(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"https://h.example/mcp", "https://h.example/mcp"},
		{"http://127.0.0.1:8808/mcp?api_key=secret123", "http://127.0.0.1:8808/mcp?api_key=***"},
		{"https://h/mcp?a=1&token=x%20y&flag&empty=", "https://h/mcp?a=***&token=***&flag&empty="},
		{"https://user:pa55@h/mcp", "https://user:***@h/mcp"},
		{"https://ghp_tok@h/mcp", "https://***@h/mcp"},
		{"https://h/mcp#access_token=t", "https://h/mcp#***"},
		{"::not a url?key=s", "::not a url***"},
	} {
		if got := mcpclient.MaskURL(c.in); got != c.want {
			t.Errorf("MaskURL(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	a, b := mcpclient.URLSum("https://h/mcp?api_key=one"), mcpclient.URLSum("https://h/mcp?api_key=two")
	if a == "" || a == b {
		t.Errorf("URLSum does not tell two keys apart: %q, %q", a, b)
	}
	if s := mcpclient.URLSum("https://h/mcp"); s != "" {
		t.Errorf("URLSum of a URL with nothing to mask = %q, want \"\"", s)
	}
	if got := mcpclient.MaskURLsIn(`Post "https://h/mcp?k=s": refused`); got != `Post "https://h/mcp?k=***": refused` {
		t.Errorf("MaskURLsIn = %q", got)
	}
}
