package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/mcp-confirm/mcp-confirm/internal/testbin"
)

// A server that echoes its arguments (testdata/echo) is given card numbers
// and CVVs the policy redacts, nested and at the top: in its results, its
// JSON-RPC errors, an automatic query and a query run later by another
// process. No redacted value may be anywhere the journal keeps or gives
// out: the file, its WAL, show (text and JSON), list and every export. The
// values that are not redacted must still be there, or the test would pass
// on a journal that stores nothing.
func TestE2ERedactedValuesAreStoredNowhere(t *testing.T) {
	dir := t.TempDir()
	srv := filepath.Join(dir, "echo")
	if err := testbin.Build(srv, "./testdata/echo"); err != nil {
		t.Fatal(err)
	}
	policy := filepath.Join(dir, "policy.toml")
	if err := os.WriteFile(policy, []byte(`
[tools.pay]
timeout = "1s"
redact = ["payment.card_number", "cvv"]
query_tool = "find_payment"
`), 0o600); err != nil {
		t.Fatal(err)
	}
	w := newWorld(t, dir)
	server := []string{"--", srv, filepath.Join(dir, "payments.txt")}
	pay := func(card, cvv, mode string, code int) {
		t.Helper()
		args := `{"payment":{"card_number":"` + card + `","holder":"Ann Example"},"cvv":"` + cvv + `","amount":5,"mode":"` + mode + `"}`
		r := w.run(append([]string{"call", "pay", "--policy", policy, "--args", args}, server...)...)
		wantExit(t, r, code, "pay "+mode)
	}
	pay("4111111111111111", "7371", "ok", exitOK)
	pay("5500005555555559", "8462", "error", exitFailed)
	pay("4000056655665556", "9553", "silent", exitUnknown) // and the automatic query
	wantExit(t, w.run(append([]string{"query", "3", "--policy", policy}, server...)...), exitOK, "query 3")

	secrets := []string{"4111111111111111", "5500005555555559", "4000056655665556", "7371", "8462", "9553"}
	token := regexp.MustCompile(`\b(` + strings.Join(secrets, "|") + `)\b`)
	where := map[string][]byte{}
	for _, f := range []string{w.journal, w.journal + "-wal"} {
		b, err := os.ReadFile(f)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		where[filepath.Base(f)] = b
	}
	for _, cmd := range [][]string{
		{"show", "1"}, {"show", "2"}, {"show", "3"}, {"show", "--json", "1"}, {"show", "--json", "2"}, {"show", "--json", "3"},
		{"list"}, {"list", "--json"}, {"export", "--format", "jsonl"}, {"export", "--format", "csv"},
	} {
		r := w.run(cmd...)
		wantExit(t, r, exitOK, strings.Join(cmd, " "))
		where[strings.Join(cmd, " ")] = []byte(r.stdout)
	}
	for name, b := range where {
		// The journal's pages hold random bytes too: in them, only the long
		// values are looked for byte for byte, the CVVs as they would be
		// written in JSON.
		for _, s := range secrets {
			if len(s) >= 8 && bytes.Contains(b, []byte(s)) || bytes.Contains(b, []byte(`"`+s+`"`)) {
				t.Errorf("%s holds the redacted value %s", name, s)
			}
		}
		if !strings.HasPrefix(name, "journal.db") {
			if m := token.Find(b); m != nil {
				t.Errorf("%s holds the redacted value %s:\n%s", name, m, b)
			}
		}
	}
	// What was not redacted is kept: the server's words and the holder.
	export := string(where["export --format jsonl"])
	for _, want := range []string{"charged", "cannot charge", "payments:", "Ann Example", "[redacted]"} {
		if !strings.Contains(export, want) {
			t.Errorf("export jsonl lost %q (the test would pass on an empty journal):\n%s", want, export)
		}
	}
	if n := strings.Count(export, `"action":"query"`); n < 2 {
		t.Errorf("export holds %d query decisions, want the automatic one and query 3's:\n%s", n, export)
	}
}
