package tui

import (
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/mcp-confirm/mcp-confirm/guard"
	"github.com/mcp-confirm/mcp-confirm/pending"
)

// The console's frame time while a bulk query runs (issue 21: "no frame
// over 16 ms"). Run:
//
//	go test ./tui/ -run '^$' -bench BulkFrame -count 5
//
// One op is one frame as the program makes it: one message through Update,
// then View (bubbletea v1 calls View after every message). The messages are
// those of a run in progress, in turn: two query results (the answers
// reconcileCmd returns, made here so that no query is really sent), a clock
// tick, and a cursor key on the reconcile screen (↓, ↑, pgdn, pgup). The
// commands Update returns (the next queries) are not run. The frames start
// halfway through the run (its first half answered off the clock), so that
// they see the same run whatever b.N is; when the run has ended (its last
// answer is a frame too), a new one starts there, off the clock.
// max-ms and p99-ms are the slowest frame and the 99th percentile of all
// frames of the benchmark's last round, in wall time: what the operator
// would see, including the time the machine gave to other processes.
// cpu-max-ms and cpu-p99-ms are the same of the frames' CPU time on their
// thread (Linux): the console's own work, which a loaded machine does not
// inflate.
func BenchmarkBulkFrame(b *testing.B) {
	for _, tc := range []struct {
		journal, selected int
	}{
		{1_000, 1_000},
		{1_000_000, 1_000},
		{1_000_000, maxPickAll}, // * on a million calls selects the first maxPickAll
	} {
		b.Run(fmt.Sprintf("journal=%d/selected=%d", tc.journal, tc.selected), func(b *testing.B) {
			m, j := bigModel(b, tc.journal, 120, 40)
			defer j.Close()
			m = pickN(b, m, tc.selected)
			nm, _ := m.Update(keyMsg(m.list.keys.Reconcile.Keys()[0])) // the queries it starts are not run
			m = nm.(Model)
			if m.active != screenBulk || !m.bulk.running || len(m.bulk.items) != tc.selected {
				b.Fatalf("S: screen %d, running %v, %d calls", m.active, m.bulk.running, len(m.bulk.items))
			}
			calls := make([]pending.Call, len(m.bulk.items))
			for i, it := range m.bulk.items {
				calls[i] = it.call
			}
			bk := m.bulk.keys
			keys := []tea.KeyMsg{press1(bk.Down), press1(bk.Up), press1(bk.PageDown), press1(bk.PageUp)}
			next, now := 0, t0
			halfway := func() {
				for ; next < len(calls)/2; next++ {
					nm, _ := m.Update(answer(m.bulk, next))
					m = nm.(Model)
				}
			}
			halfway()
			frames, cpu := make([]time.Duration, b.N), make([]time.Duration, b.N)
			runtime.LockOSThread() // threadCPU is this goroutine's
			defer runtime.UnlockOSThread()
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				if !m.bulk.running {
					b.StopTimer()
					m.bulk.start(calls)
					next = 0
					halfway()
					b.StartTimer()
				}
				var msg tea.Msg
				switch i % 4 {
				case 0, 1:
					msg = answer(m.bulk, next)
					next++
				case 2:
					now = now.Add(time.Second)
					msg = tickMsg{Now: now, Server: m.sh.server}
				case 3:
					msg = keys[(i/4)%len(keys)]
				}
				c0, _ := threadCPU()
				start := time.Now()
				nm, _ := m.Update(msg)
				m = nm.(Model)
				_ = m.View()
				frames[i] = time.Since(start)
				c1, _ := threadCPU()
				cpu[i] = c1 - c0
			}
			b.StopTimer()
			reportFrames(b, "", frames)
			if _, ok := threadCPU(); ok {
				reportFrames(b, "cpu-", cpu)
			}
		})
	}
}

// answer is the query result of the run's item i, as reconcileCmd would
// return it: every other call found, the others not found.
func answer(bs *bulkScreen, i int) reconciledMsg {
	c := bs.items[i].call
	res := guard.Reconciled{Call: c, Finding: guard.FindingNotFound, Evidence: "orders: 0"}
	if i%2 == 0 {
		res.Finding, res.Evidence = guard.FindingFound, fmt.Sprintf("orders: 1 (order_id %d)", c.ID)
	}
	return reconciledMsg{Run: bs.run, ID: c.ID, Res: res}
}

// reportFrames reports the slowest of frames and their 99th percentile,
// in milliseconds, as prefix+"max-ms" and prefix+"p99-ms".
func reportFrames(b *testing.B, prefix string, frames []time.Duration) {
	slices.Sort(frames)
	b.ReportMetric(float64(frames[len(frames)-1])/1e6, prefix+"max-ms")
	b.ReportMetric(float64(frames[min(len(frames)-1, len(frames)*99/100)])/1e6, prefix+"p99-ms")
}

func press1(k key.Binding) tea.KeyMsg { return keyMsg(k.Keys()[0]) }

// pickN selects the first n calls of the list: with * when n is what *
// selects (the whole list, or maxPickAll of it), else with space n times.
func pickN(tb testing.TB, m Model, n int) Model {
	tb.Helper()
	if total := m.sh.counts[pending.StateUnknown]; n == min(total, maxPickAll) {
		m = press(tb, m, m.list.keys.PickAll)
	} else {
		for range n {
			m = press(tb, m, m.list.keys.Pick)
		}
	}
	if len(m.list.picked) != n {
		tb.Fatalf("%d calls selected, want %d", len(m.list.picked), n)
	}
	return m
}
