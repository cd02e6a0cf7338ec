package guard

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/mcp-confirm/mcp-confirm/pending"
)

// Redaction (policy `redact`, SPEC §4). A rule is either
//
//   - a plain name ("card_number"): a field of that name at any depth, in
//     nested objects and in the objects of arrays; or
//   - a dotted path ("payment.card_number"): the field at exactly that path
//     from the top, passing through arrays element by element
//     ("items.card_number" masks it in every element of items).
//
// A field whose own name contains a dot cannot be named by a path; a plain
// name rule of its last part covers it. Redacted fields are stored as
// Redacted, and the values they held are masked in whatever else the
// journal stores of the call (results, errors, evidence, notes): see masker.

// Redacted is the mask stored in place of a redacted argument.
const Redacted = "[redacted]"

// redactRule is one parsed `redact` entry.
type redactRule struct {
	path     []string // the names from the top; one name when anyDepth
	anyDepth bool
}

// parseRedact reads a tool's `redact` entries; ParsePolicy has refused
// malformed ones (checkRedact).
func parseRedact(fields []string) []redactRule {
	rules := make([]redactRule, 0, len(fields))
	for _, f := range fields {
		parts := strings.Split(f, ".")
		rules = append(rules, redactRule{path: parts, anyDepth: len(parts) == 1})
	}
	return rules
}

// checkRedact refuses an entry no field could match: empty, or a path
// with an empty part ("payment..card", ".card").
func checkRedact(f string) error {
	for _, p := range strings.Split(f, ".") {
		if p == "" {
			return fmt.Errorf("%q is not a field name or a dotted path (payment.card_number)", f)
		}
	}
	return nil
}

// matches: the field at path (object names from the top, array indices
// left out) is redacted. Anchored, a dotted rule is a path from the top
// (the arguments); not anchored, it may end anywhere (a result, whose
// top is the server's envelope: structuredContent.payment.card_number).
func matches(rules []redactRule, path []string, anchored bool) bool {
	for _, r := range rules {
		switch {
		case r.anyDepth || !anchored:
			if len(path) >= len(r.path) && equalPath(path[len(path)-len(r.path):], r.path) {
				return true
			}
		case len(path) == len(r.path) && equalPath(path, r.path):
			return true
		}
	}
	return false
}

func equalPath(a, b []string) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// redactTree returns a copy of v with the fields the rules match replaced
// by Redacted, and the leaf values those fields held (for the masker).
func redactTree(v any, rules []redactRule, anchored bool) (any, []string) {
	var secrets []string
	var walk func(v any, path []string) any
	walk = func(v any, path []string) any {
		switch x := v.(type) {
		case map[string]any:
			out := make(map[string]any, len(x))
			for k, e := range x {
				p := append(path[:len(path):len(path)], k)
				if matches(rules, p, anchored) {
					secrets = appendLeaves(secrets, e)
					out[k] = Redacted
					continue
				}
				out[k] = walk(e, p)
			}
			return out
		case []any:
			out := make([]any, len(x))
			for i, e := range x {
				out[i] = walk(e, path)
			}
			return out
		}
		return v
	}
	if len(rules) == 0 {
		return v, nil
	}
	return walk(v, nil), secrets
}

// appendLeaves adds the scalar values in v, as text, to out.
func appendLeaves(out []string, v any) []string {
	switch x := v.(type) {
	case string:
		return append(out, x)
	case json.Number:
		return append(out, x.String())
	case float64:
		return append(out, strconv.FormatFloat(x, 'f', -1, 64))
	case int:
		return append(out, strconv.Itoa(x))
	case map[string]any:
		for _, e := range x {
			out = appendLeaves(out, e)
		}
	case []any:
		for _, e := range x {
			out = appendLeaves(out, e)
		}
	}
	return out
}

// redact returns the arguments as the journal stores them, and the values
// it masked: redacted fields replaced by Redacted, the key argument left
// out (the call's key is stored on its own).
func redact(args map[string]any, fields []string, keyArg string) (json.RawMessage, []string) {
	clean := make(map[string]any, len(args))
	for k, v := range args {
		if k != keyArg {
			clean[k] = v
		}
	}
	out, secrets := redactTree(clean, parseRedact(fields), true)
	b, _ := json.Marshal(out)
	return b, secrets
}

// restoreRedacted fills every Redacted value in stored (at any depth) with
// the value at the same path in given (the operator's --args), and names
// the paths given lacks.
func restoreRedacted(stored, given any, path string, missing *[]string) any {
	switch x := stored.(type) {
	case string:
		if x != Redacted {
			return x
		}
		if given == nil {
			*missing = append(*missing, path)
			return x
		}
		return given
	case map[string]any:
		g, _ := given.(map[string]any)
		for k, e := range x {
			var ge any
			if g != nil {
				ge = g[k]
			}
			x[k] = restoreRedacted(e, ge, joinPath(path, k), missing)
		}
		return x
	case []any:
		g, _ := given.([]any)
		for i, e := range x {
			var ge any
			if i < len(g) {
				ge = g[i]
			}
			x[i] = restoreRedacted(e, ge, fmt.Sprintf("%s[%d]", path, i), missing)
		}
		return x
	}
	return stored
}

func joinPath(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// masker takes redacted values out of what the journal stores of a call
// besides its arguments: a server that echoes its arguments would
// otherwise put a redacted card number into the stored result, `show` and
// every export. Two ways, both applied:
//
//   - by field: in JSON (results, errors, evidence), fields the tool's
//     rules match are masked, whatever their value; a dotted rule matches
//     a path ending anywhere ("payment.card_number" masks
//     structuredContent.payment.card_number);
//   - by value: the values this process redacted from the call's arguments
//     (known only where the call was made or retried) are replaced wherever
//     they appear in text: anywhere for values of 8 characters or more, as
//     a whole token (not inside a longer word or number) for shorter ones.
//     Values under 3 characters are not masked by value.
//
// Where the values are not known (a query run later by another process),
// known tells them by the seals the journal keeps (Journal.RedactedValue):
// a whole string, or a whole word of a text (words end at spaces, quotes
// and brackets, ",;:" and a final ".!?"), whose seal is one of them is
// masked.
type masker struct {
	rules  []redactRule
	values []string // longest first, so a value inside another is not masked first
	known  func(string) bool
	// fieldsInText find `"name": value` in text, for each rule's last name.
	fieldsInText []*regexp.Regexp
}

const (
	minMaskedValue  = 3
	anywhereValueAt = 8
)

func newMasker(fields []string, values []string, known func(string) bool) masker {
	m := masker{rules: parseRedact(fields), known: known}
	for _, r := range m.rules {
		name := regexp.QuoteMeta(r.path[len(r.path)-1])
		m.fieldsInText = append(m.fieldsInText, regexp.MustCompile(
			`((?:"|\\")`+name+`(?:"|\\")\s*:\s*)(?:\\?"(?:[^"\\]|\\[^"])*\\?"|-?[0-9][0-9.eE+-]*|true|false|null)`))
	}
	for _, v := range values {
		if len(v) >= minMaskedValue && v != Redacted {
			m.values = append(m.values, v)
		}
	}
	sort.Slice(m.values, func(i, j int) bool { return len(m.values[i]) > len(m.values[j]) })
	return m
}

func (m masker) empty() bool { return len(m.rules) == 0 && len(m.values) == 0 && m.known == nil }

// text masks the values in s, and the values of the rules' fields where
// s holds JSON as text ("charged {\"cvv\":\"123\"}").
func (m masker) text(s string) string {
	for _, re := range m.fieldsInText {
		s = re.ReplaceAllString(s, "${1}\""+Redacted+"\"")
	}
	for _, v := range m.values {
		s = maskValue(s, v)
	}
	if m.known == nil {
		return s
	}
	if m.known(s) {
		return Redacted
	}
	return m.knownWords(s)
}

// knownWords masks the words of s that known tells.
func (m masker) knownWords(s string) string {
	orig := s
	var b strings.Builder
	masked := false
	for len(s) > 0 {
		i := strings.IndexFunc(s, func(r rune) bool { return !wordSeparator(r) })
		if i < 0 {
			b.WriteString(s)
			break
		}
		b.WriteString(s[:i])
		s = s[i:]
		end := strings.IndexFunc(s, wordSeparator)
		if end < 0 {
			end = len(s)
		}
		word := s[:end]
		core := strings.TrimRight(word, ".!?")
		switch {
		case len(word) >= minMaskedValue && m.known(word):
			b.WriteString(Redacted)
			masked = true
		case len(core) >= minMaskedValue && core != word && m.known(core):
			b.WriteString(Redacted + word[len(core):])
			masked = true
		default:
			b.WriteString(word)
		}
		s = s[end:]
	}
	if !masked {
		return orig
	}
	return b.String()
}

func wordSeparator(r rune) bool {
	switch r {
	case ' ', '\t', '\n', '\r', '"', '\'', '`', ',', ';', ':', '(', ')', '[', ']', '{', '}', '<', '>', '=':
		return true
	}
	return false
}

// maskValue replaces v in s: everywhere when long, as a token when short.
func maskValue(s, v string) string {
	if !strings.Contains(s, v) {
		return s
	}
	if len(v) >= anywhereValueAt {
		return strings.ReplaceAll(s, v, Redacted)
	}
	var b strings.Builder
	for {
		i := strings.Index(s, v)
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		end := i + len(v)
		whole := (i == 0 || !wordByte(s[i-1])) && (end == len(s) || !wordByte(s[end]))
		b.WriteString(s[:i])
		if whole {
			b.WriteString(Redacted)
		} else {
			b.WriteString(v)
		}
		s = s[end:]
	}
}

func wordByte(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || c >= 0x80
}

// json masks a JSON document: by field, then by value in every string,
// number and name. Bytes that are not JSON are masked as text, in their
// raw and their JSON-escaped spelling. Unchanged input is returned as is,
// byte for byte.
func (m masker) json(raw json.RawMessage) json.RawMessage {
	if m.empty() || len(raw) == 0 {
		return raw
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil || dec.More() {
		return m.bytes(raw)
	}
	out, secrets := redactTree(v, m.rules, false)
	changed := len(secrets) > 0 || !reflect.DeepEqual(out, v)
	out = m.walkValues(out, &changed)
	if !changed {
		return raw
	}
	b, err := json.Marshal(out)
	if err != nil {
		return m.bytes(raw)
	}
	return b
}

// bytes masks bytes that are not one JSON document, by value, as written
// and as JSON would escape it.
func (m masker) bytes(raw []byte) json.RawMessage {
	s := m.text(string(raw))
	for _, v := range m.values {
		q, _ := json.Marshal(v)
		if esc := string(q[1 : len(q)-1]); esc != v {
			s = maskValue(s, esc)
		}
	}
	return json.RawMessage(s)
}

func (m masker) walkValues(v any, changed *bool) any {
	switch x := v.(type) {
	case string:
		if t := m.text(x); t != x {
			*changed = true
			return t
		}
	case json.Number:
		if t := m.text(x.String()); t != x.String() {
			*changed = true
			return t // a masked number is stored as the text that masks it
		}
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			nk := m.text(k)
			if nk != k {
				*changed = true
			}
			out[nk] = m.walkValues(e, changed)
		}
		return out
	case []any:
		for i, e := range x {
			x[i] = m.walkValues(e, changed)
		}
	}
	return v
}

// outcome masks what an attempt's outcome stores.
func (m masker) outcome(o pending.Outcome) pending.Outcome {
	if m.empty() {
		return o
	}
	o.Result, o.Error, o.Reason = m.json(o.Result), m.json(o.Error), m.text(o.Reason)
	return o
}

// detail masks an event's detail: JSON as JSON, anything else as text.
func (m masker) detail(s string) string {
	if m.empty() {
		return s
	}
	return string(m.json(json.RawMessage(s)))
}

// masker is the mask for what is stored of call c: its tool's rules, the
// values this process redacted from its arguments, and their seals.
func (g *Guard) masker(c pending.Call) masker {
	return newMasker(g.opts.Policy.tool(c.Tool).Redact, g.secrets.values(sendingKey(c.Tool, c.Key)), g.j.RedactedValue(c))
}

// redactedValues remembers, per (tool, key), the values redaction took out
// of the arguments of a call this process sent, so that a late answer
// echoing them is masked too. Bounded: the oldest are forgotten first (a
// late answer to one of those is still masked by field).
type redactedValues struct {
	mu    sync.Mutex // guards following
	byKey map[string][]string
	order []string
}

const maxRemembered = 4096

func (r *redactedValues) remember(k string, values []string) {
	if len(values) == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.byKey == nil {
		r.byKey = map[string][]string{}
	}
	if _, ok := r.byKey[k]; !ok {
		r.order = append(r.order, k)
	}
	r.byKey[k] = values
	for len(r.order) > maxRemembered {
		delete(r.byKey, r.order[0])
		r.order = r.order[1:]
	}
}

func (r *redactedValues) values(k string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.byKey[k]
}

// example spells the --args that gives a value at path ("payment.card"):
// {"payment":{"card":…}}; array steps are left to the reader.
func example(path string) string {
	parts := strings.Split(path, ".")
	s := "…"
	for i := len(parts) - 1; i >= 0; i-- {
		s = fmt.Sprintf("{%q:%s}", parts[i], s)
	}
	return s
}
