package guard

import (
	"context"
	"time"

	"github.com/mcp-confirm/mcp-confirm/pending"
)

// Watch sends on the returned channel whenever the journal changes, from
// this process or another on the same file (a CLI call, a proxy). It polls
// PRAGMA data_version, which costs no table read, every interval; the
// channel holds at most one pending signal, so a slow reader sees one
// "changed" for a burst. Every recoverEvery it also recovers calls left in
// flight by processes that have died since the journal was opened, and
// gives their ids to onRecovered (when set: notifications). The channel
// closes when ctx ends.
func Watch(ctx context.Context, j *pending.Journal, interval, recoverEvery time.Duration, onRecovered func([]int64)) <-chan struct{} {
	ch := make(chan struct{}, 1)
	// Read where we start before returning: a change committed right after
	// Watch returns must be seen as one.
	last, _ := j.DataVersion(ctx)
	go func() {
		defer close(ch)
		t := time.NewTicker(interval)
		defer t.Stop()
		lastRecover := time.Now()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if recoverEvery > 0 && time.Since(lastRecover) >= recoverEvery {
				lastRecover = time.Now()
				if counts, err := j.Counts(ctx); err == nil && counts[pending.StateInFlight] > 0 {
					if ids, err := j.Recover(ctx); err == nil && len(ids) > 0 && onRecovered != nil {
						onRecovered(ids)
					}
				}
			}
			v, err := j.DataVersion(ctx)
			if err != nil || v == last {
				continue
			}
			last = v
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}()
	return ch
}
