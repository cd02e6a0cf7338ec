package guard

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/mcp-confirm/mcp-confirm/mcpclient"
)

// ServerIdentity is how a call's server was reached, stored with the call
// (SPEC §9), so that query and retry go to that server and no other: the
// command and its arguments, or a host config file and a server name in it,
// or the built-in demo server and the orders file it keeps. A declared name
// alone is not an identity: two servers may both call themselves
// "mcp-confirm-demo" and keep different orders.
type ServerIdentity struct {
	Command string   `json:"command,omitempty"`
	Args    []string `json:"args,omitempty"`
	Dir     string   `json:"dir,omitempty"` // the folder the command was started in
	// URL is a remote server's endpoint, masked (mcpclient.MaskURL: its
	// query values and userinfo may be keys); headers are not kept: they
	// hold tokens. URLSum fingerprints the whole URL when it was masked, so
	// that two keys are two servers. RemoteIdentity fills both.
	URL     string `json:"url,omitempty"`
	URLSum  string `json:"url_sum,omitempty"`
	Config  string `json:"config,omitempty"` // absolute path of the host config file
	Server  string `json:"server,omitempty"` // the server's name in Config
	Builtin string `json:"builtin,omitempty"`
	DemoDB  string `json:"demo_db,omitempty"` // the built-in demo server's orders file
}

// RemoteIdentity is the identity of the remote server at rawURL, as it is
// stored: its URL masked, and the whole URL's fingerprint when that hid
// something.
func RemoteIdentity(rawURL string) ServerIdentity {
	return ServerIdentity{URL: mcpclient.MaskURL(rawURL), URLSum: mcpclient.URLSum(rawURL)}
}

// masked is id with its URL masked, for a journal written before URLs
// were (its URL still holds the key): as RemoteIdentity would store it.
func (id ServerIdentity) masked() ServerIdentity {
	if id.URL != "" && id.URLSum == "" && mcpclient.URLHasSecrets(id.URL) {
		id.URL, id.URLSum = mcpclient.MaskURL(id.URL), mcpclient.URLSum(id.URL)
	}
	return id
}

// HidesURL: the stored URL was masked, so it cannot be connected to
// again; the operator must name it (--url) once more.
func (id ServerIdentity) HidesURL() bool { return id.URLSum != "" }

// MaskedIdentityJSON is a stored identity as it may be shown: a URL
// written unmasked by an older mcp-confirm is masked; anything else is
// returned as it is, byte for byte.
func MaskedIdentityJSON(raw json.RawMessage) json.RawMessage {
	var id ServerIdentity
	if len(raw) == 0 || json.Unmarshal(raw, &id) != nil || id.URL == "" || id.URLSum != "" || !mcpclient.URLHasSecrets(id.URL) {
		return raw
	}
	return id.masked().JSON()
}

// BuiltinDemo is ServerIdentity.Builtin for the built-in demo server.
const BuiltinDemo = "demo"

// IsZero: no identity (a call recorded before identities were kept, or a
// guard that was given none).
func (id ServerIdentity) IsZero() bool {
	return id.Command == "" && id.Config == "" && id.Builtin == "" && id.URL == ""
}

// Same reports whether two identities name the same server. The working
// folder is where to start the command again, not part of what it is.
func (id ServerIdentity) Same(o ServerIdentity) bool {
	switch {
	case id.Builtin != "" || o.Builtin != "":
		return id.Builtin == o.Builtin && id.DemoDB == o.DemoDB
	case id.Config != "" || o.Config != "":
		return id.Config == o.Config && id.Server == o.Server
	case id.URL != "" || o.URL != "":
		a, b := id.masked(), o.masked()
		return a.URL == b.URL && a.URLSum == b.URLSum
	}
	if id.Command != o.Command || len(id.Args) != len(o.Args) {
		return false
	}
	for i := range id.Args {
		if id.Args[i] != o.Args[i] {
			return false
		}
	}
	return true
}

// String is the identity as the console and show print it.
func (id ServerIdentity) String() string {
	switch {
	case id.Builtin != "":
		return "the built-in demo server (orders in " + id.DemoDB + ")"
	case id.Config != "":
		return fmt.Sprintf("server %q of %s", id.Server, id.Config)
	case id.URL != "":
		return id.masked().URL
	case id.Command != "":
		words := append([]string{id.Command}, id.Args...)
		for i, w := range words {
			if w == "" || strings.ContainsAny(w, " \t\n'\"\\$`") {
				words[i] = "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
			}
		}
		s := strings.Join(words, " ")
		if id.Dir != "" {
			s += " (in " + id.Dir + ")"
		}
		return s
	}
	return "an unrecorded server"
}

// JSON is the identity as the journal stores it; nil for the zero identity.
func (id ServerIdentity) JSON() json.RawMessage {
	if id.IsZero() {
		return nil
	}
	b, _ := json.Marshal(id) // strings only: it always encodes
	return b
}

// ParseServerIdentity reads a stored identity; ok is false for none or for
// one this build cannot read.
func ParseServerIdentity(raw json.RawMessage) (id ServerIdentity, ok bool) {
	if len(raw) == 0 || json.Unmarshal(raw, &id) != nil || id.IsZero() {
		return ServerIdentity{}, false
	}
	return id, true
}
