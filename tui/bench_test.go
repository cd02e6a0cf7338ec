package tui

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/mcp-confirm/mcp-confirm/guard"
	"github.com/mcp-confirm/mcp-confirm/pending"
)

// Run: go test ./tui/ -run '^$' -bench . -benchtime 2000x
//
// BenchmarkView is the time to draw one frame with N unknown calls in the
// journal (the list's default tab); BenchmarkScroll is a keypress (j) with
// the keyset page loads it triggers, then the frame. Both should not grow
// with N: the list holds a window of a few pages, never the journal.

var bigJournals sync.Map // n → path, built once per test binary

// bigJournal is a journal with n unknown calls, one second apart, written
// with one INSERT … SELECT (the journal's triggers keep the counts).
func bigJournal(tb testing.TB, n int) string {
	tb.Helper()
	if p, ok := bigJournals.Load(n); ok {
		return p.(string)
	}
	dir, err := os.MkdirTemp("", "mcp-confirm-tui-bench-")
	if err != nil {
		tb.Fatal(err)
	}
	path := filepath.Join(dir, "journal.db")
	j, err := pending.Open(context.Background(), path, pending.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	j.Close()
	db, err := sql.Open("sqlite", path+"?_pragma=journal_mode(WAL)&_pragma=synchronous(OFF)")
	if err != nil {
		tb.Fatal(err)
	}
	defer db.Close()
	start := t0.Add(-time.Duration(n+60) * time.Second)
	_, err = db.Exec(`WITH RECURSIVE seq(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM seq WHERE i < ?)
		INSERT INTO calls (server, tool, kind, kind_source, key, args, fingerprint, state, reason, created_at, updated_at)
		SELECT 'orders-test', CASE i % 3 WHEN 0 THEN 'send_email' ELSE 'create_order' END, 'write', 'annotation',
			printf('01BENCH%019d', i), '{"buyer":"alice","item":"widget","quantity":' || (i % 9 + 1) || '}', printf('%064d', i),
			'unknown', CASE i % 4 WHEN 0 THEN 'connection lost' ELSE 'idle timeout' END,
			strftime('%Y-%m-%dT%H:%M:%S', ?, '+' || i || ' seconds') || '.000000000Z',
			strftime('%Y-%m-%dT%H:%M:%S', ?, '+' || i || ' seconds') || '.000000000Z'
		FROM seq`, n, start.Format("2006-01-02 15:04:05"), start.Format("2006-01-02 15:04:05"))
	if err != nil {
		tb.Fatal(err)
	}
	bigJournals.Store(n, path)
	return path
}

// bigModel opens a console on a journal of n calls at w×h.
func bigModel(tb testing.TB, n, w, h int) (Model, *pending.Journal) {
	tb.Helper()
	j, err := pending.Open(context.Background(), bigJournal(tb, n), pending.Options{Now: func() time.Time { return t0 }})
	if err != nil {
		tb.Fatal(err)
	}
	srv := &fakeServer{name: "orders-test", tools: testTools(), answer: ordersAnswer, seen: map[string]int{}}
	m := New(Options{Journal: j, Engine: guard.New(j, srv, guard.Options{}), Server: srv, Now: func() time.Time { return t0 }, Tick: time.Millisecond})
	m = step(tb, m, tea.WindowSizeMsg{Width: w, Height: h})
	m = settle(tb, m, m.Init())
	return m, j
}

var sizes = []int{10, 10_000, 1_000_000}

func BenchmarkView(b *testing.B) {
	for _, n := range sizes {
		b.Run(fmt.Sprintf("calls=%d", n), func(b *testing.B) {
			m, j := bigModel(b, n, 120, 40)
			defer j.Close()
			for range 5 { // off the first row, as an operator would be
				m = press(b, m, m.list.keys.Down)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				_ = m.View()
			}
		})
	}
}

func BenchmarkScroll(b *testing.B) {
	for _, n := range sizes {
		b.Run(fmt.Sprintf("calls=%d", n), func(b *testing.B) {
			m, j := bigModel(b, n, 120, 40)
			defer j.Close()
			down, top := m.list.keys.Down, m.list.keys.Top
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if m.list.atEnd && m.list.sc.cur == len(m.list.rows)-1 {
					m = press(b, m, top) // wrap around (only a small journal gets here)
				}
				m = press(b, m, down)
				_ = m.View()
			}
		})
	}
}

// BenchmarkMemoryMillion reports the console's memory with 1,000,000 calls
// after scrolling 5,000 rows: Go heap in use and the process's resident set
// (SQLite's page cache lives outside the Go heap). It measures once,
// whatever b.N is.
func BenchmarkMemoryMillion(b *testing.B) {
	bigJournal(b, 1_000_000)
	{
		m, j := bigModel(b, 1_000_000, 120, 40)
		for range 5000 {
			m = press(b, m, m.list.keys.Down)
		}
		_ = m.View()
		runtime.GC()
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapInuse)/(1<<20), "heap-MB")
		b.ReportMetric(float64(len(m.list.rows)), "rows-held")
		b.ReportMetric(float64(rssKB())/1024, "rss-MB")
		if got := m.list.pos; got != 5000 {
			b.Fatalf("after 5000 downs the selection is row %d", got)
		}
		j.Close()
	}
}

// rssKB is the process's resident set size (Linux), 0 elsewhere.
func rssKB() int {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(data), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			n, _ := strconv.Atoi(f[1])
			return n
		}
	}
	return 0
}

// The list holds a window, not the journal, and keyset paging reaches every
// row in order: 1,000 downs through 10,000 calls land on the 1,001st call,
// holding a few pages; G and g reach the ends.
func TestListIsVirtualised(t *testing.T) {
	m, j := bigModel(t, 10_000, 80, 24)
	defer j.Close()
	p := m.list.page()
	var prev int64
	for i := range 1000 {
		c, _ := m.list.Selected()
		if c.ID <= prev {
			t.Fatalf("step %d: call %d after %d: not in order", i, c.ID, prev)
		}
		prev = c.ID
		if len(m.list.rows) > 6*p {
			t.Fatalf("holding %d rows (page %d): not virtualised", len(m.list.rows), p)
		}
		m = press(t, m, m.list.keys.Down)
	}
	if c, _ := m.list.Selected(); c.ID != 1001 || m.list.pos != 1000 {
		t.Fatalf("after 1000 downs: call %d at position %d", c.ID, m.list.pos)
	}
	if !strings.Contains(m.View(), "1001/10000") {
		t.Fatalf("no position in the header:\n%s", m.View())
	}
	m = press(t, m, m.list.keys.Bottom)
	if c, _ := m.list.Selected(); c.ID != 10_000 || !strings.Contains(m.View(), "10000/10000") {
		t.Fatalf("G: call %d\n%s", c.ID, m.View())
	}
	m = press(t, m, m.list.keys.Up)
	if c, _ := m.list.Selected(); c.ID != 9_999 {
		t.Fatalf("up from the end: call %d", c.ID)
	}
	for range 40 {
		m = press(t, m, m.list.keys.PageUp)
	}
	if c, _ := m.list.Selected(); c.ID != int64(9_999-40*p) {
		t.Fatalf("40 pages up: call %d, want %d", c.ID, 9_999-40*p)
	}
	m = press(t, m, m.list.keys.Top)
	if c, _ := m.list.Selected(); c.ID != 1 || m.list.pos != 0 {
		t.Fatalf("g: call %d at %d", c.ID, m.list.pos)
	}
}
