package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcp-confirm/mcp-confirm/pending"
)

// These tests run the read-only commands in-process on a journal seeded
// through pending, and check the JSON names of SPEC §4 and the exit codes.

func runIn(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	e := &env{stdin: strings.NewReader(""), stdout: &out, stderr: &errb, getenv: func(string) string { return "" }}
	code = run(context.Background(), args, e)
	return out.String(), errb.String(), code
}

func seedJournal(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "journal.db")
	ctx := context.Background()
	j, err := pending.Open(ctx, path, pending.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	for i, args := range []string{`{"item":"widget"}`, `{"item":"gadget"}`} {
		c, err := j.RecordIntent(ctx, pending.Intent{Server: "demo", Tool: "create_order", Kind: pending.KindWrite,
			KindSource: pending.KindFromDefault, Key: "key-000000000000000" + string(rune('a'+i)), Args: json.RawMessage(args),
			Fingerprint: "fp" + args, Session: 1})
		if err != nil {
			t.Fatal(err)
		}
		if err := j.RecordOutcome(ctx, c.ID, 1, pending.Outcome{Event: pending.EventLost, Reason: "idle timeout", Clock: "idle"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := j.Decide(ctx, 1, pending.DecisionInput{Action: pending.ActionAbandon, Operator: "ops", Note: "refunded by hand"}); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestListAndShowJSON(t *testing.T) {
	db := seedJournal(t)
	out, errOut, code := runIn(t, "list", "--db", db, "--state", "unknown", "--json")
	if code != 0 {
		t.Fatalf("list: %d %s", code, errOut)
	}
	var calls []map[string]any
	if err := json.Unmarshal([]byte(out), &calls); err != nil {
		t.Fatalf("list --json: %v\n%s", err, out)
	}
	if len(calls) != 1 || calls[0]["state"] != "unknown" || calls[0]["id"] != float64(2) {
		t.Fatalf("list --state unknown: %v", calls)
	}
	for _, k := range []string{"id", "state", "reason", "server", "tool", "kind", "kind_source", "key", "args", "created_at", "updated_at", "conflict"} {
		if _, ok := calls[0][k]; !ok {
			t.Errorf("list --json lacks %q", k)
		}
	}
	out, _, code = runIn(t, "show", "1", "--json", "--db", db)
	if code != 0 {
		t.Fatalf("show: %d", code)
	}
	var c struct {
		State    string `json:"state"`
		Attempts []struct {
			N       int    `json:"n"`
			Outcome string `json:"outcome"`
			Clock   string `json:"clock"`
		} `json:"attempts"`
		Decisions []struct {
			Action, Operator, Note, At string
		} `json:"decisions"`
	}
	if err := json.Unmarshal([]byte(out), &c); err != nil {
		t.Fatal(err)
	}
	if c.State != "abandoned" || len(c.Attempts) != 1 || c.Attempts[0].Clock != "idle" || len(c.Decisions) != 1 ||
		c.Decisions[0].Note != "refunded by hand" || c.Decisions[0].Operator != "ops" || c.Decisions[0].At == "" {
		t.Fatalf("show --json: %s", out)
	}
	// Text forms run too.
	if out, _, code := runIn(t, "list", "--db", db); code != 0 || !strings.Contains(out, "create_order") {
		t.Fatalf("list text: %d %s", code, out)
	}
	if out, _, code := runIn(t, "show", "2", "--db", db); code != 0 || !strings.Contains(out, "idle timeout") {
		t.Fatalf("show text: %d %s", code, out)
	}
}

func TestReadCommandErrors(t *testing.T) {
	db := seedJournal(t)
	text := filepath.Join(t.TempDir(), "notes.txt")
	os.WriteFile(text, []byte("not a journal"), 0o600)
	cases := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"show", "99", "--db", db}, exitBadInput, "no call 99"},
		{[]string{"show", "x1", "--db", db}, exitBadInput, "not a call id"},
		{[]string{"show", "--db", db}, exitBadInput, "which call"},
		{[]string{"list", "--state", "lost", "--db", db}, exitBadInput, "no state"},
		{[]string{"list", "--db", text}, exitUnavailable, "not an mcp-confirm journal"},
		{[]string{"export", "--format", "xml", "--db", db}, exitBadInput, "no format"},
		{[]string{"export", "--since", "yesterday", "--db", db}, exitBadInput, "--since"},
		{[]string{"list", "--bogus"}, exitBadInput, "unknown flag: --bogus"},
		{[]string{"frobnicate"}, exitBadInput, "unknown command"},
	}
	for _, tc := range cases {
		_, errOut, code := runIn(t, tc.args...)
		lines := strings.Count(strings.TrimSpace(errOut), "\n") + 1
		if code != tc.code || !strings.Contains(errOut, tc.want) || lines > 2 {
			t.Errorf("%v: exit %d (want %d), stderr %q (want %q, at most 2 lines)", tc.args, code, tc.code, errOut, tc.want)
		}
	}
	if b, _ := os.ReadFile(text); string(b) != "not a journal" {
		t.Fatal("a refused open changed the file")
	}
}

func TestExportFormats(t *testing.T) {
	db := seedJournal(t)
	out, _, code := runIn(t, "export", "--db", db)
	if code != 0 {
		t.Fatalf("export: %d", code)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 {
		t.Fatalf("jsonl lines: %d\n%s", len(lines), out)
	}
	var first struct {
		ID        int64             `json:"id"`
		Attempts  []json.RawMessage `json:"attempts"`
		Decisions []json.RawMessage `json:"decisions"`
	}
	if err := json.Unmarshal([]byte(lines[0]), &first); err != nil || first.ID != 1 || len(first.Attempts) != 1 || len(first.Decisions) != 1 {
		t.Fatalf("jsonl first line: %v %s", err, lines[0])
	}
	out, _, code = runIn(t, "export", "--format", "csv", "--db", db)
	if code != 0 {
		t.Fatalf("export csv: %d", code)
	}
	recs, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, r := range recs[1:] {
		kinds[r[0]]++
	}
	if kinds["call"] != 2 || kinds["attempt"] != 2 || kinds["decision"] != 1 || recs[0][0] != "record" {
		t.Fatalf("csv records: %v", kinds)
	}
	out, _, _ = runIn(t, "export", "--since", "1h", "--db", db)
	if strings.Count(out, "\n") != 2 {
		t.Fatalf("--since 1h should keep both fresh calls: %s", out)
	}
	out, _, _ = runIn(t, "export", "--since", "2999-01-01", "--db", db)
	if out != "" {
		t.Fatalf("--since in the future should export nothing: %s", out)
	}
}

func TestStatsJSON(t *testing.T) {
	db := seedJournal(t)
	out, _, code := runIn(t, "stats", "--json", "--db", db)
	if code != 0 {
		t.Fatalf("stats: %d", code)
	}
	var st pending.Stats
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatal(err)
	}
	if st.Calls != 2 || st.ByState[pending.StateUnknown] != 1 || st.ByState[pending.StateAbandoned] != 1 ||
		st.Timeouts != 2 || st.ByTool["create_order"][pending.StateUnknown] != 1 || st.TimeToResolve.Count != 1 {
		t.Fatalf("stats: %+v", st)
	}
}

func TestHelpAndVersion(t *testing.T) {
	out, _, code := runIn(t, "--help")
	if code != 0 || !strings.Contains(out, "Exit codes") || !strings.Contains(out, "retry") {
		t.Fatalf("--help: %d %s", code, out)
	}
	out, _, code = runIn(t, "--version")
	if code != 0 || !strings.HasPrefix(out, "mcp-confirm ") {
		t.Fatalf("--version: %d %s", code, out)
	}
}
