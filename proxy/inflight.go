package proxy

import (
	"context"
	"sync"
)

// inflight are the host's requests that the proxy answers itself
// (tools/call and the relayed ones), each by the host's id for it (its
// JSON text), so that the host can cancel it; their handlers run on
// workers.
//
// Invariant: once cancelAll has run, no request starts (start says no),
// so that wait, which must follow cancelAll, cannot miss one; every
// request started is in cancels until its handler returns.
type inflight struct {
	workers *workers       // run the handlers
	running sync.WaitGroup // one per request started, until its handler returns

	mu       sync.Mutex // guards following, and running.Add
	cancels  map[string]context.CancelFunc
	stopping bool // cancelAll has run: no new requests
}

func newInflight() *inflight {
	return &inflight{workers: newWorkers(), cancels: map[string]context.CancelFunc{}}
}

// start runs handle for the request the host knows as id, on a worker,
// with a context that its cancel ends; false, and handle never runs, once
// the proxy is stopping.
func (f *inflight) start(ctx context.Context, id []byte, handle func(context.Context)) bool {
	rctx, cancel := context.WithCancel(ctx)
	key := string(id)
	f.mu.Lock()
	if f.stopping {
		f.mu.Unlock()
		cancel()
		return false
	}
	f.cancels[key] = cancel
	f.running.Add(1)
	f.mu.Unlock()
	f.workers.run(func() {
		defer f.running.Done()
		defer func() {
			f.mu.Lock()
			delete(f.cancels, key)
			f.mu.Unlock()
			cancel()
		}()
		handle(rctx)
	})
	return true
}

// cancelOf is the cancel of the request the host knows as id (its JSON
// text), or nil when none by that id is running.
func (f *inflight) cancelOf(id string) context.CancelFunc {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cancels[id]
}

// cancelAll stops taking requests and cancels the ones running.
func (f *inflight) cancelAll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stopping = true
	for _, cancel := range f.cancels {
		cancel()
	}
}

// wait waits for the handlers started, then ends the waiting workers.
// It must follow cancelAll, after which none can start.
func (f *inflight) wait() {
	f.running.Wait()
	f.workers.stop()
}
