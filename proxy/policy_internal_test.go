package proxy

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/mcp-confirm/mcp-confirm/guard"
)

// The proxy's clocks for a host it does not know: 50 s to answer a write,
// 55 s at most with progress, unless --timeout or the policy says otherwise.
func TestProxyPolicyClocks(t *testing.T) {
	withWrite := &guard.Policy{}
	withWrite.Defaults.WriteTimeout.Duration = 20 * time.Second
	withTotal := &guard.Policy{}
	withTotal.Defaults.MaxTotal.Duration = 5 * time.Minute
	unknown := clockFor("some-host", 0, "")
	cases := []struct {
		name               string
		in                 *guard.Policy
		timeout            time.Duration
		wantWrite, wantMax time.Duration
	}{
		{"defaults", nil, 0, DefaultTimeout, DefaultMaxTotal},
		{"--timeout overrides through the guard", nil, 2 * time.Second, 0, DefaultMaxTotal},
		{"long --timeout raises the cap", nil, 90 * time.Second, 0, 90 * time.Second},
		{"policy write_timeout kept", withWrite, 0, 20 * time.Second, DefaultMaxTotal},
		{"policy max_total kept", withTotal, 0, DefaultTimeout, 5 * time.Minute},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := proxyPolicy(c.in, c.timeout, unknown)
			if p.Defaults.WriteTimeout.Duration != c.wantWrite || p.Defaults.MaxTotal.Duration != c.wantMax {
				t.Fatalf("write_timeout %s max_total %s, want %s %s", p.Defaults.WriteTimeout.Duration, p.Defaults.MaxTotal.Duration, c.wantWrite, c.wantMax)
			}
			if c.in != nil && c.in == p {
				t.Fatal("the caller's policy was modified in place")
			}
		})
	}
	if withWrite.Defaults.MaxTotal.Duration != 0 {
		t.Error("the caller's policy was modified")
	}
}

// Each host in the table by the name it sends (any case), a deadline given
// by the operator over the table, and the hosts the table does not know.
func TestClockForHost(t *testing.T) {
	cases := []struct {
		client     string
		given      time.Duration
		host       string
		write, tot time.Duration
		limit      bool
	}{
		{"claude-ai", 0, "Claude Desktop", 192 * time.Second, 216 * time.Second, true},
		{"Claude-AI", 0, "Claude Desktop", 192 * time.Second, 216 * time.Second, true},
		{"gemini-cli-mcp-client", 0, "Gemini CLI", 480 * time.Second, 540 * time.Second, true},
		{"goose", 0, "goose", 240 * time.Second, 270 * time.Second, true},
		{"codex-mcp-client", 0, "Codex", 48 * time.Second, 54 * time.Second, true},
		{"claude-code", 0, "Claude Code", noLimitWrite, guard.DefaultMaxTotal, false},
		{"claude-code", 10 * time.Minute, "Claude Code", 8 * time.Minute, 9 * time.Minute, true},
		{"ts-sdk-host", 0, "", DefaultTimeout, DefaultMaxTotal, true},
		{"", 0, "", DefaultTimeout, DefaultMaxTotal, true},
		{"", 2 * time.Second, "", 1600 * time.Millisecond, 1800 * time.Millisecond, true},
		{"", 500 * time.Millisecond, "", 400 * time.Millisecond, 450 * time.Millisecond, true},
	}
	for _, c := range cases {
		hc := clockFor(c.client, c.given, "--host-timeout")
		if hc.Host != c.host || hc.Write != c.write || hc.Total != c.tot || hc.Limit != c.limit {
			t.Errorf("clockFor(%q, %s) = host %q write %s total %s limit %v; want %q %s %s %v",
				c.client, c.given, hc.Host, hc.Write, hc.Total, hc.Limit, c.host, c.write, c.tot, c.limit)
		}
		if hc.Limit && (hc.Write >= hc.Deadline || hc.Total >= hc.Deadline) {
			t.Errorf("clockFor(%q, %s): clocks %s/%s not under the host's %s", c.client, c.given, hc.Write, hc.Total, hc.Deadline)
		}
	}
	// Every entry of the table: a clock under its deadline, names in lower case.
	for _, h := range KnownHosts {
		for _, n := range h.Clients {
			hc := clockFor(n, 0, "")
			if hc.Host != h.Name {
				t.Errorf("%s: the name %q finds %q", h.Name, n, hc.Host)
			}
			if h.Deadline > 0 && hc.Total >= h.Deadline {
				t.Errorf("%s: absolute clock %s not under its deadline %s", h.Name, hc.Total, h.Deadline)
			}
		}
		if h.Source == "" {
			t.Errorf("%s: no source for its deadline", h.Name)
		}
	}
}

// The host's name from its first line, in both eras.
func TestClientName(t *testing.T) {
	for line, want := range map[string]string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"clientInfo":{"name":"claude-ai","version":"0.1"}}}`:                    "claude-ai",
		`{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/clientInfo":{"name":"goose"}}}}`: "goose",
		`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`:                                                                                 "",
		`not json`: "",
	} {
		if got := clientName([]byte(line)); got != want {
			t.Errorf("clientName(%s) = %q, want %q", line, got, want)
		}
	}
}

// The README's host table is HostTable's output, between its markers.
func TestREADMEHostTable(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	const begin, end = "<!-- hosts:begin -->\n", "<!-- hosts:end -->"
	i, j := strings.Index(s, begin), strings.Index(s, end)
	if i < 0 || j < i {
		t.Fatal("README.md has no hosts:begin/hosts:end markers")
	}
	if got := s[i+len(begin) : j]; got != HostTable() {
		t.Fatalf("README host table is stale; paste proxy.HostTable():\n%s", HostTable())
	}
}
