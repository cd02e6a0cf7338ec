package idempotency

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"

	"github.com/mcp-confirm/mcp-confirm/canonical"
)

// Fingerprint returns the SHA-256 (hex) of the canonical JSON of args with
// the key argument keyArg removed, and that canonical JSON.
//
// Canonical is package canonical's form (RFC 8785, numbers kept exact):
// object keys sorted, no insignificant space, one spelling of each string and
// of each number ("2.0" and "2" are the same quantity, 9007199254740993 is
// not 9007199254740992), absent arguments the same as {}. The key argument is
// left out because the same operation may carry its key in _meta on one send
// and in the arguments on the next.
func Fingerprint(args any, keyArg string) (fingerprint string, canon []byte, err error) {
	_, canon, err = canonicalArgs(args, keyArg)
	if err != nil {
		return "", nil, err
	}
	sum := sha256.Sum256(canon)
	return hex.EncodeToString(sum[:]), canon, nil
}

// canonicalArgs decodes args (nil, raw JSON bytes, or any value encoding/json
// can write), removes the top-level arguments named in drop, and returns the
// decoded value and its canonical JSON.
func canonicalArgs(args any, drop ...string) (v any, canon []byte, err error) {
	var raw []byte
	switch a := args.(type) {
	case nil:
	case json.RawMessage:
		raw = a
	case []byte:
		raw = a
	default:
		if raw, err = json.Marshal(a); err != nil {
			return nil, nil, fmt.Errorf("encode arguments: %w", err)
		}
	}
	v = map[string]any{}
	if len(bytes.TrimSpace(raw)) > 0 {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber() // numbers as written, for canonical to keep exact
		if err := dec.Decode(&v); err != nil {
			return nil, nil, fmt.Errorf("decode arguments: %w", err)
		}
		if v == nil {
			v = map[string]any{}
		}
	}
	if obj, ok := v.(map[string]any); ok {
		for _, name := range drop {
			if name != "" {
				delete(obj, name)
			}
		}
	}
	if canon, err = canonical.Marshal(v); err != nil {
		return nil, nil, fmt.Errorf("canonical arguments: %w", err)
	}
	return v, canon, nil
}

// differingFields names the top-level arguments whose values differ between
// two canonical argument objects, sorted. Non-object arguments differ as a
// whole, named "arguments".
func differingFields(a, b []byte) []string {
	var ma, mb map[string]json.RawMessage
	if json.Unmarshal(a, &ma) != nil || json.Unmarshal(b, &mb) != nil {
		return []string{"arguments"}
	}
	var fields []string
	for k, va := range ma {
		if vb, ok := mb[k]; !ok || !bytes.Equal(va, vb) {
			fields = append(fields, k)
		}
	}
	for k := range mb {
		if _, ok := ma[k]; !ok {
			fields = append(fields, k)
		}
	}
	sort.Strings(fields)
	return fields
}
