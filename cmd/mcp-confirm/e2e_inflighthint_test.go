package main

import (
	"regexp"
	"strings"
	"testing"
	"time"
)

// hintCommand finds the commands a message tells the operator to run
// ('mcp-confirm ...', quoted).
var hintCommand = regexp.MustCompile(`'(mcp-confirm [^']*)'`)

// A call in flight (the demo server holds its answer): nothing the CLI
// prints about it offers a retry, which retry would refuse (State.Allows
// is the table a hint reads); what a hint does offer is run here and works
// (issue 44 item 13c).
func TestE2ENoRetryHintForACallInFlight(t *testing.T) {
	w := newWorld(t, t.TempDir())
	const args = `{"item":"widget","quantity":1,"buyer":"bob"}`
	bg := w.startCall(t, args, []string{"--timeout", "60s"}, "--hang-after-commit", "1")
	key := w.waitSentKey(t, nil, time.Minute)
	if c := w.show(1); c.State != "in_flight" {
		t.Fatalf("call 1 is %s, want in_flight", c.State)
	}

	offersRetry := func(what, out string) {
		t.Helper()
		for _, m := range hintCommand.FindAllStringSubmatch(out, -1) {
			if f := strings.Fields(m[1]); contains(f, "retry") {
				t.Errorf("%s offers %q for a call in flight:\n%s", what, m[1], out)
			}
		}
	}
	for _, args := range [][]string{{"list"}, {"show", "1"}} {
		r := w.run(args...)
		wantExit(t, r, exitOK, args[0])
		offersRetry(args[0], r.stdout+r.stderr)
	}

	// Each command a refusal offers runs as printed.
	runHints := func(what string, r cliResult) {
		t.Helper()
		offersRetry(what, r.stderr)
		hints := hintCommand.FindAllStringSubmatch(r.stderr, -1)
		if len(hints) == 0 {
			t.Errorf("%s offers no command:\n%s", what, r)
		}
		for _, h := range hints {
			f := strings.Fields(h[1])
			if got := cliIn(t, w.bin, w.dir, "", f[1:]...); got.code != exitOK {
				t.Errorf("%s offers %q, which does not work: %s", what, h[1], got)
			}
		}
	}
	// The same key again, while the first is in flight: held, nothing
	// sent; and a retry of it, refused.
	r := w.call(args, []string{"--key", key})
	wantExit(t, r, exitHeld, "the same key while the first is in flight")
	runHints("call with the key of a call in flight", r)
	r = w.run("retry", "1")
	wantExit(t, r, exitBadInput, "retry of a call in flight")
	runHints("retry of a call in flight", r)
	if n := w.sentTotal("create_order"); n != 1 {
		t.Errorf("%d create_order requests reached the server, want 1", n)
	}
	if err := bg.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	bg.wait()
}
