package proxy

import (
	"runtime"
	"sync"
	"testing"
	"time"
)

// Every job runs, including a burst larger than the idle bound; after
// stop, no worker is left waiting.
func TestWorkersRunEveryJobAndEnd(t *testing.T) {
	before := runtime.NumGoroutine()
	w := newWorkers()
	var ran sync.WaitGroup
	release := make(chan struct{})
	const burst = 3 * maxIdleWorkers
	ran.Add(burst)
	for i := 0; i < burst; i++ {
		w.run(func() { // all at once: each holds its worker until release
			defer ran.Done()
			<-release
		})
	}
	close(release)
	ran.Wait()
	for i := 0; i < 100; i++ { // one after another: reuse waiting workers
		done := make(chan struct{})
		w.run(func() { close(done) })
		<-done
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before+maxIdleWorkers {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines waiting, want at most %d", runtime.NumGoroutine()-before, maxIdleWorkers)
		}
		time.Sleep(10 * time.Millisecond)
	}
	w.stop()
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			t.Fatalf("%d workers still running after stop", runtime.NumGoroutine()-before)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
