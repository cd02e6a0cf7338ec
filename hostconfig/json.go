package hostconfig

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/tailscale/hujson"
)

// jsonObject reads an object of a parsed file; its zero value is an absent
// object, which has no members.
type jsonObject struct{ o *hujson.Object }

// member is the object's member called name: the last one, as hosts'
// JSON.parse takes the last of duplicate names.
func (j jsonObject) member(name string) *hujson.ObjectMember {
	if j.o == nil {
		return nil
	}
	for i := len(j.o.Members) - 1; i >= 0; i-- {
		if memberName(j.o.Members[i]) == name {
			return &j.o.Members[i]
		}
	}
	return nil
}

func (j jsonObject) object(name string) (jsonObject, bool) {
	m := j.member(name)
	if m == nil {
		return jsonObject{}, false
	}
	o, ok := m.Value.Value.(*hujson.Object)
	return jsonObject{o}, ok
}

// str is a member's string value; ok is false when it is absent or not a
// string.
func (j jsonObject) str(name string) (string, bool) {
	m := j.member(name)
	if m == nil {
		return "", false
	}
	return literalString(m.Value.Value)
}

// strings is a member's value when it is an array of strings (others are
// left out).
func (j jsonObject) strings(name string) []string {
	m := j.member(name)
	if m == nil {
		return nil
	}
	arr, ok := m.Value.Value.(*hujson.Array)
	if !ok {
		return nil
	}
	var out []string
	for _, e := range arr.Elements {
		if s, ok := literalString(e.Value); ok {
			out = append(out, s)
		}
	}
	return out
}

func (j jsonObject) isTrue(name string) bool {
	m := j.member(name)
	if m == nil {
		return false
	}
	lit, ok := m.Value.Value.(hujson.Literal)
	return ok && lit.Kind() == 't'
}

func memberName(m hujson.ObjectMember) string {
	s, _ := literalString(m.Name.Value)
	return s
}

func literalString(v hujson.ValueTrimmed) (string, bool) {
	lit, ok := v.(hujson.Literal)
	if !ok || lit.Kind() != '"' {
		return "", false
	}
	return lit.String(), true
}

// stringArray is an array's elements when they are all strings.
func stringArray(v hujson.ValueTrimmed) ([]string, bool) {
	arr, ok := v.(*hujson.Array)
	if !ok {
		return nil, false
	}
	out := make([]string, 0, len(arr.Elements))
	for _, e := range arr.Elements {
		s, ok := literalString(e.Value)
		if !ok {
			return nil, false
		}
		out = append(out, s)
	}
	return out, true
}

// stringObject is an object's members when they are all strings.
func stringObject(v hujson.ValueTrimmed) (map[string]string, bool) {
	o, ok := v.(*hujson.Object)
	if !ok {
		return nil, false
	}
	out := make(map[string]string, len(o.Members))
	for _, m := range o.Members {
		s, ok := literalString(m.Value.Value)
		if !ok {
			return nil, false
		}
		out[memberName(m)] = s
	}
	return out, true
}

// ParseError is a config file that is not JSON (or JSON with comments), or
// whose servers are not where the host expects them. Nothing was changed.
type ParseError struct {
	Path         string
	Line, Column int // 1-based; 0 when not known
	Msg          string
}

func (e *ParseError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s: line %d, column %d: %s", e.Path, e.Line, e.Column, e.Msg)
	}
	return fmt.Sprintf("%s: %s", e.Path, e.Msg)
}

// parse reads a config file's bytes. A file of only whitespace is an empty
// object (a host's "create the file" leaves one).
func parse(path string, src []byte) (hujson.Value, error) {
	if len(bytes.TrimSpace(src)) == 0 {
		return hujson.Value{}, nil
	}
	v, err := hujson.Parse(src)
	if err != nil {
		pe := &ParseError{Path: path, Msg: err.Error()}
		rest, ok := strings.CutPrefix(err.Error(), "hujson: ")
		if ok {
			var line, col int
			if n, _ := fmt.Sscanf(rest, "line %d, column %d:", &line, &col); n == 2 {
				pe.Line, pe.Column = line, col
				if _, msg, ok := strings.Cut(rest, ": "); ok {
					pe.Msg = msg
				}
			}
		}
		return v, pe
	}
	if _, ok := v.Value.(*hujson.Object); !ok {
		return v, shapeError(path, src, v, "the file is not a JSON object ({...})")
	}
	return v, nil
}

// shapeError is a ParseError at value v.
func shapeError(path string, src []byte, v hujson.Value, msg string) *ParseError {
	pe := &ParseError{Path: path, Msg: msg}
	if n := v.StartOffset; n >= 0 && n <= len(src) {
		pe.Line = 1 + bytes.Count(src[:n], []byte("\n"))
		pe.Column = 1 + n - (bytes.LastIndexByte(src[:n], '\n') + 1)
	}
	return pe
}

func kindName(v hujson.ValueTrimmed) string {
	switch v.Kind() {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case '0':
		return "a number"
	case 'n':
		return "null"
	default:
		return "a boolean"
	}
}
