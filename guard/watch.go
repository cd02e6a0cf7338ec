package guard

import (
	"context"
	"time"

	"github.com/mcp-confirm/mcp-confirm/pending"
)

// Watch sends on the returned channel whenever the journal changes, from
// this process or another on the same journal (a CLI call, a proxy). It
// polls the journal's DataVersion (PRAGMA data_version on SQLite, which costs no
// table read) every interval, and on PostgreSQL also wakes at each change
// notice (Journal.Changed), without waiting for the interval; the
// channel holds at most one pending signal, so a slow reader sees one
// "changed" for a burst. Every recoverEvery it also recovers calls left in
// flight by processes that have died since the journal was opened, and
// gives their ids to onRecovered (when set: notifications). The channel
// closes when ctx ends.
func Watch(ctx context.Context, j *pending.Journal, interval, recoverEvery time.Duration, onRecovered func([]int64)) <-chan struct{} {
	ch := make(chan struct{}, 1)
	// Read where we start before returning: a change committed right after
	// Watch returns must be seen as one. Where the journal is told of
	// changes (PostgreSQL's notices), a notice wakes the watch at once; the
	// ticker stays, for SQLite and for recovery.
	wake := j.Changed()
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
			case <-wake:
			}
			wake = j.Changed() // before the read below, so a change after it wakes the next round
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
