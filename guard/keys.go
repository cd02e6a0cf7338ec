package guard

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/oklog/ulid/v2"

	"github.com/mcp-confirm/mcp-confirm/canonical"
	"github.com/mcp-confirm/mcp-confirm/pending"
)

// KeySource makes idempotency keys. The default is a ULID from crypto
// randomness; tests seed it for stable goldens.
type KeySource interface{ NewKey() string }

type ulidKeys struct {
	mu      sync.Mutex
	entropy io.Reader
	now     func() uint64
}

func (k *ulidKeys) NewKey() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return ulid.MustNew(k.now(), k.entropy).String()
}

// SeededKeys returns a deterministic key source (for tests and goldens).
func SeededKeys(r io.Reader) KeySource {
	var t uint64 = 1_700_000_000_000
	return &ulidKeys{entropy: r, now: func() uint64 { t++; return t }}
}

// ValidateKey applies SPEC §9's rule to a caller's key: 1–255 printable
// ASCII characters, no spaces.
func ValidateKey(k string) error {
	if len(k) < 1 || len(k) > 255 {
		return fmt.Errorf("a key has 1 to 255 characters, this one has %d", len(k))
	}
	for i := 0; i < len(k); i++ {
		if c := k[i]; c <= ' ' || c > '~' {
			return fmt.Errorf("key has a space or non-printable character at position %d; use printable characters only", i+1)
		}
	}
	return nil
}

// keyArgNames are the argument names taken as the tool's own key argument
// when the policy names none (SPEC §3), in order of preference.
var keyArgNames = []string{"idempotency_key", "idempotencyKey", "request_id", "requestId", "client_token", "clientToken"}

// KeyArg returns the tool's key argument: the policy's key_arg, else the
// first standard name its input schema declares, else "".
func KeyArg(t mcp.Tool, policyKeyArg string) string {
	if policyKeyArg != "" {
		return policyKeyArg
	}
	props := schemaProperties(t)
	for _, n := range keyArgNames {
		if _, ok := props[n]; ok {
			return n
		}
	}
	return ""
}

// schemaProperties reads the input schema's properties, from the typed
// schema or the raw one, whichever the server's tool carries.
func schemaProperties(t mcp.Tool) map[string]any {
	if len(t.RawInputSchema) > 0 {
		var s struct {
			Properties map[string]any `json:"properties"`
		}
		if json.Unmarshal(t.RawInputSchema, &s) == nil {
			return s.Properties
		}
	}
	return t.InputSchema.Properties
}

// Fingerprint names a business operation: SHA-256 of the canonical form
// (RFC 8785, package canonical) of the arguments without the key argument,
// so that the same operation has the same fingerprint whatever its key and
// however its numbers and strings are spelled (3 = 3.0 = 3e0). Prefixed
// "c1:" so that a fingerprint of the older form (legacyFingerprint) is
// never mistaken for one of this form.
func Fingerprint(args map[string]any, keyArg string) string {
	clean := make(map[string]any, len(args))
	for k, v := range args {
		if k != keyArg {
			clean[k] = v
		}
	}
	b, err := canonical.Marshal(clean)
	if err != nil {
		// Not JSON the canonical form takes (NaN, a cycle): fall back on
		// the older form rather than refuse a call a caller could make.
		return legacyFingerprint(args, keyArg)
	}
	sum := sha256.Sum256(b)
	return fingerprintPrefix + hex.EncodeToString(sum[:])
}

const fingerprintPrefix = "c1:"

// sameOperation reports whether args are those a stored fingerprint was
// made of, in whichever form it was stored: sealed by the journal (seal is
// its Journal.Seal; the usual form) or, in a journal not yet sealed, bare.
func sameOperation(stored string, args map[string]any, keyArg string, seal func(string) string) bool {
	fp, legacy := Fingerprint(args, keyArg), legacyFingerprint(args, keyArg)
	switch {
	case strings.HasPrefix(stored, sealedPrefix):
		return stored == seal(fp) || stored == seal(legacy)
	case strings.HasPrefix(stored, fingerprintPrefix):
		return stored == fp
	}
	return stored == legacy
}

// sealedPrefix marks a fingerprint the journal keyed (pending.Journal.Seal).
const sealedPrefix = "h1:"

// differingFields names the top-level fields whose values differ.
func differingFields(a, b map[string]any) []string {
	var out []string
	seen := map[string]bool{}
	for k := range a {
		seen[k] = true
	}
	for k := range b {
		seen[k] = true
	}
	for k := range seen {
		x, _ := json.Marshal(a[k])
		y, _ := json.Marshal(b[k])
		_, inA := a[k]
		_, inB := b[k]
		if inA != inB || string(x) != string(y) {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// legacyFingerprint is the fingerprint as mcp-confirm wrote it before the
// canonical form (SHA-256 of encoding/json's output): the resend hold also
// matches calls a journal recorded before the upgrade.
func legacyFingerprint(args map[string]any, keyArg string) string {
	clean := make(map[string]any, len(args))
	for k, v := range args {
		if k != keyArg {
			clean[k] = v
		}
	}
	b, _ := json.Marshal(clean)
	return legacyFingerprintOf(b)
}

// legacyFingerprintOf is legacyFingerprint of arguments already encoded
// as it encodes them (json.Marshal, without the key argument): redact's
// stored form when the tool redacts nothing, which a write has encoded
// already.
func legacyFingerprintOf(encoded []byte) string {
	sum := sha256.Sum256(encoded)
	return hex.EncodeToString(sum[:])
}

// StoredFingerprints are the fingerprints a journaled call's stored
// arguments could have been made of, unsealed: both forms, with no key
// argument and with each top-level argument that holds the call's key
// (which one the tool declared is not stored). pending.Copy seals each
// under the source's secret to find the one the call was recorded with.
// A call whose arguments were redacted matches none of them.
func StoredFingerprints(c pending.Call) []string {
	args, err := decodeObject(c.Args)
	if err != nil {
		return nil
	}
	keyArgs := []string{""}
	for name, v := range args {
		if s, ok := v.(string); ok && s == c.Key {
			keyArgs = append(keyArgs, name)
		}
	}
	var out []string
	for _, k := range keyArgs {
		out = append(out, Fingerprint(args, k), legacyFingerprint(args, k))
	}
	return out
}
