package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcp-confirm/mcp-confirm/internal/testbin"
)

// watchLine is one line of watch --json.
type watchLine struct {
	Type     string `json:"type"`
	CallID   int64  `json:"call_id"`
	Tool     string `json:"tool"`
	From     string `json:"from"`
	State    string `json:"state"`
	Reason   string `json:"reason"`
	Action   string `json:"action"`
	Operator string `json:"operator"`
	Note     string `json:"note"`
	Attempt  int    `json:"attempt"`
}

// TestWatchAcrossProcesses: one process watches the journal; others make
// calls and decide them. Every state change and decision reaches the
// watcher as a JSON line, in order, and ctrl-C ends it with exit 0.
func TestWatchAcrossProcesses(t *testing.T) {
	w := newWorld(t, t.TempDir())
	// The journal must exist for a read command: one read makes it.
	wantExit(t, w.run("call", "get_budget", "--args", `{"buyer":"bob"}`, "--", w.bin, "demo-server", "--db", w.demoDB), 0, "first read")

	ctx, cancel := context.WithTimeout(context.Background(), cmdHang)
	defer cancel()
	cmd := e2eCmd(ctx, w.bin, w.dir, "watch", "--json", "--db", w.journal)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr testbin.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan watchLine, 100)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var l watchLine
			if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
				t.Errorf("watch --json printed a line that is not JSON: %q", sc.Text())
				continue
			}
			lines <- l
		}
	}()
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(stderr.String(), "watching"); {
		if time.Now().After(deadline) {
			t.Fatalf("watch did not start: %s", stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}

	// Another process: a write whose answer is lost, then abandoned; a
	// write that succeeds, then a note. Each step waits for the watcher to
	// report the one before: the feed reports a call that changed twice
	// between two looks once, from the first state to the last (by
	// design), and a CLI process can start and commit within one look.
	var got []watchLine
	waitFor := func(what string, match func(watchLine) bool) {
		t.Helper()
		timeout := time.After(30 * time.Second)
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("watch ended early, waiting for %s; got %+v\nstderr: %s", what, got, stderr.String())
				}
				got = append(got, l)
				if match(l) {
					return
				}
			case <-timeout:
				t.Fatalf("watch did not report %s within 30s; got %+v\nstderr: %s", what, got, stderr.String())
			}
		}
	}
	wantExit(t, w.call(`{"item":"gadget","quantity":1,"buyer":"bob"}`, []string{"--timeout", "1s"}, "--hang-after-commit", "1"), 3, "lost write")
	waitFor("call 1 unknown", func(l watchLine) bool {
		return l.Type == "state" && l.CallID == 1 && l.State == "unknown" && l.Reason == "idle timeout"
	})
	wantExit(t, w.run("abandon", "1", "--note", "bob cancelled"), 0, "abandon")
	waitFor("the abandon decision", func(l watchLine) bool {
		return l.Type == "decision" && l.CallID == 1 && l.Action == "abandon" && l.Note == "bob cancelled"
	})
	waitFor("call 1 abandoned", func(l watchLine) bool {
		return l.Type == "state" && l.CallID == 1 && l.From == "unknown" && l.State == "abandoned"
	})
	wantExit(t, w.call(`{"item":"widget","quantity":1,"buyer":"alice"}`, nil), 0, "good write")
	waitFor("call 2 succeeded", func(l watchLine) bool {
		return l.Type == "state" && l.CallID == 2 && l.State == "succeeded"
	})
	wantExit(t, w.run("note", "2", "looks right"), 0, "note")
	waitFor("the note on call 2", func(l watchLine) bool {
		return l.Type == "decision" && l.CallID == 2 && l.Action == "note" && l.Note == "looks right" && l.State == "succeeded"
	})
	for _, l := range got {
		if l.CallID == 1 && l.Type == "state" && l.From == "" && l.State != "in_flight" && l.State != "unknown" {
			t.Errorf("call 1 first seen as %s", l.State)
		}
	}

	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	for range lines {
	}
	err = cmd.Wait()
	var exit *exec.ExitError
	if errors.As(err, &exit) || err != nil {
		t.Fatalf("watch after ctrl-C: %v, want exit 0\nstderr: %s", err, stderr.String())
	}
}
