package mcpclient

import (
	"bytes"
	"io"
	"sync"
)

// maxStderrLine bounds one kept stderr line; a server that prints a megabyte
// without a newline must not make every error message a megabyte.
const maxStderrLine = 1024

// stderrTail takes the child's stderr for as long as it runs (a full pipe
// would block the child inside write(2) and stall stdout with it; the
// session's drainStderr feeds it), mirrors the whole stream to an optional
// writer, and keeps the last lines for errors.
type stderrTail struct {
	mirror io.Writer

	mu      sync.Mutex // guards following; never held across a write to mirror
	lines   []string   // ring
	next    int
	full    bool
	partial []byte
	cut     bool // the partial line was truncated
}

func newStderrTail(n int, mirror io.Writer) *stderrTail {
	return &stderrTail{lines: make([]string, n), mirror: mirror}
}

func (s *stderrTail) write(b []byte) {
	if s.mirror != nil {
		// A failing mirror must not stop the drain.
		_, _ = s.mirror.Write(b)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		chunk := b
		if i >= 0 {
			chunk = b[:i]
		}
		if room := maxStderrLine - len(s.partial); room > 0 {
			if len(chunk) > room {
				chunk, s.cut = chunk[:room], true
			}
			s.partial = append(s.partial, chunk...)
		} else if len(chunk) > 0 {
			s.cut = true
		}
		if i < 0 {
			return
		}
		s.push()
		b = b[i+1:]
	}
}

func (s *stderrTail) flush() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.partial) > 0 {
		s.push()
	}
}

func (s *stderrTail) push() {
	if len(s.lines) == 0 {
		s.partial, s.cut = s.partial[:0], false
		return
	}
	line := string(bytes.TrimRight(s.partial, "\r"))
	if s.cut {
		line += " …"
	}
	s.partial, s.cut = s.partial[:0], false
	s.lines[s.next] = line
	s.next = (s.next + 1) % len(s.lines)
	if s.next == 0 {
		s.full = true
	}
}

// Lines returns the kept lines, oldest first.
func (s *stderrTail) Lines() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.full {
		return append([]string(nil), s.lines[:s.next]...)
	}
	out := make([]string, 0, len(s.lines))
	out = append(out, s.lines[s.next:]...)
	return append(out, s.lines[:s.next]...)
}
