package tui

import (
	"bytes"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/exp/golden"
	"github.com/charmbracelet/x/exp/teatest"
)

// Goldens of View(), with a fixed clock and seeded keys. Regenerate with
//
//	go test ./tui/ -run Golden -update
//
// and read the diff: a golden is a picture of the screen.

// runProgram starts the console in a real tea.Program at w×h and waits for
// the first frame with the unknown calls.
func runProgram(t *testing.T, e *env, w, h int) *teatest.TestModel {
	t.Helper()
	o := e.options()
	o.Tick = 50 * time.Millisecond // the clock is fixed; ticks change nothing
	tm := teatest.NewTestModel(t, New(o), teatest.WithInitialTermSize(w, h))
	// The calls, and the server's state (so its tools are listed too).
	waitText(t, tm, "send_email", "orders-test running")
	return tm
}

// waitText waits until the output since the last wait holds every text.
func waitText(t *testing.T, tm *teatest.TestModel, texts ...string) {
	t.Helper()
	teatest.WaitFor(t, tm.Output(), func(b []byte) bool {
		for _, s := range texts {
			if !bytes.Contains(b, []byte(s)) {
				return false
			}
		}
		return true
	}, teatest.WithDuration(10*time.Second), teatest.WithCheckInterval(5*time.Millisecond))
}

func finalView(t *testing.T, tm *teatest.TestModel) string {
	t.Helper()
	if err := tm.Quit(); err != nil {
		t.Fatal(err)
	}
	return tm.FinalModel(t, teatest.WithFinalTimeout(10*time.Second)).View()
}

func TestGoldenCallsScreen(t *testing.T) {
	e := newEnv(t)
	e.seed()
	tm := runProgram(t, e, 80, 24)
	golden.RequireEqual(t, finalView(t, tm))
}

func TestGoldenDetail(t *testing.T) {
	e := newEnv(t)
	e.seed()
	tm := runProgram(t, e, 80, 24)
	tm.Send(keyMsg("enter"))
	waitText(t, tm, "Attempts (1)")
	golden.RequireEqual(t, finalView(t, tm))
}

func TestGoldenRetryDialog(t *testing.T) {
	e := newEnv(t)
	e.seed()
	tm := runProgram(t, e, 80, 24)
	tm.Send(keyMsg("r"))
	waitText(t, tm, "Yes, retry")
	golden.RequireEqual(t, finalView(t, tm))
}

// View goldens without a program, for more sizes and states.
func TestGoldenViews(t *testing.T) {
	for _, tc := range []struct {
		name string
		w, h int
		seed bool
		keys []string
	}{
		{"list_60x20", 60, 20, true, nil},
		{"list_120x30_all", 120, 30, true, []string{"shift+tab"}},
		{"retry_typed_80x24", 80, 24, true, []string{"j", "r"}},
		{"abandon_80x24", 80, 24, true, []string{"x"}},
		{"empty_80x24", 80, 24, false, nil},
		{"tools_80x24", 80, 24, false, []string{"t"}},
		{"new_call_80x24", 80, 24, false, []string{"c", "enter"}},
		{"help_80x24", 80, 24, true, []string{"?"}},
		{"help_empty_80x24", 80, 24, false, []string{"?"}},
		{"disabled_reason_80x24", 80, 24, true, []string{"tab", "tab", "tab", "r"}},
		{"picked_80x24", 80, 24, true, []string{" ", " "}},
		{"reconcile_80x24", 80, 24, true, []string{" ", " ", " ", "S"}},
		{"reconcile_60x20", 60, 20, true, []string{" ", " ", " ", "S"}},
		{"accept_80x24", 80, 24, true, []string{" ", " ", " ", "S", "A"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			if tc.seed {
				e.seed()
			}
			m := e.model(tc.w, tc.h)
			for _, k := range tc.keys {
				m = step(t, m, keyMsg(k))
			}
			v := m.View()
			checkFits(t, v, tc.w, tc.h)
			golden.RequireEqual(t, v)
		})
	}
}

// checkFits: exactly h lines, none wider than w.
func checkFits(t *testing.T, v string, w, h int) {
	t.Helper()
	lines := strings.Split(v, "\n")
	if len(lines) != h {
		t.Errorf("view has %d lines, want %d", len(lines), h)
	}
	for i, l := range lines {
		if n := lipglossWidth(l); n > w {
			t.Errorf("line %d is %d wide (> %d): %q", i, n, w, l)
		}
	}
}

func TestResizeKeepsTheViewInBounds(t *testing.T) {
	e := newEnv(t)
	e.seed()
	m := e.model(80, 24)
	for _, sz := range [][2]int{{40, 12}, {200, 60}, {80, 24}, {30, 8}} {
		m = step(t, m, tea.WindowSizeMsg{Width: sz[0], Height: sz[1]})
		checkFits(t, m.View(), sz[0], sz[1])
	}
}
