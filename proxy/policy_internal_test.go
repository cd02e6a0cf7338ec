package proxy

import (
	"testing"
	"time"

	"github.com/mcp-confirm/mcp-confirm/guard"
)

// The proxy's clocks: 50 s to answer a write, 55 s at most with progress,
// unless --timeout or the policy says otherwise.
func TestProxyPolicyClocks(t *testing.T) {
	withWrite := &guard.Policy{}
	withWrite.Defaults.WriteTimeout.Duration = 20 * time.Second
	withTotal := &guard.Policy{}
	withTotal.Defaults.MaxTotal.Duration = 5 * time.Minute
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
			p := proxyPolicy(c.in, c.timeout)
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
