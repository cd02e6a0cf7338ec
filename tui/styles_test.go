package tui

import (
	"context"
	"strings"
	"testing"

	"github.com/charmbracelet/x/ansi"

	"github.com/mcp-confirm/mcp-confirm/pending"
)

// Every state has a glyph of its own, one cell wide, so a row reads the
// same without colour (NO_COLOR, goldens, PNGs): succeeded (the server
// answered) and applied (an operator checked it off) are told apart.
func TestStateGlyphsAreDistinct(t *testing.T) {
	seen := map[string]pending.State{}
	for _, st := range []pending.State{pending.StateUnknown, pending.StateInFlight, pending.StateFailed,
		pending.StateSucceeded, pending.StateApplied, pending.StateAbandoned} {
		g := stateGlyph(st)
		if g == "?" {
			t.Errorf("%s has no glyph", st)
		}
		if other, ok := seen[g]; ok {
			t.Errorf("%s and %s share the glyph %q", st, other, g)
		}
		seen[g] = st
		if w := ansi.StringWidth(g); w != 1 {
			t.Errorf("%s's glyph %q is %d cells wide", st, g, w)
		}
	}
	for _, g := range []string{GlyphAll, GlyphLate} {
		if st, ok := seen[g]; ok {
			t.Errorf("%q is both %s and a tab or mark", g, st)
		}
	}
}

// In the list, an applied row and a succeeded row differ by glyph.
func TestAppliedAndSucceededRowsDiffer(t *testing.T) {
	e := newEnv(t)
	e.seed()
	c := e.find(pending.StateUnknown, "create_order")
	if err := e.g.MarkApplied(context.Background(), c.ID, "checked"); err != nil {
		t.Fatal(err)
	}
	m := e.model(100, 30)
	m = press(t, m, m.list.keys.PrevTab) // all
	var applied, succeeded string
	for _, l := range strings.Split(m.View(), "\n") {
		switch {
		case strings.Contains(l, "applied") && strings.Contains(l, "quantity=2"):
			applied = l
		case strings.Contains(l, " succeeded") && strings.Contains(l, "quantity=3"):
			succeeded = l
		}
	}
	if !strings.Contains(applied, GlyphApplied+" ") || !strings.Contains(succeeded, GlyphSucceeded+" ") || strings.Contains(applied, GlyphSucceeded) {
		t.Fatalf("rows do not tell applied from succeeded:\napplied   %q\nsucceeded %q\n%s", applied, succeeded, m.View())
	}
}
