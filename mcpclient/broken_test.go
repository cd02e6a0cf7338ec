package mcpclient_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mcp-confirm/mcp-confirm/internal/testbin"
	"github.com/mcp-confirm/mcp-confirm/mcpclient"
)

// Servers that never become usable: each gives a *StartError that says what
// went wrong, within a bound, and leaves nothing running.
func TestBrokenServersFailToStart(t *testing.T) {
	tests := []struct {
		name  string
		spec  mcpclient.ServerSpec
		check func(t *testing.T, se *mcpclient.StartError)
	}{
		{
			name: "exits at once",
			spec: fixture("-mode", "exit"),
			check: func(t *testing.T, se *mcpclient.StartError) {
				if se.Exit != "exit status 3" {
					t.Errorf("exit = %q", se.Exit)
				}
				msg := se.Error()
				for _, want := range []string{"exit status 3", "cannot open database", "exiting at once"} {
					if !strings.Contains(msg, want) {
						t.Errorf("error lacks %q:\n%s", want, msg)
					}
				}
			},
		},
		{
			name: "writes garbage on stdout",
			spec: fixture("-mode", "garbage"),
			check: func(t *testing.T, se *mcpclient.StartError) {
				if se.NonJSONLines == 0 || !strings.Contains(se.FirstNonJSON, "Starting fixture server") {
					t.Errorf("non-JSON lines %d, first %q", se.NonJSONLines, se.FirstNonJSON)
				}
				if !errors.Is(se, context.DeadlineExceeded) || !strings.Contains(se.Error(), "not JSON-RPC") {
					t.Errorf("error: %v", se)
				}
			},
		},
		{
			name: "never answers initialize",
			spec: fixture("-mode", "silent"),
			check: func(t *testing.T, se *mcpclient.StartError) {
				if !errors.Is(se, context.DeadlineExceeded) || !strings.Contains(se.Error(), "silent mode") {
					t.Errorf("error: %v", se)
				}
				if se.Exit != "" {
					t.Errorf("exit = %q; the server was still running when we gave up", se.Exit)
				}
			},
		},
		{
			name: "no such command",
			spec: mcpclient.ServerSpec{Command: "/nonexistent/mcp-server"},
			check: func(t *testing.T, se *mcpclient.StartError) {
				if !strings.Contains(se.Error(), "/nonexistent/mcp-server") || !strings.Contains(se.Error(), "no such file") {
					t.Errorf("error: %v", se)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			noLeak(t)
			opts := testOptions()
			opts.ProbeTimeout = 300 * time.Millisecond
			opts.StartTimeout = time.Second
			opts.StopGrace = 300 * time.Millisecond
			c := mcpclient.New(tt.spec, opts)
			defer c.Close()
			begin := time.Now()
			err := c.Start(context.Background())
			if took := time.Since(begin); took > hangGuard {
				t.Fatalf("start took %v", took)
			}
			var se *mcpclient.StartError
			if !errors.As(err, &se) {
				t.Fatalf("err = %v (%T), want *StartError", err, err)
			}
			t.Logf("error as a user sees it:\n%v", err)
			if se.Session != 1 {
				t.Errorf("session = %d", se.Session)
			}
			tt.check(t, se)
			if c.Session() != 0 || c.State() != mcpclient.StateExited {
				t.Errorf("session %d state %s", c.Session(), c.State())
			}
			// A call on a server that cannot start is provably not sent.
			out := c.Call(context.Background(), "echo", nil, mcpclient.CallOptions{Key: "k-never-000000001"})
			if out.Kind != mcpclient.DeliveryNotSent || !errors.As(out.Err, &se) {
				t.Errorf("call outcome = %+v", out)
			}
		})
	}
}

// A server that floods stderr keeps working (the pipe is drained), its whole
// stderr reaches Options.Stderr, and only the last lines are kept.
func TestStderrFlood(t *testing.T) {
	noLeak(t)
	var all testbin.Buffer
	opts := testOptions()
	opts.Stderr = &all
	opts.StderrLines = 5
	c := started(t, fixture("-mode", "flood"), opts)
	for i := 0; i < 20; i++ {
		if out := call(t, c, "echo", nil, mcpclient.CallOptions{}); out.Kind != mcpclient.DeliveryResult {
			t.Fatalf("call %d: %+v", i, out)
		}
	}
	waitFor(t, "a megabyte of stderr", func() bool { return len(all.String()) > 1<<20 })
	lines := c.Stderr()
	if len(lines) != 5 {
		t.Fatalf("kept %d lines, want 5", len(lines))
	}
	for _, l := range lines {
		if !strings.HasPrefix(l, "flood ") || len(l) > 1100 {
			t.Errorf("kept line %q", l)
		}
	}
}
