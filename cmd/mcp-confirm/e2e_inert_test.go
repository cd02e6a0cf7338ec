package main

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/mcp-confirm/mcp-confirm/internal/testbin"
)

// A hostile server (testdata/lookalike, raw JSON lines) lists a look-alike
// of an honest tool's name and answers with control bytes, invalid UTF-8
// and spreadsheet formulas. What the CLI prints must tell the two tools
// apart, hold no raw control byte, and every JSON output must be valid
// UTF-8 JSON, with the controls encoding/json leaves raw (DEL, C1, bidi)
// spelled as \u escapes; the CSV export must open in a spreadsheet as text.
func TestE2EHostileOutputsAreInert(t *testing.T) {
	dir := t.TempDir()
	srv := filepath.Join(dir, "lookalike")
	if err := testbin.Build(srv, "./testdata/lookalike"); err != nil {
		t.Fatal(err)
	}
	w := newWorld(t, dir)
	noControls := func(what, s string) {
		t.Helper()
		for _, bad := range []string{"\x1b", "\x07", "\x7f", "\u009b", "\u202e"} {
			if strings.Contains(s, bad) {
				t.Errorf("%s holds a raw %q:\n%q", what, bad, s)
			}
		}
		if !utf8.ValidString(s) {
			t.Errorf("%s is not valid UTF-8:\n%q", what, s)
		}
	}
	validJSON := func(what, s string) {
		t.Helper()
		noControls(what, s)
		for _, line := range strings.Split(strings.TrimSpace(s), "\n") {
			if !json.Valid([]byte(line)) && !json.Valid([]byte(s)) {
				t.Errorf("%s is not JSON: %q", what, line)
			}
		}
	}

	r := w.run("tools", "--", srv)
	wantExit(t, r, exitOK, "tools")
	noControls("tools", r.stdout)
	for _, want := range []string{"place_order ", `place_order\x1b[8m`, `lookalike\x1b]0;pwned\x07-server`} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("tools does not show %q:\n%s", want, r.stdout)
		}
	}
	r = w.run("tools", "--json", "--", srv)
	wantExit(t, r, exitOK, "tools --json")
	validJSON("tools --json", r.stdout)
	var tools []struct{ Name string }
	if err := json.Unmarshal([]byte(r.stdout), &tools); err != nil || len(tools) != 2 || tools[0].Name == tools[1].Name {
		t.Errorf("tools --json does not keep the two names apart (%v): %+v", err, tools)
	}

	r = w.run("call", "place_order", "--args", `{"memo":"=1+1"}`, "--", srv)
	wantExit(t, r, exitOK, "call place_order")
	validJSON("call output", r.stdout)
	r = w.run("call", "place_order\x1b[8m", "--args", `{}`, "--", srv)
	if r.code == exitOK {
		t.Errorf("the look-alike's isError answer exited 0: %s", r)
	}
	noControls("call stderr", r.stderr)
	validJSON("look-alike call output", r.stdout)
	wantExit(t, w.run("note", "1", "--note", `=HYPERLINK("http://evil.example/","click")`), exitOK, "note")

	r = w.run("list")
	noControls("list", r.stdout)
	if !strings.Contains(r.stdout, `place_order\x1b[8m`) {
		t.Errorf("list does not show the look-alike escaped:\n%s", r.stdout)
	}
	for _, id := range []string{"1", "2"} {
		r = w.run("show", id)
		wantExit(t, r, exitOK, "show "+id)
		noControls("show "+id, r.stdout)
		r = w.run("show", "--json", id)
		validJSON("show --json "+id, r.stdout)
	}
	if r := w.run("show", "2"); !strings.Contains(r.stdout, `place_order\x1b[8m`) || !strings.Contains(r.stdout, `lookalike\x1b]0;pwned\x07-server`) {
		t.Errorf("show does not escape the names:\n%s", r.stdout)
	}
	r = w.run("list", "--json")
	validJSON("list --json", r.stdout)
	r = w.run("export", "--format", "jsonl")
	wantExit(t, r, exitOK, "export jsonl")
	validJSON("export jsonl", r.stdout)
	// A run of invalid bytes becomes one U+FFFD (bytes.ToValidUTF8).
	if !strings.Contains(r.stdout, "bad \uFFFD bytes") {
		t.Errorf("export jsonl lost the text around the invalid bytes:\n%s", r.stdout)
	}

	r = w.run("export", "--format", "csv")
	wantExit(t, r, exitOK, "export csv")
	noControls("export csv", r.stdout)
	rows, err := csv.NewReader(bufio.NewReader(strings.NewReader(r.stdout))).ReadAll()
	if err != nil {
		t.Fatalf("export csv does not parse: %v", err)
	}
	sawNote := false
	for _, row := range rows {
		for _, cell := range row {
			if cell != "" && strings.ContainsRune("=+-@\t\r", rune(cell[0])) {
				t.Errorf("a CSV cell a spreadsheet reads as a formula: %q", cell)
			}
			sawNote = sawNote || strings.HasPrefix(cell, `'=HYPERLINK(`)
		}
	}
	if !sawNote {
		t.Errorf("the operator's formula-like note is not in the CSV as text:\n%s", r.stdout)
	}
}
