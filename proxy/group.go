package proxy

import (
	"context"
	"sync"
)

// group is the proxy's background goroutines (tool listings, the server
// watch): each runs with the group's context, and Wait returns once all
// have returned.
//
// Invariant: no goroutine starts once Wait has begun, so that Wait cannot
// miss one (a WaitGroup's Add must not race its Wait).
type group struct {
	// ctx is what the goroutines run with; set once, by Run, before the
	// first Go, and read without the lock. Nil (or ended): Go does nothing.
	ctx context.Context

	mu   sync.Mutex // guards following, and wg.Add
	done bool       // Wait has begun
	wg   sync.WaitGroup
}

// Go runs f on a goroutine of its own with the group's context, unless
// that context has ended or Wait has begun.
func (g *group) Go(f func(ctx context.Context)) {
	ctx := g.ctx
	g.mu.Lock()
	defer g.mu.Unlock()
	if ctx == nil || ctx.Err() != nil || g.done {
		return
	}
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		f(ctx)
	}()
}

// Wait waits for the goroutines running, after which none starts. The
// caller ends them first, by ending the group's context.
func (g *group) Wait() {
	g.mu.Lock()
	g.done = true
	g.mu.Unlock()
	g.wg.Wait()
}
