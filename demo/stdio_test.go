package demo_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-confirm/mcp-confirm/demo"
	"github.com/mcp-confirm/mcp-confirm/idempotency"
)

var order = map[string]any{"item": "widget", "quantity": 2, "buyer": "alice"}

func structured(t *testing.T, res *mcp.CallToolResult) map[string]any {
	t.Helper()
	m, ok := res.StructuredContent.(map[string]any)
	if !ok {
		t.Fatalf("no structured content in %+v", res)
	}
	return m
}

func metaBool(res *mcp.CallToolResult, key string) (value, present bool) {
	if res.Meta == nil {
		return false, false
	}
	value, present = res.Meta.AdditionalFields[key].(bool)
	return value, present
}

func countOrders(t *testing.T, db, key string) int {
	t.Helper()
	n, err := demo.CountOrders(context.Background(), db, key)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func budget(t *testing.T, p *demoProc, buyer string) float64 {
	t.Helper()
	res := p.mustCall("get_budget", map[string]any{"buyer": buyer}, "")
	return structured(t, res)["budget_left"].(float64)
}

// The lost-response story of SPEC §1, end to end: the server commits and
// never answers, the client times out, the order is in the server's
// database; resending the same key returns the stored order, also after a
// restart, and never makes a second one.
func TestLostResponseResendReplays(t *testing.T) {
	db := filepath.Join(t.TempDir(), "demo.db")
	const key = "01JLOSTRESPONSE0000000001"
	p := startDemo(t, db, "--hang-after-commit", "1")

	_, err := p.call(time.Second, "create_order", order, key, nil)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("first send: err=%v, want a client-side timeout", err)
	}
	// The commit happened before the hang, but poll rather than assume it
	// beat the client's deadline.
	deadline := time.Now().Add(10 * time.Second)
	for countOrders(t, db, key) != 1 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if n := countOrders(t, db, key); n != 1 {
		t.Fatalf("orders under the key after the lost response: %d, want 1", n)
	}

	res := p.mustCall("create_order", order, key)
	if res.IsError {
		t.Fatalf("resend: %v", res.Content)
	}
	if replayed, _ := metaBool(res, idempotency.MetaReplayed); !replayed {
		t.Errorf("resend not marked replayed: %+v", res.Meta)
	}
	found := structured(t, p.mustCall("find_orders", map[string]any{"idempotency_key": key}, ""))["orders"].([]any)
	if len(found) != 1 {
		t.Fatalf("find_orders by key: %d orders, want 1", len(found))
	}
	if got, want := structured(t, res)["order_id"], found[0].(map[string]any)["order_id"]; got != want {
		t.Errorf("replayed order_id %v, find_orders says %v", got, want)
	}
	if got := budget(t, p, "alice"); got != 950 {
		t.Errorf("alice's budget %v, want 950 (deducted once)", got)
	}

	res = p.mustCall("create_order", map[string]any{"item": "widget", "quantity": 3, "buyer": "alice"}, key)
	sc := structured(t, res)
	if !res.IsError || sc["idempotency"] != "key_reused" || !reflect.DeepEqual(sc["fields"], []any{"quantity"}) {
		t.Errorf("other quantity under the key: isError=%v %v, want key_reused naming quantity", res.IsError, sc)
	}
	p.stop()

	// A restarted server on the same file still knows the key.
	p2 := startDemo(t, db)
	res = p2.mustCall("create_order", order, key)
	if replayed, _ := metaBool(res, idempotency.MetaReplayed); res.IsError || !replayed {
		t.Errorf("resend after restart: isError=%v replayed=%v", res.IsError, replayed)
	}
	if n := countOrders(t, db, key); n != 1 {
		t.Errorf("orders under the key at the end: %d, want 1", n)
	}
	if got := budget(t, p2, "alice"); got != 950 {
		t.Errorf("alice's budget after restart %v, want 950", got)
	}
}

func TestConcurrentSendsOfOneKey(t *testing.T) {
	db := filepath.Join(t.TempDir(), "demo.db")
	const key = "01JCONCURRENT00000000001"
	// The delay keeps the first execution running while the second arrives.
	p := startDemo(t, db, "--delay", "1500ms")
	results := make([]*mcp.CallToolResult, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = p.call(15*time.Second, "create_order", order, key, nil)
		}()
	}
	wg.Wait()
	var ok, inProgress int
	for i, res := range results {
		if errs[i] != nil {
			t.Fatalf("send %d: %v", i, errs[i])
		}
		switch sc, _ := res.StructuredContent.(map[string]any); {
		case !res.IsError:
			ok++
		case sc["idempotency"] == "in_progress":
			inProgress++
		default:
			t.Errorf("send %d: unexpected answer %v", i, res.Content)
		}
	}
	if ok != 1 || inProgress != 1 {
		t.Errorf("answers: %d orders, %d in progress; want one of each", ok, inProgress)
	}
	if n := countOrders(t, db, key); n != 1 {
		t.Errorf("orders under the key: %d, want 1", n)
	}
}

func TestDelaySendsProgress(t *testing.T) {
	p := startDemo(t, filepath.Join(t.TempDir(), "demo.db"), "--delay", "1200ms")
	res, err := p.call(15*time.Second, "create_order", order, "01JPROGRESS0000000000001", "tok-1")
	if err != nil || res.IsError {
		t.Fatalf("create_order: err=%v result=%+v", err, res)
	}
	// Progress may trail the answer on the wire (mcp-go sends it through an
	// async queue), so give the stragglers time to arrive.
	deadline := time.Now().Add(5 * time.Second)
	for p.progressFor("tok-1") < 3 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if n := p.progressFor("tok-1"); n < 3 {
		t.Errorf("%d progress notifications for a 1.2s write, want at least 3 (every 250ms)", n)
	}
}

func TestFailRateFailsBeforeCommit(t *testing.T) {
	db := filepath.Join(t.TempDir(), "demo.db")
	const key = "01JFAILRATE0000000000001"
	p := startDemo(t, db, "--fail-rate", "1", "--seed", "7")
	for i := 0; i < 2; i++ { // retryable: the second send runs (and fails) again
		res := p.mustCall("create_order", order, key)
		if !res.IsError {
			t.Fatalf("send %d: isError false with --fail-rate 1", i)
		}
		if retry, ok := metaBool(res, idempotency.MetaShouldRetry); !ok || !retry {
			t.Errorf("send %d: should-retry %v (present %v), want true: nothing was committed", i, retry, ok)
		}
		if replayed, _ := metaBool(res, idempotency.MetaReplayed); replayed {
			t.Errorf("send %d: a retryable failure must run again, not replay", i)
		}
	}
	if n := countOrders(t, db, key); n != 0 {
		t.Errorf("orders under the key: %d, want 0", n)
	}
	if got := budget(t, p, "alice"); got != 1000 {
		t.Errorf("alice's budget %v, want 1000 (untouched)", got)
	}
}

func TestDefiniteFailures(t *testing.T) {
	db := filepath.Join(t.TempDir(), "demo.db")
	p := startDemo(t, db)
	tests := []struct {
		name, key string
		args      map[string]any
		wantError string // structuredContent "error", or "" for a rejection
		wantKind  string // structuredContent "idempotency"
	}{
		{"insufficient budget", "01JNOBUDGET0000000000001", map[string]any{"item": "gizmo", "quantity": 2, "buyer": "carol"}, "insufficient_budget", ""},
		{"unknown buyer", "01JNOBUYER00000000000001", map[string]any{"item": "widget", "quantity": 1, "buyer": "mallory"}, "unknown_buyer", ""},
		{"unknown item is rejected, not stored", "01JNOITEM000000000000001", map[string]any{"item": "sprocket", "quantity": 1, "buyer": "bob"}, "", "rejected"},
		{"fractional quantity is rejected", "01JHALF00000000000000001", map[string]any{"item": "widget", "quantity": 1.5, "buyer": "bob"}, "", "rejected"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for i := 0; i < 2; i++ {
				res := p.mustCall("create_order", tt.args, tt.key)
				sc := structured(t, res)
				if !res.IsError || sc["error"] != nilIfEmpty(tt.wantError) || sc["idempotency"] != nilIfEmpty(tt.wantKind) {
					t.Errorf("send %d: isError=%v %v", i, res.IsError, sc)
				}
				// A stored failure is replayed; a rejection is never stored.
				replayed, _ := metaBool(res, idempotency.MetaReplayed)
				if want := i == 1 && tt.wantError != ""; replayed != want {
					t.Errorf("send %d: replayed=%v, want %v", i, replayed, want)
				}
			}
			if n := countOrders(t, db, tt.key); n != 0 {
				t.Errorf("orders: %d, want 0", n)
			}
		})
	}
	if got := budget(t, p, "carol"); got != 100 {
		t.Errorf("carol's budget %v, want 100", got)
	}
}

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func TestBadFlags(t *testing.T) {
	for _, args := range [][]string{{"--fail-rate", "2"}, {"--delay", "soon"}, {"--hang-after-commit", "-1"}, {"extra"},
		{"--dedupe-window", "-1s"}, {"--dedupe-window", "soon"}, {"--dedupe-scope", "client"},
		{"--dedupe-window", "60s", "--dedupe-scope", "buyer"}, {"--dedupe-window", "60s", "--dedupe-scope", "arg:"},
		{"--metrics", "nope"}, {"--metrics", "127.0.0.1:99999"}} {
		cmd := exec.Command(bin, append([]string{"demo-server"}, args...)...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		err := cmd.Run()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 2 {
			t.Errorf("%v: err=%v, want exit 2", args, err)
		}
		if lines := strings.Count(stderr.String(), "\n"); lines < 1 || lines > 2 || !strings.Contains(stderr.String(), "--help") {
			t.Errorf("%v: stderr %q, want one or two lines pointing to --help", args, stderr.String())
		}
	}
}

// TestDBCreatesFolders: --db in folders that do not exist yet makes them
// 0700 and the file 0600, as the journal's are; a folder that cannot be
// made is named as the cause, exit 5.
func TestDBCreatesFolders(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a", "b", "orders.db")
	cmd := exec.Command(bin, "demo-server", "--db", path)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil { // stdin is empty: serve, then exit
		t.Fatalf("demo-server --db %s: %v\n%s", path, err, stderr.String())
	}
	for p, want := range map[string]os.FileMode{
		filepath.Join(dir, "a"):      0o700,
		filepath.Join(dir, "a", "b"): 0o700,
		path:                         0o600,
	} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != want {
			t.Errorf("%s: mode %o, want %o", p, got, want)
		}
	}
	// A path under a regular file: the folder cannot be made.
	file := filepath.Join(dir, "plain")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(file, "sub", "orders.db")
	cmd = exec.Command(bin, "demo-server", "--db", bad)
	stderr.Reset()
	cmd.Stderr = &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 5 {
		t.Fatalf("demo-server --db %s: err=%v, want exit 5\n%s", bad, err, stderr.String())
	}
	msg := stderr.String()
	if !strings.Contains(msg, "create the folder "+filepath.Dir(bad)) || !strings.Contains(msg, "could not be made") ||
		strings.Contains(msg, "locked") {
		t.Errorf("stderr should name the folder that could not be made, not a lock:\n%s", msg)
	}
}
