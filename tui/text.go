package tui

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/mcp-confirm/mcp-confirm/guard"
	"github.com/mcp-confirm/mcp-confirm/pending"
	"github.com/mcp-confirm/mcp-confirm/termtext"
	"github.com/mcp-confirm/mcp-confirm/timetext"
)

// clean makes one line of untrusted text (a tool name, a reason, an error)
// inert: escape sequences, controls and bidirectional controls go
// (termtext.Line). Everything from a server passes here before it is styled or
// truncated.
func clean(s string) string { return termtext.Line(s) }

// cleanBlock is clean for multi-line text (descriptions, results): newlines
// stay, tabs become spaces.
func cleanBlock(s string) string {
	return strings.ReplaceAll(termtext.Strip(s), "\t", "    ")
}

// trunc cuts s to w cells with an ellipsis, measuring as the terminal does.
func trunc(s string, w int) string {
	if w <= 0 {
		return ""
	}
	return ansi.Truncate(s, w, "…")
}

// pad truncates or right-pads s to exactly w cells.
func pad(s string, w int) string {
	s = trunc(s, w)
	if n := ansi.StringWidth(s); n < w {
		s += strings.Repeat(" ", w-n)
	}
	return s
}

// padLeft right-aligns s in w cells.
func padLeft(s string, w int) string {
	s = trunc(s, w)
	if n := ansi.StringWidth(s); n < w {
		s = strings.Repeat(" ", w-n) + s
	}
	return s
}

// keyTail is the last six characters of a key, the part a person compares.
func keyTail(k string) string {
	k = clean(k)
	if len(k) <= 6 {
		return k
	}
	return GlyphKeyTail + k[len(k)-6:]
}

// consoleHint continues the message of an error the guard leaves to the
// front-end to word: what to do, in the console's own keys and dialogs.
func consoleHint(err error) string {
	var noQuery *guard.NoQueryError
	var settled *guard.SettledKeyError
	switch {
	case errors.As(err, &noQuery):
		return "; pick a read tool in the query dialog, or set query_tool in the policy"
	case errors.As(err, &settled) && settled.State == pending.StateFailed:
		return fmt.Sprintf("; retry call %d (r on it), or use a new key", settled.CallID)
	}
	return ""
}

// age is a short duration: 12s, 4m, 3h, 2d (timetext.Age, which the CLI's
// list shares; the short name keeps the screens' call sites as they are).
func age(d time.Duration) string { return timetext.Age(d) }

// elapsed is a duration with one decimal for the in-flight clock: 3.4s.
func elapsed(d time.Duration) string {
	if d < time.Minute {
		return fmt.Sprintf("%.1fs", d.Seconds())
	}
	return d.Truncate(time.Second).String()
}

// shortArgs renders a stored argument object on one line as k=v pairs in
// key order: the part of a call a person scans for in a list.
func shortArgs(raw json.RawMessage) string {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return clean(string(raw))
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(' ')
		}
		v := string(m[k])
		var s string
		if json.Unmarshal(m[k], &s) == nil {
			v = s
		}
		b.WriteString(clean(k))
		b.WriteByte('=')
		b.WriteString(clean(v))
	}
	return b.String()
}

// prettyJSON indents JSON for display, every string and key sanitised
// first (JSON would show an escape sequence as \u001b…, inert but noisy).
func prettyJSON(raw json.RawMessage) string {
	return cleanJSON(raw, "  ")
}

// cleanJSON re-encodes JSON with the control sequences taken out of its
// strings and keys; indent "" gives compact JSON. Key order is kept sorted.
func cleanJSON(raw json.RawMessage, indent string) string {
	if len(raw) == 0 {
		return ""
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return cleanBlock(string(raw))
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", indent)
	if err := enc.Encode(cleanValue(v)); err != nil {
		return cleanBlock(string(raw))
	}
	return cleanBlock(strings.TrimSuffix(buf.String(), "\n"))
}

func cleanValue(v any) any {
	switch x := v.(type) {
	case string:
		return clean(x)
	case []any:
		for i := range x {
			x[i] = cleanValue(x[i])
		}
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[clean(k)] = cleanValue(e)
		}
		return out
	}
	return v
}

// resultPart is which part of a tool's result the console shows: a
// result often carries the same data twice (structured content, and its
// JSON again as text for older clients), so one part is shown, never both.
type resultPart int

const (
	partStructured resultPart = iota // the structured content; the text when there is none
	partText                         // the text (and other) content; the structured when there is none
)

// parsedResult is a CallToolResult's two parts, sanitised.
type parsedResult struct {
	text       string // text content, then a mark per non-text content
	structured string // structured content as one-line JSON, spaced so it wraps
	raw        string // not a result: the stored JSON as it is
}

func parseResult(raw json.RawMessage) parsedResult {
	if len(raw) == 0 {
		return parsedResult{}
	}
	var r struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
		StructuredContent json.RawMessage `json:"structuredContent"`
	}
	if json.Unmarshal(raw, &r) != nil {
		return parsedResult{raw: cleanBlock(string(raw))}
	}
	var parts []string
	for _, c := range r.Content {
		if c.Type == "text" && c.Text != "" {
			parts = append(parts, cleanBlock(c.Text))
		} else if c.Type != "" && c.Type != "text" {
			parts = append(parts, "["+clean(c.Type)+" content]")
		}
	}
	p := parsedResult{text: strings.Join(parts, "\n")}
	if len(r.StructuredContent) > 0 && string(r.StructuredContent) != "null" {
		p.structured = spacedJSON(cleanJSON(r.StructuredContent, ""))
	}
	return p
}

// both: the result has a text part and a structured part to choose from.
func (p parsedResult) both() bool { return p.text != "" && p.structured != "" }

func (p parsedResult) show(part resultPart) string {
	switch {
	case p.raw != "":
		return p.raw
	case part == partText && p.text != "", p.structured == "":
		return p.text
	}
	return p.structured
}

// resultText is one part of a CallToolResult, sanitised: the structured
// content when there is some, else the text (partStructured), or the
// other way round (partText).
func resultText(raw json.RawMessage, part resultPart) string {
	return parseResult(raw).show(part)
}

// spacedJSON puts a space after each comma and colon of compact JSON
// outside its strings, so that a long value wraps between its fields
// rather than inside one.
func spacedJSON(s string) string {
	var b strings.Builder
	b.Grow(len(s) + len(s)/8)
	inStr, esc := false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		b.WriteByte(c)
		switch {
		case esc:
			esc = false
		case inStr && c == '\\':
			esc = true
		case c == '"':
			inStr = !inStr
		case !inStr && (c == ',' || c == ':'):
			b.WriteByte(' ')
		}
	}
	return b.String()
}

// rpcErrorText renders a stored JSON-RPC error.
func rpcErrorText(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var e struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	if json.Unmarshal(raw, &e) != nil {
		return cleanBlock(string(raw))
	}
	return fmt.Sprintf("error %d: %s", e.Code, clean(e.Message))
}

// wrap breaks text to w cells (at least 10) at spaces only, so a token
// (a key, a JSON field, a stamp, whose parts stamp joins with no-break
// spaces) stays whole on one line. A token wider than w starts a line of
// its own and is cut into lines of w: nothing is lost. Indentation at the
// start of a line is kept; the spaces where a line breaks are dropped.
// Escape sequences (styles) count no width.
func wrap(s string, w int) string {
	if w < 10 {
		w = 10
	}
	in := strings.Split(s, "\n")
	out := make([]string, 0, len(in))
	for _, l := range in {
		out = append(out, wrapLine(l, w)...)
	}
	return strings.Join(out, "\n")
}

func wrapLine(l string, w int) []string {
	if ansi.StringWidth(l) <= w {
		return []string{l}
	}
	var out []string
	var cur strings.Builder
	curW, words := 0, 0 // width of cur; words in it (else it is empty or indentation)
	put := func(s string, sw int) { cur.WriteString(s); curW += sw }
	flush := func() {
		out = append(out, cur.String())
		cur.Reset()
		curW, words = 0, 0
	}
	for first := true; len(l) > 0; first = false {
		// One step: the spaces before a word, then the word.
		i := 0
		for i < len(l) && l[i] == ' ' {
			i++
		}
		sp := l[:i]
		j := strings.IndexByte(l[i:], ' ')
		if j < 0 {
			j = len(l) - i
		}
		word := l[i : i+j]
		l = l[i+j:]
		ww := ansi.StringWidth(word)
		if words == 0 && !first {
			sp = "" // a wrapped line starts at its word
		}
		if curW+len(sp)+ww <= w {
			put(sp+word, len(sp)+ww)
			words++
			continue
		}
		if word == "" { // the spaces where the line breaks
			continue
		}
		if words > 0 {
			flush()
			sp = ""
		}
		if curW+len(sp)+ww <= w {
			put(sp+word, len(sp)+ww)
			words++
			continue
		}
		if ww <= w { // whole, without the indentation it does not fit after
			cur.Reset()
			curW = 0
			put(word, ww)
			words++
			continue
		}
		// Wider than a line: it fills this one and goes on in lines of w.
		if curW+len(sp) < w {
			put(sp, len(sp))
		}
		head := ansi.Truncate(word, w-curW, "")
		put(head, ansi.StringWidth(head))
		flush()
		rest := strings.Split(ansi.Hardwrap(ansi.TruncateLeft(word, ansi.StringWidth(head), ""), w, true), "\n")
		out = append(out, rest[:len(rest)-1]...)
		last := rest[len(rest)-1]
		put(last, ansi.StringWidth(last))
		words = 1
	}
	if words > 0 || curW > 0 || len(out) == 0 {
		flush()
	}
	return out
}

// plural is "1 attempt" / "2 attempts".
func plural(n int, word string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, word)
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// displayName shows a name from a server (a tool's, a server's) with its
// controls escaped visibly rather than dropped (termtext.Name), so that a
// hostile look-alike of an honest tool's name does not read the same.
func displayName(s string) string { return termtext.Name(s) }
