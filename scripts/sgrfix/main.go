// Command sgrfix rewrites a `tmux capture-pane -e` dump so that freeze
// v0.2.2 renders it as the terminal showed it. freeze handles only a few
// SGR codes (no 39/49 defaults, no 22-29 resets, no 40-47, no reverse) and
// starts every line unstyled, while tmux relies on all of those. sgrfix
// tracks the SGR state and writes it out whole, as ESC[0;...m, at every
// change and at the start of every line; it drops trailing blank lines.
//
// Usage: tmux capture-pane -e -p -t app | go run ./scripts/sgrfix > shot.ansi
package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
)

var sgr = regexp.MustCompile("\x1b\\[([0-9;:]*)m")

type state struct {
	fg, bg                      string // "" default, else "38;5;n" / "38;2;r;g;b" style tails without the 38/48
	bold, italic, under, strike bool
	reverse                     bool
}

func (s state) String() string {
	parts := []string{"0"}
	fg, bg := s.fg, s.bg
	if s.reverse {
		fg, bg = bg, fg
		if fg == "" {
			fg = "5;0" // reverse of the default: black on white
		}
		if bg == "" {
			bg = "5;15"
		}
	}
	if s.bold {
		parts = append(parts, "1")
	}
	if s.italic {
		parts = append(parts, "3")
	}
	if s.under {
		parts = append(parts, "4")
	}
	if s.strike {
		parts = append(parts, "9")
	}
	if fg != "" {
		parts = append(parts, "38;"+fg)
	}
	if bg != "" {
		parts = append(parts, "48;"+bg)
	}
	return "\x1b[" + strings.Join(parts, ";") + "m"
}

func (s *state) apply(params string) {
	if params == "" {
		*s = state{}
		return
	}
	ps := strings.FieldsFunc(params, func(r rune) bool { return r == ';' || r == ':' })
	for i := 0; i < len(ps); i++ {
		n, err := strconv.Atoi(ps[i])
		if err != nil {
			continue
		}
		switch {
		case n == 0:
			*s = state{}
		case n == 1:
			s.bold = true
		case n == 3:
			s.italic = true
		case n == 4:
			s.under = true
		case n == 7:
			s.reverse = true
		case n == 9:
			s.strike = true
		case n == 22:
			s.bold = false
		case n == 23:
			s.italic = false
		case n == 24:
			s.under = false
		case n == 27:
			s.reverse = false
		case n == 29:
			s.strike = false
		case n == 39:
			s.fg = ""
		case n == 49:
			s.bg = ""
		case n >= 30 && n <= 37:
			s.fg = "5;" + strconv.Itoa(n-30)
		case n >= 90 && n <= 97:
			s.fg = "5;" + strconv.Itoa(n-90+8)
		case n >= 40 && n <= 47:
			s.bg = "5;" + strconv.Itoa(n-40)
		case n >= 100 && n <= 107:
			s.bg = "5;" + strconv.Itoa(n-100+8)
		case n == 38 || n == 48:
			tail, used := colour(ps[i+1:])
			if n == 38 {
				s.fg = tail
			} else {
				s.bg = tail
			}
			i += used
		}
	}
}

// colour reads "5;n" or "2;r;g;b" after a 38/48.
func colour(ps []string) (string, int) {
	if len(ps) >= 2 && ps[0] == "5" {
		return "5;" + ps[1], 2
	}
	if len(ps) >= 4 && ps[0] == "2" {
		return "2;" + strings.Join(ps[1:4], ";"), 4
	}
	return "", len(ps)
}

func main() {
	in, err := io.ReadAll(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "sgrfix:", err)
		os.Exit(1)
	}
	lines := strings.Split(strings.TrimRight(string(in), "\n"), "\n")
	for len(lines) > 0 && strings.TrimSpace(sgr.ReplaceAllString(lines[len(lines)-1], "")) == "" {
		lines = lines[:len(lines)-1]
	}
	w := bufio.NewWriter(os.Stdout)
	var st state
	for _, l := range lines {
		w.WriteString(st.String())
		last := 0
		for _, m := range sgr.FindAllStringSubmatchIndex(l, -1) {
			w.WriteString(l[last:m[0]])
			st.apply(l[m[2]:m[3]])
			w.WriteString(st.String())
			last = m[1]
		}
		w.WriteString(l[last:])
		w.WriteString("\x1b[0m\n")
	}
	w.Flush()
}
