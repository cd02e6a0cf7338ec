package tui

// scroller is a cursor over n rows of which page are visible at a time:
// the selected row (cur) and the first visible one (top), both indexes
// into whatever the screen holds. It keeps the cursor on the rows and on
// screen, and top in range; it holds no rows and draws nothing, so the
// calls list (a window of the journal) and the tools screen share it.
// (gh-dash's listviewport does the same job for its lists.)
type scroller struct{ cur, top int }

// clamp puts the cursor on one of n rows and scrolls the least that shows
// it in a view of page rows.
func (s *scroller) clamp(n, page int) {
	if n <= 0 {
		s.cur, s.top = 0, 0
		return
	}
	page = max(page, 1)
	s.cur = max(0, min(s.cur, n-1))
	if s.cur < s.top {
		s.top = s.cur
	}
	if s.cur >= s.top+page {
		s.top = s.cur - page + 1
	}
	s.top = max(0, min(s.top, n-1))
}

// move moves the cursor by d rows, stopping at the first and last. A move
// of more than one row (a page) scrolls the view by as much, so the
// cursor keeps its place on screen. It returns how far the cursor moved.
func (s *scroller) move(d, n, page int) int {
	if n <= 0 {
		return 0
	}
	to := max(0, min(s.cur+d, n-1))
	moved := to - s.cur
	s.cur = to
	if d > 1 || d < -1 {
		s.top += d
	}
	s.clamp(n, page)
	return moved
}

// window is the rows to draw, start to end (exclusive): only those.
func (s *scroller) window(n, page int) (start, end int) {
	if n <= 0 {
		return 0, 0
	}
	start = max(0, min(s.top, n-1))
	return start, min(n, start+max(page, 1))
}
