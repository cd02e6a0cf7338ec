package idempotency

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// Fingerprint returns the SHA-256 (hex) of the canonical JSON of args with
// the key argument keyArg removed, and that canonical JSON.
//
// Canonical means: object keys sorted, no insignificant space, no HTML
// escaping, integral numbers written as integers ("2.0" and "2" are the same
// quantity), absent arguments the same as {}. The key argument is left out
// because the same operation may carry its key in _meta on one send and in the
// arguments on the next.
func Fingerprint(args any, keyArg string) (fingerprint string, canonical []byte, err error) {
	var raw []byte
	switch a := args.(type) {
	case nil:
	case json.RawMessage:
		raw = a
	case []byte:
		raw = a
	default:
		if raw, err = json.Marshal(a); err != nil {
			return "", nil, fmt.Errorf("encode arguments: %w", err)
		}
	}
	var v any = map[string]any{}
	if len(bytes.TrimSpace(raw)) > 0 {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber() // keep integers beyond 2^53 exact
		if err := dec.Decode(&v); err != nil {
			return "", nil, fmt.Errorf("decode arguments: %w", err)
		}
		if v == nil {
			v = map[string]any{}
		}
	}
	if obj, ok := v.(map[string]any); ok && keyArg != "" {
		delete(obj, keyArg)
	}
	canonical, err = canonicalJSON(normalizeNumbers(v))
	if err != nil {
		return "", nil, err
	}
	sum := sha256.Sum256(canonical)
	return hex.EncodeToString(sum[:]), canonical, nil
}

func canonicalJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	// encoding/json writes map keys sorted, which is all the ordering needed.
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("encode canonical arguments: %w", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

func normalizeNumbers(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = normalizeNumbers(e)
		}
	case []any:
		for i, e := range x {
			x[i] = normalizeNumbers(e)
		}
	case json.Number:
		return canonicalNumber(x)
	}
	return v
}

func canonicalNumber(n json.Number) json.Number {
	s := string(n)
	if i, err := strconv.ParseInt(s, 10, 64); err == nil {
		return json.Number(strconv.FormatInt(i, 10))
	}
	if !strings.ContainsAny(s, ".eE") {
		return n // an integer too large for int64: keep its digits
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return n
	}
	if f >= -(1<<53) && f <= 1<<53 && f == math.Trunc(f) {
		return json.Number(strconv.FormatInt(int64(f), 10))
	}
	return json.Number(strconv.FormatFloat(f, 'g', -1, 64))
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
