package proxy

import (
	"sync"
	"sync/atomic"
)

// workers run the handlers of the host's requests on a few goroutines that
// live on between requests, instead of a new goroutine per request. A new
// goroutine costs its start and, for a tools/call, growing its stack
// several times on the way down through the guard and the client; both
// show in the proxy's CPU profile (BenchmarkInProcessProxyRead). A worker
// waiting for its next request keeps the stack it grew. When none waits,
// run falls back to a new goroutine (TestWorkersRunEveryJobAndEnd runs a
// burst larger than the idle bound).
type workers struct {
	jobs chan func() // unbuffered: a send succeeds only if a worker waits
	quit chan struct{}
	once sync.Once
	idle atomic.Int32
}

// maxIdleWorkers bounds the goroutines kept waiting after a burst of
// concurrent requests; a worker beyond it ends after its request.
const maxIdleWorkers = 8

func newWorkers() *workers {
	return &workers{jobs: make(chan func()), quit: make(chan struct{})}
}

// run gives job to a waiting worker, or to a new one when none waits.
func (w *workers) run(job func()) {
	select {
	case w.jobs <- job:
	default:
		go w.work(job)
	}
}

func (w *workers) work(job func()) {
	for {
		job()
		if w.idle.Add(1) > maxIdleWorkers {
			w.idle.Add(-1)
			return
		}
		select {
		case job = <-w.jobs:
			w.idle.Add(-1)
		case <-w.quit:
			return
		}
	}
}

// stop ends the waiting workers. No run may follow.
func (w *workers) stop() { w.once.Do(func() { close(w.quit) }) }
