package idempotency

import (
	"fmt"
	"unicode"

	"github.com/mark3labs/mcp-go/mcp"
)

// MaxKeyLen bounds a key; longer ones are refused rather than truncated.
const MaxKeyLen = 255

// keyOf reads the call's key from _meta and from the key argument. Both may
// be present only if they agree: otherwise the caller is confused about which
// operation this is, and guessing could merge two of them.
func keyOf(req mcp.CallToolRequest, keyArg string) (string, error) {
	metaKey, err := keyValue(req.Params.Meta.GetMetaField(MetaKey), "_meta "+MetaKey)
	if err != nil {
		return "", err
	}
	var argKey string
	if keyArg != "" {
		if args := req.GetArguments(); args != nil {
			if argKey, err = keyValue(args[keyArg], "argument "+keyArg); err != nil {
				return "", err
			}
		}
	}
	if metaKey != "" && argKey != "" && metaKey != argKey {
		return "", fmt.Errorf("the idempotency key in _meta (%q) and in argument %s (%q) differ; send one key, or the same key in both", metaKey, keyArg, argKey)
	}
	if metaKey != "" {
		return metaKey, nil
	}
	return argKey, nil
}

func keyValue(v any, where string) (string, error) {
	if v == nil {
		return "", nil
	}
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("the idempotency key in %s must be a string, not %T", where, v)
	}
	if s == "" || len(s) > MaxKeyLen {
		return "", fmt.Errorf("the idempotency key in %s must be 1 to %d characters long", where, MaxKeyLen)
	}
	for _, r := range s {
		if unicode.IsSpace(r) || !unicode.IsPrint(r) {
			return "", fmt.Errorf("the idempotency key in %s has a space or control character; use printable characters only", where)
		}
	}
	return s, nil
}
