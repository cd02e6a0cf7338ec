package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcp-confirm/mcp-confirm/internal/npmfixture"
)

// The MCP conformance suite's sse-retry scenario (SEP-1699), from npm: its
// server answers server/discover with an empty result, primes the
// tools/call stream with an event id and a retry field, ends it without the
// answer, and answers on the GET that resumes it with Last-Event-ID. The
// binary, as a user runs it on a SQLite journal, must pass every check,
// and its write must succeed with that answer on one attempt, recovered by
// resuming (issue 44, item 4). Skipped only without node and npm
// (npmfixture).
func TestConformanceSSERetry(t *testing.T) {
	suite := npmfixture.Bin(t, "conformance")
	w := newWorld(t, t.TempDir())
	results := filepath.Join(w.dir, "conformance")
	// The suite splits the command on spaces and appends the server's URL.
	client := strings.Join([]string{w.bin, "--db", w.journal, "call", "test_reconnection", "--args", "{}", "--url"}, " ")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", suite, "client", "--command", client, "--scenario", "sse-retry", "-o", results)
	cmd.Env, cmd.Dir = childEnv(w.dir), w.dir
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "OVERALL: PASSED") {
		t.Fatalf("conformance sse-retry: %v\n%s", err, out)
	}
	stdouts, _ := filepath.Glob(filepath.Join(results, "sse-retry-*", "stdout.txt"))
	if len(stdouts) != 1 {
		t.Fatalf("want one stdout.txt of the client under %s, got %v", results, stdouts)
	}
	b, err := os.ReadFile(stdouts[0])
	if err != nil {
		t.Fatal(err)
	}
	var printed callOut
	if err := json.Unmarshal(b, &printed); err != nil {
		t.Fatalf("the client's output is not its call's JSON: %v\n%s\n%s", err, b, out)
	}
	if printed.State != "succeeded" || !strings.Contains(string(printed.Result), "Reconnection test completed successfully") {
		t.Fatalf("the client printed %s, want the call succeeded with the server's answer\n%s", b, out)
	}
	c := w.show(printed.ID)
	if len(c.Attempts) != 1 || c.Attempts[0].Outcome != "succeeded" || c.Reason != "recovered by resuming the stream; not resent" {
		t.Fatalf("journal: %s %q with attempts %+v, want one attempt, succeeded, recovered by resuming", c.State, c.Reason, c.Attempts)
	}
}
