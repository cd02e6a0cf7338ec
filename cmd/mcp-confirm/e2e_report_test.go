package main

import (
	"encoding/csv"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReport: calls made and decided through the binary on the demo
// server, then report in its three formats. What the journal says was
// executed equals the orders the server holds.
func TestReport(t *testing.T) {
	dir := t.TempDir()
	w := newWorld(t, dir)
	policy := filepath.Join(dir, "policy.toml")
	if err := os.WriteFile(policy, []byte("[defaults]\nmax_total = \"1s\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	lost := []string{"--timeout", "1s"}
	// Lost after commit, retried with its key: the server replays it.
	wantExit(t, w.call(`{"item":"gadget","quantity":1,"buyer":"bob"}`, lost, "--hang-after-commit", "1"), 3, "lost 1")
	wantExit(t, w.run("retry", "1"), 0, "retry 1 on its own server")
	// Lost after commit, marked applied.
	wantExit(t, w.call(`{"item":"gizmo","quantity":1,"buyer":"carol"}`, lost, "--hang-after-commit", "1"), 3, "lost 2")
	wantExit(t, w.run("mark", "2", "applied"), 0, "mark 2")
	// Lost before commit (the clock ran out first), abandoned.
	wantExit(t, w.call(`{"item":"widget","quantity":3,"buyer":"alice"}`, append(lost, "--policy", policy), "--delay", "3s"), 3, "lost 3")
	wantExit(t, w.run("abandon", "3"), 0, "abandon 3")
	// One plain success, one definite failure.
	wantExit(t, w.call(`{"item":"widget","quantity":1,"buyer":"alice"}`, nil), 0, "ok 4")
	wantExit(t, w.call(`{"item":"widget","quantity":2,"buyer":"alice"}`, nil, "--fail-rate", "1"), 1, "failed 5")

	r := w.run("report", "--format", "json")
	wantExit(t, r, 0, "report --format json")
	var rep struct {
		Rows  []json.RawMessage `json:"rows"`
		Total struct {
			Calls        int            `json:"calls"`
			Outcomes     map[string]int `json:"outcomes"`
			Unknowns     int            `json:"unknowns"`
			Resolved     map[string]int `json:"resolved"`
			Retries      int            `json:"retries"`
			Replays      int            `json:"replays"`
			TimeToDecide struct {
				Count  int     `json:"count"`
				Median float64 `json:"median_seconds"`
				P90    float64 `json:"p90_seconds"`
			} `json:"time_to_decide"`
			Executed int `json:"executed"`
		} `json:"total"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("report json: %v\n%s", err, r.stdout)
	}
	tot := rep.Total
	if tot.Calls != 5 || tot.Outcomes["succeeded"] != 2 || tot.Outcomes["applied"] != 1 || tot.Outcomes["abandoned"] != 1 || tot.Outcomes["failed"] != 1 {
		t.Errorf("calls and outcomes: %+v", tot)
	}
	if tot.Unknowns != 3 || tot.Resolved["retried"] != 1 || tot.Resolved["marked_applied"] != 1 || tot.Resolved["abandoned"] != 1 || tot.Resolved["unresolved"] != 0 {
		t.Errorf("unknowns and how they were resolved: %d %v", tot.Unknowns, tot.Resolved)
	}
	if tot.Retries != 1 || tot.Replays != 1 || tot.TimeToDecide.Count != 3 || tot.TimeToDecide.P90 < tot.TimeToDecide.Median || tot.TimeToDecide.Median <= 0 {
		t.Errorf("retries %d, replays %d, time to decide %+v", tot.Retries, tot.Replays, tot.TimeToDecide)
	}
	if orders := totalOrders(t, w.db()); tot.Executed != 3 || orders != tot.Executed {
		t.Errorf("executed %d by the journal, %d orders on the server: want 3 and 3", tot.Executed, orders)
	}

	r = w.run("report", "--format", "csv", "--since", "1d")
	wantExit(t, r, 0, "report --format csv")
	recs, err := csv.NewReader(strings.NewReader(r.stdout)).ReadAll()
	if err != nil || len(recs) != len(rep.Rows)+2 {
		t.Fatalf("csv: %d records (%v), want a header, %d rows and a total\n%s", len(recs), err, len(rep.Rows), r.stdout)
	}
	col := map[string]int{}
	for i, h := range recs[0] {
		col[h] = i
	}
	last := recs[len(recs)-1]
	if last[0] != "all" || last[col["executed"]] != "3" || last[col["replays"]] != "1" || last[col["resolved_retried"]] != "1" {
		t.Errorf("csv total row: %v", last)
	}

	r = w.run("report")
	wantExit(t, r, 0, "report (markdown)")
	if !strings.Contains(r.stdout, "| **all** |") || !strings.Contains(r.stdout, "3: marked applied 1, abandoned 1, retried 1") ||
		!strings.Contains(r.stdout, "succeeded or marked applied, 3 in all") {
		t.Errorf("markdown report:\n%s", r.stdout)
	}
	// Nothing in a period before the calls: an empty table, and 0 executed.
	r = w.run("report", "--since", "2020-01-01T00:00:00Z", "--format", "json")
	wantExit(t, r, 0, "report since 2020")
	if !strings.Contains(r.stdout, `"executed": 3`) {
		t.Errorf("since 2020 covers all the calls:\n%s", r.stdout)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"report", "--format", "xml"}, `no format "xml"`},
		{[]string{"report", "--since", "last week"}, `--since "last week"`},
		{[]string{"report", "x"}, `unexpected argument "x"`},
	} {
		r := w.run(tc.args...)
		wantExit(t, r, 2, strings.Join(tc.args, " "))
		stderrLines(t, r, strings.Join(tc.args, " "))
		if !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%v: stderr should say %q:\n%s", tc.args, tc.want, r.stderr)
		}
	}
}
