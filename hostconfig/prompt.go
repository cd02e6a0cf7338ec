package hostconfig

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// ErrNoAnswer: the terminal closed before a choice was made.
var ErrNoAnswer = errors.New("no answer")

// Choose asks, on a terminal, which of the hosts found to set up: numbers
// or names, separated by spaces or commas, "all", or nothing for none. An
// answer it cannot read is asked again. describe gives the text shown
// after each host's name (its files).
func Choose(in io.Reader, out io.Writer, found []Host, describe func(Host) string) ([]Host, error) {
	fmt.Fprintln(out, "Found MCP servers in the config of:")
	for i, h := range found {
		fmt.Fprintf(out, "  %d. %-15s %s\n", i+1, h.Name, describe(h))
	}
	sc := bufio.NewScanner(in)
	for {
		fmt.Fprint(out, "Put mcp-confirm proxy in front of which? (numbers or names, \"all\"; empty for none): ")
		if !sc.Scan() {
			fmt.Fprintln(out)
			return nil, ErrNoAnswer
		}
		chosen, bad := parseChoice(sc.Text(), found)
		if bad == "" {
			return chosen, nil
		}
		fmt.Fprintf(out, "%q is not one of the hosts above.\n", bad)
	}
}

// parseChoice reads one answer; bad is the first word it could not read.
func parseChoice(answer string, found []Host) (chosen []Host, bad string) {
	words := strings.FieldsFunc(answer, func(r rune) bool { return r == ' ' || r == ',' || r == '\t' })
	for _, w := range words {
		if strings.EqualFold(w, "all") {
			return slices.Clone(found), ""
		}
		i := -1
		if n, err := strconv.Atoi(w); err == nil && n >= 1 && n <= len(found) {
			i = n - 1
		} else {
			i = slices.IndexFunc(found, func(h Host) bool { return h.Name == w })
		}
		if i < 0 {
			return nil, w
		}
		if !slices.ContainsFunc(chosen, func(h Host) bool { return h.Name == found[i].Name }) {
			chosen = append(chosen, found[i])
		}
	}
	return chosen, ""
}
