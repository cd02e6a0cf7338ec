package proxy

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/mcp-confirm/mcp-confirm/guard"
)

// A host gives up on a tools/call after a time of its own, and then the
// model sees a bare timeout and may ask again. The proxy must answer a
// write it cannot settle (unknown, "do not retry") before that: late enough
// that a slow write is not reported unknown for nothing, early enough that
// the host still hears it. So the write clock is fitted to the host, which
// names itself in initialize (clientInfo.name; the 2026-07-28 form in each
// request's _meta).

// KnownHost is a host whose own deadline for a tools/call is known.
type KnownHost struct {
	Name    string   // as its users call it
	Clients []string // the clientInfo.name values it sends, compared without case
	// Deadline is how long it waits for a tools/call answer; 0: no limit.
	Deadline time.Duration
	Source   string // where the deadline was read
}

// HostsChecked is the day the table below was checked against its sources.
const HostsChecked = "2026-12-06"

// KnownHosts is the table of hosts and their deadlines (README: "Deadlines
// that fit the host" carries it with the sources).
var KnownHosts = []KnownHost{
	{Name: "Claude Desktop", Clients: []string{"claude-ai"}, Deadline: 4 * time.Minute,
		Source: "the issue's figure (about 4 minutes); name and limit not checked against a source"},
	{Name: "Claude Code", Clients: []string{"claude-code"}, Deadline: 0,
		Source: "the issue's figure (no limit on stdio unless MCP_TOOL_TIMEOUT); name not checked"},
	{Name: "goose", Clients: []string{"goose"}, Deadline: 300 * time.Second,
		Source: "the issue's figure (300 s); name not checked"},
	{Name: "Gemini CLI", Clients: []string{"gemini-cli-mcp-client"}, Deadline: 600 * time.Second,
		Source: "gemini-cli@5411f113 packages/core/src/tools/mcp-client.ts: name, MCP_DEFAULT_TIMEOUT_MSEC = 10 min"},
	{Name: "Codex", Clients: []string{"codex-mcp-client"}, Deadline: 60 * time.Second,
		Source: "60 s as the issue gives for Codex; name not checked"},
	{Name: "Cline", Clients: []string{"cline"}, Deadline: 60 * time.Second,
		Source: "60 s as the issue gives for Cline; name not checked"},
	{Name: "VS Code", Clients: []string{"visual studio code"}, Deadline: 60 * time.Second,
		Source: "typescript-sdk@3924de99 protocol.ts DEFAULT_REQUEST_TIMEOUT_MSEC = 60_000; name not checked"},
	{Name: "Cursor", Clients: []string{"cursor-vscode"}, Deadline: 60 * time.Second,
		Source: "typescript-sdk@3924de99 protocol.ts DEFAULT_REQUEST_TIMEOUT_MSEC = 60_000; name not checked"},
}

// The clocks for a host: the write clock at 80 % of its deadline, the
// absolute clock (progress does not move it) at 90 % (see share).
// A host with no limit gets noLimitWrite and guard.DefaultMaxTotal. A host
// the table does not know keeps DefaultTimeout and DefaultMaxTotal, which
// assume the TypeScript SDK's 60 s, the most common limit.
const (
	writeShare   = 80 // percent of the host's deadline
	totalShare   = 90
	noLimitWrite = 5 * time.Minute
)

// hostClock is the clock the proxy applies, and why.
type hostClock struct {
	Host     string        // the table's name, or "" when not recognised
	Client   string        // clientInfo.name as the host sent it
	Deadline time.Duration // the host's; meaningless when Limit is false
	Limit    bool          // the host has a deadline (known or given)
	From     string        // what set the deadline: the table, --host-timeout, the policy
	Write    time.Duration
	Total    time.Duration
}

// lookupHost finds a host in the table by its clientInfo.name.
func lookupHost(client string) (KnownHost, bool) {
	c := strings.ToLower(strings.TrimSpace(client))
	for _, h := range KnownHosts {
		for _, n := range h.Clients {
			if c == n {
				return h, true
			}
		}
	}
	return KnownHost{}, false
}

// clockFor chooses the clock for the host named client. given is
// --host-timeout, else the policy's host_timeout (0: neither): a deadline
// the operator gave wins over the table.
func clockFor(client string, given time.Duration, givenFrom string) hostClock {
	hc := hostClock{Client: client}
	h, known := lookupHost(client)
	if known {
		hc.Host = h.Name
	}
	switch {
	case given > 0:
		hc.Deadline, hc.Limit, hc.From = given, true, givenFrom
	case known:
		hc.Deadline, hc.Limit, hc.From = h.Deadline, h.Deadline > 0, "the table of known hosts ("+HostsChecked+")"
	default:
		hc.Write, hc.Total, hc.Limit, hc.From = DefaultTimeout, DefaultMaxTotal, true, "not a known host: the usual 60 s assumed"
		hc.Deadline = 60 * time.Second
		return hc
	}
	if !hc.Limit {
		hc.Write, hc.Total = noLimitWrite, guard.DefaultMaxTotal
		return hc
	}
	hc.Write = share(hc.Deadline, writeShare)
	hc.Total = share(hc.Deadline, totalShare)
	return hc
}

// share is pct percent of d: in whole seconds from 10 s on, so that the
// log reads "3m12s", else in milliseconds.
func share(d time.Duration, pct int64) time.Duration {
	v := d * time.Duration(pct) / 100
	if d >= 10*time.Second {
		return v.Truncate(time.Second)
	}
	return max(v.Truncate(time.Millisecond), time.Millisecond)
}

// clientName is the host's name from its first line: initialize's
// params.clientInfo.name, or the 2026-07-28 _meta key on any request.
func clientName(line []byte) string {
	var m struct {
		Params struct {
			ClientInfo struct {
				Name string `json:"name"`
			} `json:"clientInfo"`
			Meta struct {
				ClientInfo struct {
					Name string `json:"name"`
				} `json:"io.modelcontextprotocol/clientInfo"`
			} `json:"_meta"`
		} `json:"params"`
	}
	if json.Unmarshal(line, &m) != nil {
		return ""
	}
	if n := m.Params.ClientInfo.Name; n != "" {
		return n
	}
	return m.Params.Meta.ClientInfo.Name
}

// hostFit makes the proxy's guard once, when the host has named itself or
// the first call comes, whichever is first: its clocks are fixed from then
// on (a second initialize changes nothing).
type hostFit struct {
	once  sync.Once
	clock hostClock
}

// HostTable is the table of known hosts as the README carries it (between
// its hosts:begin and hosts:end markers; a test keeps the two the same).
func HostTable() string {
	var b strings.Builder
	b.WriteString("| host | `clientInfo.name` | its deadline | write clock | absolute clock | source |\n")
	b.WriteString("| --- | --- | --- | --- | --- | --- |\n")
	row := func(host, names, deadline string, hc hostClock, source string) {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", host, names, deadline, hc.Write, hc.Total, source)
	}
	for _, h := range KnownHosts {
		names := make([]string, len(h.Clients))
		for i, n := range h.Clients {
			names[i] = "`" + n + "`"
		}
		deadline := "none"
		if h.Deadline > 0 {
			deadline = h.Deadline.String()
		}
		row(h.Name, strings.Join(names, ", "), deadline, clockFor(h.Clients[0], 0, ""), h.Source)
	}
	row("any other", "", "60 s assumed", clockFor("", 0, ""), "typescript-sdk@3924de99: DEFAULT_REQUEST_TIMEOUT_MSEC = 60_000, which most hosts keep")
	fmt.Fprintf(&b, "\nChecked %s.\n", HostsChecked)
	return b.String()
}
