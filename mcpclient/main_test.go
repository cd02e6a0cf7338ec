package mcpclient_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-confirm/mcp-confirm/internal/testbin"
	"github.com/mcp-confirm/mcp-confirm/mcpclient"
)

// fixtureBin is the mcp-go test server (testdata/fixture), built once;
// hostileBin the misbehaving one (testdata/hostile).
var fixtureBin, hostileBin string

var bins testbin.Binaries

func TestMain(m *testing.M) {
	var err error
	if fixtureBin, err = bins.Build("fixture", "./testdata/fixture"); err == nil {
		hostileBin, err = bins.Build("hostile", "./testdata/hostile")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(bins.Run(m))
}

// noLeak fails the test if goroutines started during it are still running
// a few seconds after its cleanups (Close included) ran. Register it first:
// cleanups run last-in first-out.
func noLeak(t *testing.T) {
	t.Helper()
	before := runtime.NumGoroutine()
	t.Cleanup(func() {
		deadline := time.Now().Add(5 * time.Second)
		for {
			n := runtime.NumGoroutine()
			if n <= before {
				return
			}
			if time.Now().After(deadline) {
				buf := make([]byte, 1<<20)
				buf = buf[:runtime.Stack(buf, true)]
				t.Errorf("goroutine leak: %d before the test, %d after\n%s", before, n, buf)
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
}

// testOptions are short enough that broken servers fail fast, long enough
// for a loaded CI machine.
func testOptions() mcpclient.Options {
	return mcpclient.Options{
		ClientName: "mcpclient-test", ClientVersion: "0.0.1",
		ProbeTimeout: 2 * time.Second, StartTimeout: 10 * time.Second, StopGrace: time.Second,
	}
}

func fixture(args ...string) mcpclient.ServerSpec {
	return mcpclient.ServerSpec{Command: fixtureBin, Args: args}
}

// started returns a started client that is closed when the test ends.
func started(t *testing.T, spec mcpclient.ServerSpec, opts mcpclient.Options) *mcpclient.Client {
	t.Helper()
	c := mcpclient.New(spec, opts)
	t.Cleanup(func() {
		begin := time.Now()
		if err := c.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
		t.Logf("close took %v", time.Since(begin))
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		t.Fatalf("start: %v", err)
	}
	return c
}

// startedWithLate is started with the client's late results collected.
func startedWithLate(t *testing.T, spec mcpclient.ServerSpec) (*mcpclient.Client, *lateSink) {
	t.Helper()
	late := newLateSink()
	opts := testOptions()
	opts.OnLateResult = late.add
	return started(t, spec, opts), late
}

// hangGuard is the bound past which a call is taken to hang: far above any
// timeout the tests set, so it never fires on a slow machine.
const hangGuard = 15 * time.Second

func call(t *testing.T, c *mcpclient.Client, tool string, args map[string]any, o mcpclient.CallOptions) mcpclient.Delivery {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	start := time.Now()
	out := c.Call(ctx, tool, args, o)
	if time.Since(start) >= hangGuard-time.Second {
		t.Fatalf("call %s hung (%v): %+v", tool, time.Since(start), out)
	}
	return out
}

// lateSink collects late results from any goroutine.
type lateSink struct {
	mu sync.Mutex
	rs []mcpclient.LateResult
	ch chan struct{}
}

func newLateSink() *lateSink { return &lateSink{ch: make(chan struct{}, 100)} }

func (s *lateSink) add(r mcpclient.LateResult) {
	s.mu.Lock()
	s.rs = append(s.rs, r)
	s.mu.Unlock()
	select {
	case s.ch <- struct{}{}:
	default: // a waiter has wake-ups enough queued
	}
}

// all returns the late results for key so far, in the order they came.
func (s *lateSink) all(key string) []mcpclient.LateResult {
	s.mu.Lock()
	defer s.mu.Unlock()
	var rs []mcpclient.LateResult
	for _, r := range s.rs {
		if r.Key == key {
			rs = append(rs, r)
		}
	}
	return rs
}

// waitN returns the first n late results for key, or fails after a
// generous bound.
func (s *lateSink) waitN(t *testing.T, key string, n int) []mcpclient.LateResult {
	t.Helper()
	deadline := time.After(hangGuard)
	for {
		if rs := s.all(key); len(rs) >= n {
			return rs[:n]
		}
		select {
		case <-s.ch:
		case <-deadline:
			t.Fatalf("%d late results for %s, want %d: %+v", len(s.all(key)), key, n, s.all(key))
		}
	}
}

// wait returns the first late result for key, or fails after a generous bound.
func (s *lateSink) wait(t *testing.T, key string) mcpclient.LateResult {
	t.Helper()
	deadline := time.After(hangGuard)
	for {
		s.mu.Lock()
		for _, r := range s.rs {
			if r.Key == key {
				s.mu.Unlock()
				return r
			}
		}
		s.mu.Unlock()
		select {
		case <-s.ch:
		case <-deadline:
			t.Fatalf("no late result for %s", key)
		}
	}
}

// waitFor polls cond up to the hang bound.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(hangGuard)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// toolResult parses a result as mcp-go reads a CallToolResult: the raw JSON
// the client keeps must be one.
func toolResult(t *testing.T, raw json.RawMessage) *mcp.CallToolResult {
	t.Helper()
	r, err := mcp.ParseCallToolResult(&raw)
	if err != nil {
		t.Fatalf("result %s: %v", raw, err)
	}
	return r
}
