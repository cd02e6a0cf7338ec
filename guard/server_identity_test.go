package guard

import (
	"encoding/json"
	"strings"
	"testing"
)

// A remote identity keeps the URL masked and a sum of the whole: two keys
// are two servers, and an identity an older version stored unmasked is
// the same server as the masked one of the same URL.
func TestRemoteIdentityMaskedAndTold(t *testing.T) {
	a := RemoteIdentity("https://h.example/mcp?api_key=one")
	b := RemoteIdentity("https://h.example/mcp?api_key=two")
	if strings.Contains(string(a.JSON()), "one") || a.URL != "https://h.example/mcp?api_key=***" || !a.HidesURL() {
		t.Fatalf("identity %s, want the URL masked with a sum", a.JSON())
	}
	if a.Same(b) || !a.Same(RemoteIdentity("https://h.example/mcp?api_key=one")) {
		t.Errorf("Same: a key must tell two servers apart, the same URL must not")
	}
	old := ServerIdentity{URL: "https://h.example/mcp?api_key=one"}
	if !old.Same(a) || !a.Same(old) || old.Same(b) {
		t.Errorf("an unmasked old identity is not compared as the masked one")
	}
	if s := old.String(); strings.Contains(s, "one") {
		t.Errorf("String() of an old identity shows the key: %s", s)
	}
	raw, _ := json.Marshal(old)
	if m := MaskedIdentityJSON(raw); strings.Contains(string(m), "one") {
		t.Errorf("MaskedIdentityJSON = %s", m)
	}
	plain := RemoteIdentity("https://h.example/mcp")
	if plain.HidesURL() || string(plain.JSON()) != `{"url":"https://h.example/mcp"}` {
		t.Errorf("a URL with nothing to mask is stored as it was: %s", plain.JSON())
	}
	cmd := json.RawMessage(`{"command":"srv","args":["--x"]}`)
	if got := MaskedIdentityJSON(cmd); string(got) != string(cmd) {
		t.Errorf("MaskedIdentityJSON changed a command identity: %s", got)
	}
}
