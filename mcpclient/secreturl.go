package mcpclient

import (
	"crypto/sha256"
	"encoding/hex"
	"net/url"
	"regexp"
	"strings"
)

// Several hosted MCP servers take their key in the URL (?api_key=...,
// ?token=..., https://user:pass@host/...). Such a URL is still what a
// session connects to, but what is stored (the journal's server identity)
// or printed carries MaskURL's form, and URLSum tells two such URLs apart.

// URLMask stands for a masked value in MaskURL's form.
const URLMask = "***"

// MaskURL is raw with every query value, a userinfo's password (or a
// lone user name, which is often a token) and the fragment replaced by
// URLMask: which of them is a secret cannot be known, so all are. Keys,
// host and path stay, for a person to recognize the server. A URL with
// none of these is returned as it is.
func MaskURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		// Not a URL we could connect to; still, keep nothing past a '?',
		// '#' or '@' that could be a secret.
		if i := strings.IndexAny(raw, "?#@"); i >= 0 {
			return raw[:i] + URLMask
		}
		return raw
	}
	masked, user := false, ""
	if u.User != nil {
		// Written by hand: url.Userinfo would escape the mask.
		masked, user = true, URLMask+"@"
		if _, has := u.User.Password(); has {
			user = url.User(u.User.Username()).String() + ":" + URLMask + "@"
		}
		u.User = nil
	}
	if u.RawQuery != "" {
		pairs := strings.Split(u.RawQuery, "&")
		for i, p := range pairs {
			if k, v, ok := strings.Cut(p, "="); ok && v != "" {
				pairs[i], masked = k+"="+URLMask, true
			}
		}
		u.RawQuery = strings.Join(pairs, "&")
	}
	if u.Fragment != "" {
		u.Fragment, u.RawFragment, masked = URLMask, "", true
	}
	if !masked {
		return raw
	}
	out := u.String()
	if prefix := u.Scheme + "://"; user != "" && strings.HasPrefix(out, prefix) {
		out = prefix + user + out[len(prefix):]
	}
	return out
}

// URLHasSecrets: raw holds something MaskURL masks.
func URLHasSecrets(raw string) bool { return MaskURL(raw) != raw }

// URLSum is a fingerprint of the whole URL, its secrets included, kept
// beside the masked URL so that two URLs that differ only in a key are
// still two servers: "sha256:" and 32 hex digits. "" for a URL with
// nothing to mask (the URL itself tells it apart).
func URLSum(raw string) string {
	if !URLHasSecrets(raw) {
		return ""
	}
	sum := sha256.Sum256([]byte(raw))
	return "sha256:" + hex.EncodeToString(sum[:16])
}

// MaskURLsIn is s with every http:// or https:// URL in it masked
// (MaskURL): an error from the HTTP stack quotes the URL it was given, and
// such text is printed and journaled.
func MaskURLsIn(s string) string {
	if !strings.Contains(s, "://") {
		return s
	}
	return urlInText.ReplaceAllStringFunc(s, MaskURL)
}

// urlInText is a URL as error text quotes it: up to a space, a quote or
// an angle bracket.
var urlInText = regexp.MustCompile(`(?i)https?://[^\s"'<>]+`)
