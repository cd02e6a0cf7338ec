package mcpclient

import (
	"slices"
	"sync"
	"testing"
)

// Everything posted before close is delivered, each poster's posts in the
// order it made them; nothing posted after close is; the last delivery,
// and only it, says closed, and run then returns.
func TestMailboxDeliversAllBeforeCloseInOrder(t *testing.T) {
	type post struct{ from, n int }
	m := newMailbox[[]post]()
	var got []post
	var closedAt []int // the deliveries that said closed, by number
	deliveries := 0
	done := make(chan struct{})
	go func() {
		defer close(done)
		m.run(func(v []post, closed bool) {
			got = append(got, v...)
			if closed {
				closedAt = append(closedAt, deliveries)
			}
			deliveries++
		})
	}()

	const posters, each = 4, 500
	var wg sync.WaitGroup
	for from := 0; from < posters; from++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; n < each; n++ {
				m.post(func(w *[]post) { *w = append(*w, post{from, n}) })
			}
		}()
	}
	wg.Wait()
	m.close()
	m.post(func(w *[]post) { *w = append(*w, post{-1, 0}) })
	<-done

	if len(got) != posters*each {
		t.Fatalf("%d posts delivered, want %d", len(got), posters*each)
	}
	next := make([]int, posters)
	for _, p := range got {
		if p.from < 0 {
			t.Fatal("a post after close was delivered")
		}
		if p.n != next[p.from] {
			t.Fatalf("poster %d: post %d delivered where %d was due", p.from, p.n, next[p.from])
		}
		next[p.from]++
	}
	if len(closedAt) != 1 || closedAt[0] != deliveries-1 {
		t.Errorf("deliveries saying closed: %v of %d, want only the last", closedAt, deliveries)
	}
}

// callEvents over the mailbox: every sent id is delivered, in order;
// progress is coalesced to the latest; progress still waiting at close is
// not reported.
func TestCallEventsSentAllProgressLatest(t *testing.T) {
	e := newCallEvents()
	e.sent("1")
	e.progress(Progress{Progress: 1})
	e.progress(Progress{Progress: 2})
	e.sent("2")
	var ids []string
	var progress []float64
	onSent := func(session int, id string) {
		if session != 7 {
			t.Errorf("session %d, want 7", session)
		}
		ids = append(ids, id)
	}
	onProgress := func(p Progress) { progress = append(progress, p.Progress) }

	// run starts once the events above wait, so that they make its first
	// delivery, and is held in it until the mailbox is closed, so that what
	// comes next makes its last.
	delivered, release := make(chan struct{}), make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		first := true
		e.run(7, onSent, func(p Progress) {
			onProgress(p)
			if first {
				first = false
				close(delivered)
				<-release
			}
		})
	}()
	<-delivered
	e.progress(Progress{Progress: 3}) // waits at close: not reported
	e.sent("3")
	e.close()
	e.sent("4") // after close: dropped
	close(release)
	<-done

	if want := []string{"1", "2", "3"}; !slices.Equal(ids, want) {
		t.Errorf("sent ids %v, want %v", ids, want)
	}
	if len(progress) != 1 || progress[0] != 2 {
		t.Errorf("progress reported %v, want [2] (the latest before the first delivery)", progress)
	}
}
