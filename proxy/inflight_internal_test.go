package proxy

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
)

// A request runs with a context its cancel ends, and is forgotten once its
// handler returns; after cancelAll every running one is cancelled, no new
// one starts, and wait returns once the running ones have returned.
func TestInflightCancelOneCancelAllWait(t *testing.T) {
	f := newInflight()
	ctx := context.Background()

	started := make(chan struct{})
	ended := make(chan struct{})
	if !f.start(ctx, []byte(`"a"`), func(ctx context.Context) {
		close(started)
		<-ctx.Done()
		close(ended)
	}) {
		t.Fatal("start refused before cancelAll")
	}
	<-started
	cancel := f.cancelOf(`"a"`)
	if cancel == nil {
		t.Fatal(`no cancel for running request "a"`)
	}
	if f.cancelOf(`"b"`) != nil {
		t.Error(`a cancel for "b", which never ran`)
	}
	cancel()
	<-ended

	// Many at once, all held until cancelAll.
	const n = 20
	var running sync.WaitGroup
	var returned atomic.Int32
	running.Add(n)
	for i := 0; i < n; i++ {
		id := []byte{'"', byte('c' + i), '"'}
		if !f.start(ctx, id, func(ctx context.Context) {
			running.Done()
			<-ctx.Done()
			returned.Add(1)
		}) {
			t.Fatal("start refused before cancelAll")
		}
	}
	running.Wait()
	f.cancelAll()
	if f.start(ctx, []byte(`"late"`), func(context.Context) { t.Error("a request started after cancelAll") }) {
		t.Error("start said yes after cancelAll")
	}
	f.wait()
	if got := returned.Load(); got != n {
		t.Errorf("wait returned with %d of %d handlers returned", got, n)
	}
	f.mu.Lock()
	left := len(f.cancels)
	f.mu.Unlock()
	if left != 0 {
		t.Errorf("%d requests still tracked after wait", left)
	}
}

// A goroutine runs with the group's context and Wait waits for it; none
// starts once Wait has begun, nor once the context has ended.
func TestGroupGoWait(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	g := &group{ctx: ctx}
	running := make(chan struct{})
	var returned atomic.Bool
	g.Go(func(ctx context.Context) {
		close(running)
		<-ctx.Done()
		returned.Store(true)
	})
	<-running
	cancel()
	g.Go(func(context.Context) { t.Error("a goroutine started after its context ended") })
	g.Wait()
	if !returned.Load() {
		t.Fatal("Wait returned before the goroutine did")
	}
	g.Go(func(context.Context) { t.Error("a goroutine started after Wait") })
	g.Wait()

	var none group // no context yet: Go does nothing
	none.Go(func(context.Context) { t.Error("a goroutine started without a context") })
	none.Wait()
}
