package idempotency

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// clock is a settable clock for lease and expiry tests.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time          { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Advance(d time.Duration) { c.mu.Lock(); c.now = c.now.Add(d); c.mu.Unlock() }

func openStore(t testing.TB) *SQLiteStore {
	t.Helper()
	s, err := OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "idem.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

type fixture struct {
	store  *SQLiteStore
	clock  *clock
	mw     *Middleware
	events []Event
	mu     sync.Mutex
}

func newFixture(t testing.TB, opts Options) *fixture {
	t.Helper()
	f := &fixture{store: openStore(t), clock: &clock{now: time.Date(2026, 8, 1, 12, 0, 0, 0, time.UTC)}}
	opts.Store = f.store
	opts.Now = f.clock.Now
	if opts.KeyArg == "" {
		opts.KeyArg = "idempotency_key"
	}
	opts.OnEvent = func(e Event) { f.mu.Lock(); f.events = append(f.events, e); f.mu.Unlock() }
	mw, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	f.mw = mw
	return f
}

func (f *fixture) eventKinds() []EventKind {
	f.mu.Lock()
	defer f.mu.Unlock()
	var kinds []EventKind
	for _, e := range f.events {
		kinds = append(kinds, e.Kind)
	}
	return kinds
}

// request builds a tools/call as the server would decode it from the wire:
// the raw argument bytes and their decoded map both set.
func request(metaKey string, args map[string]any) mcp.CallToolRequest {
	var req mcp.CallToolRequest
	req.Params.Name = "create_order"
	raw, _ := json.Marshal(args)
	req.Params.RawArguments = raw
	var decoded any
	json.Unmarshal(raw, &decoded)
	req.Params.Arguments = decoded
	if metaKey != "" {
		req.Params.Meta = &mcp.Meta{AdditionalFields: map[string]any{MetaKey: metaKey}}
	}
	return req
}

// counting returns a handler that counts executions and answers with
// structured content echoing the run number.
func counting(runs *atomic.Int64) server.ToolHandlerFunc {
	return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		n := runs.Add(1)
		return mcp.NewToolResultStructured(map[string]any{"run": n}, fmt.Sprintf("run %d", n)), nil
	}
}

func metaBool(res *mcp.CallToolResult, key string) (bool, bool) {
	if res.Meta == nil {
		return false, false
	}
	v, ok := res.Meta.AdditionalFields[key].(bool)
	return v, ok
}

func idempotencyKind(res *mcp.CallToolResult) string {
	sc, _ := res.StructuredContent.(map[string]any)
	s, _ := sc["idempotency"].(string)
	return s
}

func do(t testing.TB, h server.ToolHandlerFunc, req mcp.CallToolRequest) *mcp.CallToolResult {
	t.Helper()
	res, err := h(context.Background(), req)
	if err != nil {
		t.Fatalf("handler error: %v (the middleware answers with results only)", err)
	}
	return res
}

func TestRepeats(t *testing.T) {
	order := map[string]any{"item": "widget", "quantity": 2, "buyer": "alice"}
	withArgKey := func(k string, m map[string]any) map[string]any {
		out := map[string]any{"idempotency_key": k}
		for a, v := range m {
			out[a] = v
		}
		return out
	}
	tests := []struct {
		name        string
		first       mcp.CallToolRequest
		second      mcp.CallToolRequest
		wantRuns    int64
		wantKind    string // idempotency kind of the second answer, "" for a tool answer
		wantReplay  bool
		wantRetry   *bool
		wantEvents  []EventKind
		wantSameRun bool // second answer carries the first run's result
	}{
		{
			name: "no key runs every time", first: request("", order), second: request("", order),
			wantRuns: 2, wantRetry: ptr(false),
		},
		{
			name: "meta key replays", first: request("k-meta-1", order), second: request("k-meta-1", order),
			wantRuns: 1, wantReplay: true, wantRetry: ptr(false), wantEvents: []EventKind{EventReplayed}, wantSameRun: true,
		},
		{
			name: "argument key replays", first: request("", withArgKey("k-arg-1", order)), second: request("", withArgKey("k-arg-1", order)),
			wantRuns: 1, wantReplay: true, wantRetry: ptr(false), wantEvents: []EventKind{EventReplayed}, wantSameRun: true,
		},
		{
			name: "key moved from meta to argument is the same call", first: request("k-move", order), second: request("", withArgKey("k-move", order)),
			wantRuns: 1, wantReplay: true, wantRetry: ptr(false), wantEvents: []EventKind{EventReplayed}, wantSameRun: true,
		},
		{
			name: "same key both places agrees", first: request("k-both", withArgKey("k-both", order)), second: request("k-both", order),
			wantRuns: 1, wantReplay: true, wantRetry: ptr(false), wantEvents: []EventKind{EventReplayed}, wantSameRun: true,
		},
		{
			name: "other arguments under the key are refused", first: request("k-reuse", order),
			second:   request("k-reuse", map[string]any{"item": "widget", "quantity": 3, "buyer": "alice"}),
			wantRuns: 1, wantKind: "key_reused", wantRetry: ptr(false), wantEvents: []EventKind{EventKeyReused},
		},
		{
			name: "meta and argument keys that differ are refused", first: request("k-x", order), second: request("k-y", withArgKey("k-z", order)),
			wantRuns: 1, wantKind: "invalid_key", wantRetry: ptr(false),
		},
		{
			name: "non-string key is refused", first: request("k-ok", order), second: request("", withArgKey("", map[string]any{"idempotency_key": 7})),
			wantRuns: 1, wantKind: "invalid_key", wantRetry: ptr(false),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, Options{})
			var runs atomic.Int64
			h := f.mw.Wrap(counting(&runs))
			first := do(t, h, tt.first)
			second := do(t, h, tt.second)
			if got := runs.Load(); got != tt.wantRuns {
				t.Errorf("handler ran %d times, want %d", got, tt.wantRuns)
			}
			if got := idempotencyKind(second); got != tt.wantKind {
				t.Errorf("second answer idempotency=%q, want %q (%v)", got, tt.wantKind, second.Content)
			}
			if tt.wantKind != "" && !second.IsError {
				t.Errorf("refusal %q must have isError true", tt.wantKind)
			}
			if got, _ := metaBool(second, MetaReplayed); got != tt.wantReplay {
				t.Errorf("replayed=%v, want %v", got, tt.wantReplay)
			}
			retry, ok := metaBool(second, MetaShouldRetry)
			if (tt.wantRetry != nil) != ok || (ok && retry != *tt.wantRetry) {
				t.Errorf("should-retry=%v (present %v), want %v", retry, ok, tt.wantRetry)
			}
			a, _ := json.Marshal(first.StructuredContent)
			b, _ := json.Marshal(second.StructuredContent)
			if tt.wantSameRun && string(a) != string(b) {
				t.Errorf("replay %v differs from the first answer %v", second.StructuredContent, first.StructuredContent)
			}
			if got := f.eventKinds(); !reflect.DeepEqual(got, tt.wantEvents) {
				t.Errorf("events %v, want %v", got, tt.wantEvents)
			}
			if got := f.mw.DedupeHits(); got != int64(len(tt.wantEvents)) {
				t.Errorf("DedupeHits=%d, want %d", got, len(tt.wantEvents))
			}
		})
	}
}

func TestKeyReuseNamesFieldsAndStoresNothing(t *testing.T) {
	f := newFixture(t, Options{})
	var runs atomic.Int64
	h := f.mw.Wrap(counting(&runs))
	do(t, h, request("k1", map[string]any{"item": "widget", "quantity": 2, "buyer": "alice"}))
	res := do(t, h, request("k1", map[string]any{"item": "gadget", "quantity": 2, "buyer": "bob", "note": "x"}))
	sc := res.StructuredContent.(map[string]any)
	if got, want := sc["fields"], []string{"buyer", "item", "note"}; !reflect.DeepEqual(got, want) {
		t.Errorf("fields %v, want %v", got, want)
	}
	rec, _, err := f.store.Lookup(context.Background(), "k1")
	if err != nil {
		t.Fatal(err)
	}
	if rec.State != StateCompleted || rec.Attempts != 1 || string(rec.Args) != `{"buyer":"alice","item":"widget","quantity":2}` {
		t.Errorf("record changed by a refused reuse: %+v", rec)
	}
}

func TestFailures(t *testing.T) {
	tests := []struct {
		name      string
		handler   func(run int64) (*mcp.CallToolResult, error)
		wantRuns  int64 // after three calls
		wantState State // record after them
		wantRetry bool  // should-retry on the answers
		wantStore bool  // a record exists
	}{
		{
			name:     "isError result is stored and replayed",
			handler:  func(int64) (*mcp.CallToolResult, error) { return mcp.NewToolResultError("insufficient budget"), nil },
			wantRuns: 1, wantState: StateFailed, wantStore: true,
		},
		{
			name:     "plain error is stored and replayed",
			handler:  func(int64) (*mcp.CallToolResult, error) { return nil, errors.New("boom") },
			wantRuns: 1, wantState: StateFailed, wantStore: true,
		},
		{
			name:     "retryable error runs again",
			handler:  func(int64) (*mcp.CallToolResult, error) { return nil, Retryable(errors.New("injected")) },
			wantRuns: 3, wantState: StateFailed, wantRetry: true, wantStore: true,
		},
		{
			name:     "rejected request is not stored",
			handler:  func(int64) (*mcp.CallToolResult, error) { return nil, Reject(errors.New("quantity must be positive")) },
			wantRuns: 3, wantStore: false,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, Options{})
			var runs atomic.Int64
			h := f.mw.Wrap(func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return tt.handler(runs.Add(1))
			})
			for i := 0; i < 3; i++ {
				res := do(t, h, request("k-fail", map[string]any{"quantity": 1}))
				if !res.IsError {
					t.Fatalf("call %d: isError false, want true", i)
				}
				if got, _ := metaBool(res, MetaShouldRetry); got != tt.wantRetry {
					t.Errorf("call %d: should-retry %v, want %v", i, got, tt.wantRetry)
				}
				if replayed, _ := metaBool(res, MetaReplayed); replayed != (i > 0 && tt.wantRuns == 1) {
					t.Errorf("call %d: replayed %v", i, replayed)
				}
			}
			if got := runs.Load(); got != tt.wantRuns {
				t.Errorf("handler ran %d times, want %d", got, tt.wantRuns)
			}
			rec, ok, err := f.store.Lookup(context.Background(), "k-fail")
			if err != nil {
				t.Fatal(err)
			}
			if ok != tt.wantStore || (ok && rec.State != tt.wantState) {
				t.Errorf("record present=%v state=%q, want present=%v state=%q", ok, rec.State, tt.wantStore, tt.wantState)
			}
			if ok && tt.wantRetry && rec.Attempts != 3 {
				t.Errorf("attempts %d, want 3", rec.Attempts)
			}
		})
	}
}

// blocking returns a handler that signals when it starts and waits for
// release, so a test can hold a key in processing without timing.
func blocking(runs *atomic.Int64, started chan<- struct{}, release <-chan struct{}) server.ToolHandlerFunc {
	return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		runs.Add(1)
		started <- struct{}{}
		<-release
		return mcp.NewToolResultText("done"), nil
	}
}

func TestConcurrentFirstArrivals(t *testing.T) {
	f := newFixture(t, Options{})
	var runs atomic.Int64
	started, release := make(chan struct{}, 2), make(chan struct{})
	h := f.mw.Wrap(blocking(&runs, started, release))

	// Both arrivals race to claim; the handler blocks until both answered or
	// started, so whichever loses must find the key processing.
	results := make(chan *mcp.CallToolResult, 2)
	var wg sync.WaitGroup
	for i := 0; i < 2; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, _ := h(context.Background(), request("k-race", map[string]any{"quantity": 1}))
			results <- res
		}()
	}
	<-started
	loser := <-results // the in-progress answer comes while the winner blocks
	close(release)
	wg.Wait()
	winner := <-results

	if runs.Load() != 1 {
		t.Fatalf("handler ran %d times, want 1", runs.Load())
	}
	if idempotencyKind(loser) != "in_progress" || !loser.IsError {
		t.Errorf("loser got %+v, want isError in_progress", loser)
	}
	if retry, _ := metaBool(loser, MetaShouldRetry); !retry {
		t.Errorf("in-progress answer should say should-retry true")
	}
	if winner.IsError {
		t.Errorf("winner got an error: %v", winner.Content)
	}
	if got := f.eventKinds(); !reflect.DeepEqual(got, []EventKind{EventInProgress}) {
		t.Errorf("events %v", got)
	}
}

func TestExpiredLease(t *testing.T) {
	for _, reclaim := range []bool{false, true} {
		t.Run(fmt.Sprintf("reclaim=%v", reclaim), func(t *testing.T) {
			f := newFixture(t, Options{Lease: time.Minute, ReclaimExpiredLeases: reclaim})
			var runs atomic.Int64
			started, release := make(chan struct{}, 2), make(chan struct{})
			h := f.mw.Wrap(blocking(&runs, started, release))
			done := make(chan *mcp.CallToolResult, 1)
			go func() {
				res, _ := h(context.Background(), request("k-lease", nil))
				done <- res
			}()
			<-started
			f.clock.Advance(2 * time.Minute)

			if !reclaim {
				res := do(t, h, request("k-lease", nil))
				sc := res.StructuredContent.(map[string]any)
				if sc["idempotency"] != "in_progress" || sc["lease_expired"] != true {
					t.Errorf("expired lease answered %v", sc)
				}
				if _, ok := metaBool(res, MetaShouldRetry); ok {
					t.Errorf("should-retry must be absent when the outcome is unknown")
				}
				if runs.Load() != 1 {
					t.Errorf("expired lease re-ran the handler")
				}
				close(release)
				<-done
				return
			}
			// With reclaim the repeat runs; the old execution's late finish
			// must lose, not overwrite the new one.
			second := make(chan *mcp.CallToolResult, 1)
			go func() {
				res, _ := h(context.Background(), request("k-lease", nil))
				second <- res
			}()
			<-started
			release <- struct{}{} // first execution finishes late
			old := <-done
			if idempotencyKind(old) != "in_progress" {
				t.Errorf("superseded execution answered %+v, want in_progress", old.StructuredContent)
			}
			close(release)
			if res := <-second; res.IsError {
				t.Errorf("reclaiming execution failed: %v", res.Content)
			}
			if got := f.eventKinds(); !reflect.DeepEqual(got, []EventKind{EventReclaimed, EventStoreFailed}) {
				t.Errorf("events %v", got)
			}
		})
	}
}

func TestRecordExpiry(t *testing.T) {
	f := newFixture(t, Options{TTL: time.Hour})
	var runs atomic.Int64
	h := f.mw.Wrap(counting(&runs))
	do(t, h, request("k-ttl", map[string]any{"a": 1}))
	f.clock.Advance(time.Hour)
	// After expiry the key is free, even for other arguments.
	res := do(t, h, request("k-ttl", map[string]any{"a": 2}))
	if res.IsError || runs.Load() != 2 {
		t.Errorf("expired key: runs=%d answer=%v", runs.Load(), res.Content)
	}
	n, err := f.store.Purge(context.Background(), f.clock.Now().Add(2*time.Hour))
	if err != nil || n != 1 {
		t.Errorf("purge removed %d (%v), want 1", n, err)
	}
}

func TestCancelledHandlerLeavesOutcomeUnknown(t *testing.T) {
	f := newFixture(t, Options{})
	var runs atomic.Int64
	h := f.mw.Wrap(func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		runs.Add(1)
		return nil, fmt.Errorf("write half done: %w", context.Canceled)
	})
	do(t, h, request("k-cancel", nil))
	res := do(t, h, request("k-cancel", nil))
	sc := res.StructuredContent.(map[string]any)
	if sc["idempotency"] != "in_progress" || sc["lease_expired"] != true || runs.Load() != 1 {
		t.Errorf("repeat after an unexplained cancel: runs=%d %v", runs.Load(), sc)
	}
}

// orderTable makes a table for Commit tests in the store's own database.
func orderTable(t *testing.T, db *sql.DB) {
	t.Helper()
	if _, err := db.Exec(`CREATE TABLE orders (id INTEGER PRIMARY KEY, key TEXT)`); err != nil {
		t.Fatal(err)
	}
}

func countRows(t *testing.T, db *sql.DB) int {
	t.Helper()
	var n int
	if err := db.QueryRow(`SELECT COUNT(*) FROM orders`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestCommitSharesTheTransaction(t *testing.T) {
	f := newFixture(t, Options{})
	db := f.store.DB()
	orderTable(t, db)
	failEffect := false
	h := f.mw.Wrap(func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return Commit(ctx, func(tx *sql.Tx) (*mcp.CallToolResult, error) {
			if _, err := tx.Exec(`INSERT INTO orders (key) VALUES (?)`, KeyFromContext(ctx)); err != nil {
				return nil, err
			}
			if failEffect {
				return nil, Retryable(errors.New("budget update failed"))
			}
			return mcp.NewToolResultText("ordered"), nil
		})
	})

	failEffect = true
	res := do(t, h, request("k-tx", nil))
	if !res.IsError || countRows(t, db) != 0 {
		t.Fatalf("failed effect: isError=%v rows=%d, want true and 0 (rolled back)", res.IsError, countRows(t, db))
	}
	failEffect = false
	res = do(t, h, request("k-tx", nil)) // retryable: runs again
	if res.IsError || countRows(t, db) != 1 {
		t.Fatalf("retry: isError=%v rows=%d", res.IsError, countRows(t, db))
	}
	rec, _, _ := f.store.Lookup(context.Background(), "k-tx")
	if rec.State != StateCompleted {
		t.Errorf("record %q after Commit, want completed", rec.State)
	}
	res = do(t, h, request("k-tx", nil))
	if replayed, _ := metaBool(res, MetaReplayed); !replayed || countRows(t, db) != 1 {
		t.Errorf("repeat after Commit: replayed=%v rows=%d", replayed, countRows(t, db))
	}
	// Without a key Commit still commits, in a transaction of its own.
	do(t, h, request("", nil))
	if countRows(t, db) != 2 {
		t.Errorf("keyless Commit: rows=%d, want 2", countRows(t, db))
	}
}

func TestCommitAfterLeaseLostRollsBack(t *testing.T) {
	f := newFixture(t, Options{Lease: time.Minute, ReclaimExpiredLeases: true})
	db := f.store.DB()
	orderTable(t, db)
	started, release := make(chan struct{}, 2), make(chan struct{}, 2)
	h := f.mw.Wrap(func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		started <- struct{}{}
		<-release
		return Commit(ctx, func(tx *sql.Tx) (*mcp.CallToolResult, error) {
			_, err := tx.Exec(`INSERT INTO orders (key) VALUES ('k')`)
			return mcp.NewToolResultText("ordered"), err
		})
	})
	first := make(chan *mcp.CallToolResult, 1)
	go func() { res, _ := h(context.Background(), request("k-fence", nil)); first <- res }()
	<-started
	f.clock.Advance(2 * time.Minute)
	second := make(chan *mcp.CallToolResult, 1)
	go func() { res, _ := h(context.Background(), request("k-fence", nil)); second <- res }()
	<-started
	release <- struct{}{}
	if res := <-first; !res.IsError || countRows(t, db) != 0 {
		t.Fatalf("fenced-off Commit: isError=%v rows=%d, want true and 0", res.IsError, countRows(t, db))
	}
	release <- struct{}{}
	if res := <-second; res.IsError || countRows(t, db) != 1 {
		t.Fatalf("reclaiming Commit: isError=%v rows=%d, want false and 1", res.IsError, countRows(t, db))
	}
}

func TestCommitOutsideMiddleware(t *testing.T) {
	_, err := Commit(context.Background(), func(*sql.Tx) (*mcp.CallToolResult, error) { return nil, nil })
	if !errors.Is(err, ErrNotWrapped) {
		t.Errorf("err %v, want ErrNotWrapped", err)
	}
}

func TestStoreSurvivesReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "idem.db")
	for i := 0; i < 2; i++ {
		s, err := OpenSQLite(context.Background(), path)
		if err != nil {
			t.Fatal(err)
		}
		mw, _ := New(Options{Store: s})
		var runs atomic.Int64
		res := do(t, mw.Wrap(counting(&runs)), request("k-reopen", nil))
		replayed, _ := metaBool(res, MetaReplayed)
		if replayed != (i == 1) {
			t.Errorf("open %d: replayed=%v", i, replayed)
		}
		s.Close()
	}
}
