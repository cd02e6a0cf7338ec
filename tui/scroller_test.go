package tui

import "testing"

func TestScroller(t *testing.T) {
	type st struct{ cur, top int }
	for _, tc := range []struct {
		name       string
		from       st
		do         func(s *scroller) int // returns what move returned, or 0
		n, page    int
		want       st
		moved      int
		start, end int
	}{
		{"down within the view", st{0, 0}, func(s *scroller) int { return s.move(1, 10, 3) }, 10, 3, st{1, 0}, 1, 0, 3},
		{"down past the view scrolls one", st{2, 0}, func(s *scroller) int { return s.move(1, 10, 3) }, 10, 3, st{3, 1}, 1, 1, 4},
		{"up past the view scrolls one", st{3, 3}, func(s *scroller) int { return s.move(-1, 10, 3) }, 10, 3, st{2, 2}, -1, 2, 5},
		{"stops at the last row", st{9, 7}, func(s *scroller) int { return s.move(1, 10, 3) }, 10, 3, st{9, 7}, 0, 7, 10},
		{"stops at the first row", st{0, 0}, func(s *scroller) int { return s.move(-1, 10, 3) }, 10, 3, st{0, 0}, 0, 0, 3},
		{"page down keeps the place on screen", st{1, 0}, func(s *scroller) int { return s.move(3, 10, 3) }, 10, 3, st{4, 3}, 3, 3, 6},
		// The view scrolls by the whole page even where the cursor cannot
		// follow (the calls list reads the next window there).
		{"page down near the end", st{8, 6}, func(s *scroller) int { return s.move(3, 10, 3) }, 10, 3, st{9, 9}, 1, 9, 10},
		{"page up", st{5, 4}, func(s *scroller) int { return s.move(-3, 10, 3) }, 10, 3, st{2, 1}, -3, 1, 4},
		{"page up at the start", st{1, 0}, func(s *scroller) int { return s.move(-3, 10, 3) }, 10, 3, st{0, 0}, -1, 0, 3},
		{"no rows", st{4, 2}, func(s *scroller) int { s.clamp(0, 3); return 0 }, 0, 3, st{0, 0}, 0, 0, 0},
		{"no rows: move does nothing", st{0, 0}, func(s *scroller) int { return s.move(1, 0, 3) }, 0, 3, st{0, 0}, 0, 0, 0},
		{"rows went away: cursor onto the last", st{8, 6}, func(s *scroller) int { s.clamp(4, 3); return 0 }, 4, 3, st{3, 3}, 0, 3, 4},
		{"view shrank: cursor kept on screen", st{5, 0}, func(s *scroller) int { s.clamp(10, 2); return 0 }, 10, 2, st{5, 4}, 0, 4, 6},
		{"fewer rows than the view", st{1, 0}, func(s *scroller) int { s.clamp(2, 5); return 0 }, 2, 5, st{1, 0}, 0, 0, 2},
		{"a page of 0 counts as 1", st{3, 0}, func(s *scroller) int { s.clamp(10, 0); return 0 }, 10, 0, st{3, 3}, 0, 3, 4},
		{"negative cursor", st{-2, 0}, func(s *scroller) int { s.clamp(10, 3); return 0 }, 10, 3, st{0, 0}, 0, 0, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := scroller{cur: tc.from.cur, top: tc.from.top}
			moved := tc.do(&s)
			if st(s) != tc.want || moved != tc.moved {
				t.Errorf("got cur %d top %d moved %d, want cur %d top %d moved %d", s.cur, s.top, moved, tc.want.cur, tc.want.top, tc.moved)
			}
			if start, end := s.window(tc.n, tc.page); start != tc.start || end != tc.end {
				t.Errorf("window = %d..%d, want %d..%d", start, end, tc.start, tc.end)
			}
			if tc.n > 0 && (s.cur < s.top || s.cur >= s.top+max(tc.page, 1)) {
				t.Errorf("cursor %d is off the view from %d", s.cur, s.top)
			}
		})
	}
}
