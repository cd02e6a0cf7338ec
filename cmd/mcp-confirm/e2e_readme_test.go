package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// storyStep is one command of the README's command-line story and what its
// comment promises.
type storyStep struct {
	line   string
	exit   int
	fields []string // `"name":value` pairs the comment shows, to be found in stdout
}

var (
	storyExit  = regexp.MustCompile(`\bexit (\d+)\b`)
	storyField = regexp.MustCompile(`"(state|reason|held|held_by|replayed)":("[^"]*"|true|false|\d+)`)
	storyAssig = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)
)

// readmeStory extracts the sh block under "The story, from the command
// line": its variable assignments, and each command with the exit code (and
// fields) the comment lines after it name.
func readmeStory(t *testing.T) (assigns []string, steps []storyStep) {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i := strings.Index(s, "## The story, from the command line")
	if i < 0 {
		t.Fatal(`README.md has no "## The story, from the command line" section`)
	}
	s = s[i:]
	open := strings.Index(s, "```sh\n")
	if open < 0 {
		t.Fatal("the README's story has no ```sh block")
	}
	s = s[open+len("```sh\n"):]
	s = s[:strings.Index(s, "```")]
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "":
		case strings.HasPrefix(line, "#"):
			if len(steps) == 0 {
				t.Fatalf("README story: a comment before any command: %q", line)
			}
			st := &steps[len(steps)-1]
			if m := storyExit.FindStringSubmatch(line); m != nil {
				st.exit, _ = strconv.Atoi(m[1])
			}
			st.fields = append(st.fields, storyField.FindAllString(line, -1)...)
		case storyAssig.MatchString(line) && len(steps) == 0:
			assigns = append(assigns, line)
		default:
			steps = append(steps, storyStep{line: line, exit: -1})
		}
	}
	for _, st := range steps {
		if st.exit < 0 {
			t.Fatalf("README story: the command %q has no comment saying its exit code (\"exit N\")", st.line)
		}
	}
	if len(steps) < 4 {
		t.Fatalf("README story: %d commands, want the whole story", len(steps))
	}
	return assigns, steps
}

// TestREADMEStoryRunsAsWritten runs the README's command-line story as it
// stands, line by line with sh, in an empty folder with the built binary on
// PATH, and checks each step's exit code (and the fields its comment shows)
// against the comment, so the README cannot drift from the product.
func TestREADMEStoryRunsAsWritten(t *testing.T) {
	assigns, steps := readmeStory(t)
	home := t.TempDir()
	env := append(childEnv(home), "PATH="+filepath.Dir(e2eBin)+string(os.PathListSeparator)+os.Getenv("PATH"))
	for i, st := range steps {
		ctx, cancel := context.WithTimeout(context.Background(), cmdHang)
		cmd := exec.CommandContext(ctx, "sh", "-c", strings.Join(append(assigns, st.line), "\n"))
		cmd.Env, cmd.Dir = env, home
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		cancel()
		code := 0
		var exit *exec.ExitError
		switch {
		case errors.As(err, &exit):
			code = exit.ExitCode()
		case err != nil:
			t.Fatalf("step %d %q: %v", i+1, st.line, err)
		}
		if code != st.exit {
			t.Fatalf("step %d %q: exit %d, the README says %d\nstdout: %s\nstderr: %s", i+1, st.line, code, st.exit, out.String(), errb.String())
		}
		for _, f := range st.fields {
			if !strings.Contains(out.String(), f) {
				t.Errorf("step %d %q: the README shows %s, stdout has not:\n%s", i+1, st.line, f, out.String())
			}
		}
	}
}
