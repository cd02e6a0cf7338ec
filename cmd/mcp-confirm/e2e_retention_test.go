package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The policy's key_retention: show counts down how long the server keeps
// an unknown call's key; past it, retry is refused with exit 2 and nothing
// is sent (the server may have forgotten the key: a retry may do it twice)
// until --past-retention says the operator knows.
func TestE2ERetryPastKeyRetention(t *testing.T) {
	w := newWorld(t, t.TempDir())
	long := filepath.Join(w.dir, "long.toml")
	short := filepath.Join(w.dir, "short.toml")
	if err := os.WriteFile(long, []byte("[defaults]\nkey_retention = \"24h\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(short, []byte("[tools.create_order]\nkey_retention = \"1ms\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	first := parseCallOut(t, w.call(`{"item":"widget","quantity":1,"buyer":"alice"}`, []string{"--timeout", "1s"}, "--hang-after-commit", "1"))
	if first.State != "unknown" {
		t.Fatalf("want unknown, got %+v", first)
	}
	id := strconv.FormatInt(first.ID, 10)

	r := w.run("show", id, "--policy", long)
	wantExit(t, r, exitOK, "show with a 24h retention")
	if !strings.Contains(r.stdout, "left: the server keeps keys 24h0m0s (policy key_retention)") {
		t.Errorf("show does not count the retention down:\n%s", r.stdout)
	}
	r = w.run("show", id, "--policy", short)
	if !strings.Contains(r.stdout, "retention PAST: the server keeps keys 1ms") {
		t.Errorf("show does not say the retention has passed:\n%s", r.stdout)
	}
	if r := w.run("show", id); strings.Contains(r.stdout, "retention") {
		t.Errorf("show without a policy names a retention:\n%s", r.stdout)
	}

	r = w.run("retry", id, "--policy", short)
	wantExit(t, r, exitBadInput, "retry past the key retention")
	for _, want := range []string{"past the server's key retention of 1ms", "may do it twice; nothing was sent", "add --past-retention"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}
	if n := w.sentTotal("create_order"); n != 1 {
		t.Fatalf("%d create_order requests sent, want 1: the refused retry sent one", n)
	}
	if c := w.show(first.ID); c.State != "unknown" || len(c.Attempts) != 1 || len(c.Decisions) != 0 {
		t.Fatalf("the refused retry changed the call: %s, %d attempts, %d decisions", c.State, len(c.Attempts), len(c.Decisions))
	}

	r = w.run("retry", id, "--policy", short, "--past-retention")
	wantExit(t, r, exitOK, "retry --past-retention")
	if out := parseCallOut(t, r); out.State != "succeeded" || !out.Replayed {
		t.Errorf("retry --past-retention: %+v, want succeeded from the server's replay", out)
	}
	if n := ordersFor(t, w.db(), first.Key); n != 1 {
		t.Errorf("%d orders with the key, want 1", n)
	}
}
