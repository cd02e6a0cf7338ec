package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestE2EBadInput: every kind of bad input is refused with the right exit
// code and a one- or two-line message, adds no journal row and sends
// nothing (SPEC §4: "bad input never leaves a half-written row or sends
// anything"). The journal and demo database start with one good call, so
// "unchanged" is checked against real content.
func TestE2EBadInput(t *testing.T) {
	dir := t.TempDir()
	w := newWorld(t, dir)
	db := w.db()
	const good = `{"item":"widget","quantity":1,"buyer":"bob"}`
	wantExit(t, w.call(good, nil), exitOK, "the good call")
	baseCalls, baseOrders, baseSent := len(w.list()), totalOrders(t, db), w.sentTotal("create_order")
	if baseCalls != 1 || baseOrders != 1 || baseSent != 1 {
		t.Fatalf("setup: %d calls, %d orders, %d sends; want 1 each", baseCalls, baseOrders, baseSent)
	}

	textFile := filepath.Join(dir, "notes.txt")
	const text = "this is not a journal\n"
	if err := os.WriteFile(textFile, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := w.server()
	call := func(extra ...string) []string {
		return append(append([]string{"call", "create_order"}, extra...), srv...)
	}
	cases := []struct {
		name  string
		args  []string // --db is added unless the case gives its own
		stdin string
		code  int
		say   string // a word the message must contain
	}{
		{"malformed JSON", call("--args", `{"item":`), "", exitBadInput, "JSON"},
		{"two JSON values", call("--args", `{} {}`), "", exitBadInput, "JSON"},
		{"args an array", call("--args", `[1,2]`), "", exitBadInput, "object"},
		{"args a string", call("--args", `"widget"`), "", exitBadInput, "object"},
		{"args null", call("--args", `null`), "", exitBadInput, "object"},
		{"args from stdin not an object", call("--args", "-"), "42", exitBadInput, "object"},
		{"args-file missing", call("--args-file", filepath.Join(dir, "no-such-args.json")), "", exitBadInput, "no-such-args.json"},
		{"args and args-file", call("--args", good, "--args-file", textFile), "", exitBadInput, "args-file"},
		{"unknown tool", append([]string{"call", "no_such_tool", "--args", "{}"}, srv...), "", exitBadInput, "no_such_tool"},
		{"no tool", append([]string{"call", "--args", "{}"}, srv...), "", exitBadInput, "tool"},
		{"key with a space", call("--args", good, "--key", "order 2026 12 02 alice"), "", exitBadInput, "space"},
		{"key not ASCII", call("--args", good, "--key", "bestellung-größe-0001"), "", exitBadInput, "printable"},
		{"key too long", call("--args", good, "--key", strings.Repeat("k", 256)), "", exitBadInput, "255"},
		{"key argument differs from --key", call("--args", `{"item":"widget","quantity":1,"buyer":"bob","idempotency_key":"aaaaaaaaaaaaaaaaaaaa"}`, "--key", "bbbbbbbbbbbbbbbbbbbb"), "", exitBadInput, "key"},
		{"args miss a required property", call("--args", `{"item":"widget","quantity":1}`), "", exitBadInput, "buyer is required"},
		{"args of the wrong type", call("--args", `{"item":"widget","quantity":"two","buyer":"bob"}`), "", exitBadInput, "quantity must be a number"},
		{"args empty", call("--args", ""), "", exitBadInput, "--args is empty"},
		{"timeout 0", call("--args", good, "--timeout", "0"), "", exitBadInput, "--timeout must be more than 0"},
		{"unknown flag", call("--args", good, "--colour", "red"), "", exitBadInput, "colour"},
		{"negative timeout", call("--args", good, "--timeout", "-1s"), "", exitBadInput, "timeout"},
		{"server does not exist", []string{"call", "create_order", "--args", good, "--", filepath.Join(dir, "nonexistent")}, "", exitUnavailable, "nonexistent"},
		{"server exits at once", []string{"call", "create_order", "--args", good, "--", "/bin/false"}, "", exitUnavailable, "false"},
		{"server fails with a stderr message", []string{"call", "create_order", "--args", good, "--", "/bin/sh", "-c",
			"echo first problem >&2; echo second problem >&2; echo missing API_TOKEN >&2; exit 1"}, "", exitUnavailable, "missing API_TOKEN"},
		{"journal is a text file", append([]string{"call", "create_order", "--args", good, "--db", textFile}, srv...), "", exitUnavailable, "journal"},
		{"journal is a folder", append([]string{"call", "create_order", "--args", good, "--db", dir}, srv...), "", exitUnavailable, "journal"},
		{"show: no such call", []string{"show", "999"}, "", exitBadInput, "999"},
		{"show: not a number", []string{"show", "first"}, "", exitBadInput, "first"},
		{"retry: no such call", append([]string{"retry", "999"}, srv...), "", exitBadInput, "999"},
		{"query: no such call", append([]string{"query", "999", "--tool", "find_orders", "--args", "{}"}, srv...), "", exitBadInput, "999"},
		{"abandon: no such call", []string{"abandon", "999", "--note", "x"}, "", exitBadInput, "999"},
		{"mark: no such call", []string{"mark", "999", "applied"}, "", exitBadInput, "999"},
		{"mark: no verb", []string{"mark", "1"}, "", exitBadInput, "applied"},
		{"retry of a succeeded call", append([]string{"retry", "1"}, srv...), "", exitBadInput, "succeeded"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args
			if !containsWord(args, "--db") {
				args = w.withDB(args)
			}
			r := cliIn(t, w.bin, dir, tc.stdin, args...)
			wantExit(t, r, tc.code, tc.name)
			stderrLines(t, r, tc.name)
			if !strings.Contains(r.stderr, tc.say) {
				t.Errorf("stderr should mention %q:\n%s", tc.say, r.stderr)
			}
			if strings.TrimSpace(r.stdout) != "" {
				t.Errorf("bad input printed on stdout: %s", r.stdout)
			}
			if n := w.count(); n != baseCalls {
				t.Errorf("journal has %d calls, want %d: bad input left a row", n, baseCalls)
			}
			if n := totalOrders(t, db); n != baseOrders {
				t.Errorf("demo DB has %d orders, want %d", n, baseOrders)
			}
			if n := w.sentTotal("create_order"); n != baseSent {
				t.Errorf("%d create_order requests on the wire, want %d: bad input was sent", n, baseSent)
			}
		})
	}
	// --no-validate sends what the schema refuses: the server is the judge.
	r := cliIn(t, w.bin, dir, "", w.withDB(call("--args", `{"item":"widget","quantity":"two","buyer":"bob"}`, "--no-validate"))...)
	if r.code == exitBadInput || w.sentTotal("create_order") != baseSent+1 || w.count() != baseCalls+1 {
		t.Errorf("--no-validate: exit %d, %d sends, %d calls; want it sent once and journaled\n%s",
			r.code, w.sentTotal("create_order"), w.count(), r)
	}
	if c := w.show(1); c.State != "succeeded" || len(c.Attempts) != 1 || len(c.Decisions) != 0 {
		t.Errorf("bad input changed call 1: %s, %d attempts, %d decisions", c.State, len(c.Attempts), len(c.Decisions))
	}
	if b, err := os.ReadFile(textFile); err != nil || string(b) != text {
		t.Errorf("the text file given as --db was changed: %q %v", b, err)
	}
	if leftovers, _ := filepath.Glob(textFile + "?*"); len(leftovers) > 0 {
		t.Errorf("opening a text file as the journal left files beside it: %v", leftovers)
	}
}

func containsWord(words []string, w string) bool {
	for _, x := range words {
		if x == "--" {
			return false
		}
		if x == w {
			return true
		}
	}
	return false
}

// count is the number of calls `list --json` shows, read with the binary
// built without -race: it checks the journal, it is not what is tested, and
// a race build costs this test a second a case.
func (w *world) count() int {
	w.t.Helper()
	r := cliIn(w.t, e2eFastBin, w.dir, "", "list", "--json", "--db", w.journal)
	wantExit(w.t, r, exitOK, "list --json")
	var calls []json.RawMessage
	if err := json.Unmarshal([]byte(r.stdout), &calls); err != nil {
		w.t.Fatalf("list --json: %v\n%s", err, r)
	}
	return len(calls)
}
