package demo_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-confirm/mcp-confirm/idempotency"
)

// The dedupe window over real stdio: keyless create_order calls resent to
// a demo-server started with --dedupe-window, counted in its orders table.

// send is one tools/call of create_order with _meta fields of its own.
func (p *demoProc) send(args map[string]any, meta map[string]any) *mcp.CallToolResult {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var req mcp.CallToolRequest
	req.Params.Name = "create_order"
	req.Params.Arguments = args
	if meta != nil {
		req.Params.Meta = &mcp.Meta{AdditionalFields: meta}
	}
	res, err := p.client.CallTool(ctx, req)
	if err != nil {
		p.t.Fatalf("create_order: %v", err)
	}
	if res.IsError {
		if sc, _ := res.StructuredContent.(map[string]any); sc["idempotency"] != "in_progress" {
			p.t.Fatalf("create_order failed: %v", res.Content)
		}
	}
	return res
}

// ordersOf counts the buyer's orders, through the server's own read tool.
func ordersOf(t *testing.T, p *demoProc, buyer string) int {
	t.Helper()
	return len(structured(t, p.mustCall("find_orders", map[string]any{"buyer": buyer}, ""))["orders"].([]any))
}

// deduplicated: the answer is a replay the window gave.
func deduplicated(res *mcp.CallToolResult) bool {
	replayed, _ := metaBool(res, idempotency.MetaReplayed)
	return replayed && dedupedBy(res) == "window"
}

func dedupedBy(res *mcp.CallToolResult) string {
	if res.Meta == nil {
		return ""
	}
	by, _ := res.Meta.AdditionalFields[idempotency.MetaDeduplicatedBy].(string)
	return by
}

// writeLines are the server's "write" log lines with the outcome given.
func writeLines(p *demoProc, outcome string) []string {
	var out []string
	for _, l := range strings.Split(p.stderr.String(), "\n") {
		if strings.Contains(l, "msg=write ") && strings.Contains(l, "outcome="+outcome+" ") {
			out = append(out, l)
		}
	}
	return out
}

func TestDedupeWindowKeylessResend(t *testing.T) {
	p := startDemo(t, filepath.Join(t.TempDir(), "demo.db"), "--dedupe-window", "60s")
	first := p.send(order, nil)
	second := p.send(order, nil)
	if deduplicated(first) {
		t.Errorf("first call marked deduplicated: %+v", first.Meta)
	}
	if !deduplicated(second) {
		t.Errorf("resend inside the window not marked replayed and deduplicated-by window: %+v", second.Meta)
	}
	if a, b := structured(t, first)["order_id"], structured(t, second)["order_id"]; a != b {
		t.Errorf("resend answered order %v, the first was %v", b, a)
	}
	if n := ordersOf(t, p, "alice"); n != 1 {
		t.Errorf("alice has %d orders, want 1", n)
	}
	if got := budget(t, p, "alice"); got != 950 {
		t.Errorf("alice's budget %v, want 950 (deducted once)", got)
	}
	p.stop()
	if lines := writeLines(p, "deduplicated_window"); len(lines) != 1 || !strings.Contains(lines[0], "answer=replayed") || strings.Contains(lines[0], "alice") {
		t.Errorf("log lines for the resend %q, want one with answer=replayed and no argument values", lines)
	}
}

// A keyless resend that carries an argument create_order does not take (a
// client's note, its own request id) is the same order: the window
// compares only the arguments the tool's input schema declares, which are
// all the order is made of (issue 44 item 13b).
func TestDedupeWindowIgnoresUndeclaredArguments(t *testing.T) {
	p := startDemo(t, filepath.Join(t.TempDir(), "demo.db"), "--dedupe-window", "60s")
	with := func(extra map[string]any) map[string]any {
		args := map[string]any{}
		for k, v := range order {
			args[k] = v
		}
		for k, v := range extra {
			args[k] = v
		}
		return args
	}
	first := p.send(with(map[string]any{"note": "first try", "request_id": "r-1"}), nil)
	second := p.send(with(map[string]any{"note": "resent after a timeout", "request_id": "r-2"}), nil)
	third := p.send(with(nil), nil)
	if deduplicated(first) || !deduplicated(second) || !deduplicated(third) {
		t.Errorf("deduplicated: first %v, second %v, third %v; want false, true, true",
			deduplicated(first), deduplicated(second), deduplicated(third))
	}
	if n := ordersOf(t, p, "alice"); n != 1 {
		t.Errorf("alice has %d orders, want 1", n)
	}
	// A declared argument that differs is another order.
	other := with(nil)
	other["quantity"] = 3
	if res := p.send(other, nil); dedupedBy(res) != "" {
		t.Errorf("an order of another quantity deduplicated: %+v", res.Meta)
	}
	if n := ordersOf(t, p, "alice"); n != 2 {
		t.Errorf("alice has %d orders, want 2", n)
	}
}

// Outside the window an identical keyless call is a new order. The window
// is short, and the resend waits until it has certainly passed: the
// server's arrival time of the first call is before its answer came back.
func TestDedupeWindowOutside(t *testing.T) {
	const window = 300 * time.Millisecond
	p := startDemo(t, filepath.Join(t.TempDir(), "demo.db"), "--dedupe-window", window.String())
	p.send(order, nil)
	time.Sleep(window)
	if res := p.send(order, nil); dedupedBy(res) != "" {
		t.Errorf("resend after the window deduplicated: %+v", res.Meta)
	}
	if n := ordersOf(t, p, "alice"); n != 2 {
		t.Errorf("alice has %d orders, want 2", n)
	}
}

func TestDedupeWindowBypass(t *testing.T) {
	p := startDemo(t, filepath.Join(t.TempDir(), "demo.db"), "--dedupe-window", "60s")
	p.send(order, nil)
	repeat := map[string]any{idempotency.IntentionalRepeatArg: true}
	for k, v := range order {
		repeat[k] = v
	}
	for i, res := range []*mcp.CallToolResult{
		p.send(repeat, nil),
		p.send(order, map[string]any{idempotency.MetaIntentionalRepeat: true}),
	} {
		if dedupedBy(res) != "" {
			t.Errorf("bypass %d deduplicated: %+v", i, res.Meta)
		}
	}
	if n := ordersOf(t, p, "alice"); n != 3 {
		t.Errorf("alice has %d orders, want 3 (the first and two meant repeats)", n)
	}
	// A plain resend is still judged, against the first call's record.
	if res := p.send(order, nil); !deduplicated(res) {
		t.Errorf("plain resend after the bypasses not deduplicated: %+v", res.Meta)
	}
	p.stop()
	lines := writeLines(p, "bypassed")
	if len(lines) != 2 || !strings.Contains(lines[0], "bypass=argument") || !strings.Contains(lines[1], "bypass=meta") {
		t.Errorf("bypass log lines %q, want one for the argument and one for _meta", lines)
	}
}

func TestDedupeWindowNeverJudgesKeyedCalls(t *testing.T) {
	p := startDemo(t, filepath.Join(t.TempDir(), "demo.db"), "--dedupe-window", "60s")
	for _, key := range []string{"01JDEDUPEKEYED0000000001", "01JDEDUPEKEYED0000000002"} {
		if res := p.mustCall("create_order", order, key); res.IsError || dedupedBy(res) != "" {
			t.Errorf("keyed call %s: isError=%v meta=%+v, want an order, not deduplicated", key, res.IsError, res.Meta)
		}
	}
	if res := p.send(order, nil); dedupedBy(res) != "" {
		t.Errorf("first keyless call deduplicated against keyed ones: %+v", res.Meta)
	}
	res := p.mustCall("create_order", order, "01JDEDUPEKEYED0000000001")
	if replayed, _ := metaBool(res, idempotency.MetaReplayed); !replayed || dedupedBy(res) != "" {
		t.Errorf("keyed resend: replayed=%v deduplicated-by=%q, want the key's replay and no window", replayed, dedupedBy(res))
	}
	if n := ordersOf(t, p, "alice"); n != 3 {
		t.Errorf("alice has %d orders, want 3 (two keys and one keyless)", n)
	}
}

// The window is in the SQLite file: a resend to a server restarted after a
// crash, inside the window, is still recognised.
func TestDedupeWindowAcrossRestart(t *testing.T) {
	db := filepath.Join(t.TempDir(), "demo.db")
	p := startDemo(t, db, "--dedupe-window", "60s")
	first := p.send(order, nil)
	p.kill()

	p2 := startDemo(t, db, "--dedupe-window", "60s")
	res := p2.send(order, nil)
	if !deduplicated(res) || structured(t, res)["order_id"] != structured(t, first)["order_id"] {
		t.Errorf("resend after a restart: %+v %v, want the first order replayed", res.Meta, res.StructuredContent)
	}
	if n := ordersOf(t, p2, "alice"); n != 1 {
		t.Errorf("alice has %d orders, want 1", n)
	}
}

// Two sessions at once (two server processes on one file, as two stdio
// hosts would be): the window does not depend on the session. With
// --dedupe-scope client it depends on the client's declared name.
func TestDedupeWindowAcrossSessions(t *testing.T) {
	// The second session uses the initialize handshake, the first does not:
	// the client's name is read from either.
	tests := []struct {
		scope, client string
		wantOrders    int
	}{
		{"none", "other-host", 1},
		{"client", "demo-test", 1},
		{"client", "other-host", 2},
	}
	for _, tt := range tests {
		t.Run(tt.scope+" "+tt.client, func(t *testing.T) {
			db := filepath.Join(t.TempDir(), "demo.db")
			flags := []string{"--dedupe-window", "60s", "--dedupe-scope", tt.scope}
			a := startDemo(t, db, flags...)
			b := startDemoAs(t, tt.client, "2025-11-25", db, flags...)
			a.send(order, nil)
			res := b.send(order, nil)
			if got := deduplicated(res); got != (tt.wantOrders == 1) {
				t.Errorf("second session's call deduplicated=%v, want %v", got, tt.wantOrders == 1)
			}
			if n := ordersOf(t, a, "alice"); n != tt.wantOrders {
				t.Errorf("alice has %d orders, want %d", n, tt.wantOrders)
			}
			a.stop()
			b.stop()
			if !strings.Contains(a.stderr.String(), `msg="session started" via=discover`) ||
				!strings.Contains(b.stderr.String(), `msg="session started" via=initialize session=stdio client=`+tt.client) {
				t.Errorf("session start not logged as expected:\n%s\n%s", a.stderr.String(), b.stderr.String())
			}
		})
	}
}

// While the first keyless call still runs, its twin gets the in-progress
// answer, marked deduplicated by the window.
func TestDedupeWindowInProgress(t *testing.T) {
	p := startDemo(t, filepath.Join(t.TempDir(), "demo.db"), "--dedupe-window", "60s", "--delay", "1500ms")
	results := make([]*mcp.CallToolResult, 2)
	var wg sync.WaitGroup
	for i := range results {
		wg.Add(1)
		go func() { defer wg.Done(); results[i] = p.send(order, nil) }()
	}
	wg.Wait()
	var ok, inProgress int
	for i, res := range results {
		sc, _ := res.StructuredContent.(map[string]any)
		switch {
		case !res.IsError && dedupedBy(res) == "":
			ok++
		case res.IsError && sc["idempotency"] == "in_progress" && dedupedBy(res) == "window":
			inProgress++
		default:
			t.Errorf("send %d: unexpected answer %+v %v", i, res.Meta, res.Content)
		}
	}
	if ok != 1 || inProgress != 1 {
		t.Errorf("answers: %d orders, %d in progress; want one of each", ok, inProgress)
	}
	if n := ordersOf(t, p, "alice"); n != 1 {
		t.Errorf("alice has %d orders, want 1", n)
	}
}

var metricsURL = regexp.MustCompile(`metrics_url=(http://\S+/metrics)`)

// scrape reads the server's /metrics page into "name{labels}" → value.
func scrape(t *testing.T, url string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET %s: %s\n%s", url, resp.Status, b)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestDedupeMetricsScrapedOverHTTP(t *testing.T) {
	p := startDemo(t, filepath.Join(t.TempDir(), "demo.db"), "--dedupe-window", "60s", "--metrics", "127.0.0.1:0")
	// The address is logged before the server reads stdin, so it is there
	// once initialize has been answered; stderr is copied asynchronously.
	var url string
	for deadline := time.Now().Add(10 * time.Second); url == "" && time.Now().Before(deadline); {
		if m := metricsURL.FindStringSubmatch(p.stderr.String()); m != nil {
			url = m[1]
		} else {
			time.Sleep(20 * time.Millisecond)
		}
	}
	if url == "" {
		t.Fatalf("no metrics_url in stderr:\n%s", p.stderr.String())
	}
	const key = "01JDEDUPEMETRICS00000001"
	p.send(order, nil)
	p.send(order, nil) // deduplicated by the window
	p.mustCall("create_order", order, key)
	p.mustCall("create_order", order, key) // replayed by key
	if res := p.mustCall("create_order", map[string]any{"item": "widget", "quantity": 5, "buyer": "alice"}, key); !res.IsError {
		t.Fatalf("key reuse was not refused: %v", res.Content)
	}
	p.send(order, map[string]any{idempotency.MetaIntentionalRepeat: true})

	got := scrape(t, url)
	for series, want := range map[string]float64{
		`idempotency_writes_total{outcome="executed"}`:               2,
		`idempotency_writes_total{outcome="deduplicated_window"}`:    1,
		`idempotency_writes_total{outcome="replayed"}`:               1,
		`idempotency_writes_total{outcome="key_reuse_refused"}`:      1,
		`idempotency_writes_total{outcome="bypassed"}`:               1,
		`idempotency_writes_total{outcome="in_progress"}`:            0,
		`idempotency_dedupe_hits_total{by="window",kind="replayed"}`: 1,
		`idempotency_dedupe_hits_total{by="key",kind="replayed"}`:    1,
		`idempotency_dedupe_hits_total{by="key",kind="key_reused"}`:  1,
		`idempotency_replays_total{by="window"}`:                     1,
		`idempotency_replays_total{by="key"}`:                        1,
		`idempotency_in_progress_answers_total{by="key"}`:            0,
		`idempotency_expired_leases_total{by="key"}`:                 0,
		`idempotency_store_failures_total`:                           0,
		`idempotency_sessions_total{client="demo-test"}`:             1,
		`idempotency_records{by="key",state="completed"}`:            1,
		`idempotency_records{by="window",state="completed"}`:         1,
		`idempotency_records{by="window",state="processing"}`:        0,
	} {
		if v, ok := got[series]; !ok || v != want {
			t.Errorf("%s = %v (present %v), want %v", series, v, ok, want)
		}
	}
	if n := ordersOf(t, p, "alice"); n != 3 {
		t.Errorf("alice has %d orders, want 3: keyless, keyed, meant repeat", n)
	}
	if t.Failed() {
		var names []string
		for k, v := range got {
			names = append(names, fmt.Sprintf("%s %v", k, v))
		}
		t.Logf("scraped:\n%s", strings.Join(names, "\n"))
	}
}

// A --metrics address that cannot be listened on is "unavailable", exit 5,
// named on stderr with what to do.
func TestDedupeMetricsAddressInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cmd := exec.Command(bin, "demo-server", "--db", filepath.Join(t.TempDir(), "demo.db"), "--metrics", ln.Addr().String())
	var stderr strings.Builder
	cmd.Stderr = &stderr
	err = cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 5 {
		t.Fatalf("err=%v, want exit 5\n%s", err, stderr.String())
	}
	if msg := stderr.String(); !strings.Contains(msg, "listen for metrics on "+ln.Addr().String()) || !strings.Contains(msg, "give --metrics another address") {
		t.Errorf("stderr should name the address and what to do:\n%s", msg)
	}
}
