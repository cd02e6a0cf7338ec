package mcpclient

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"

	"github.com/mark3labs/mcp-go/mcp"
)

// discoverCheck sits in front of the tap and judges the answer to
// mcp-go's server/discover probe. mcp-go takes any result for a
// 2026-07-28 server, and a 2025 server that answers every method it does
// not know with an empty result (as the MCP conformance suite's sse-retry
// server does) is then spoken to without a session, where streams are not
// resumed and a write whose stream the server ends to be polled (SEP-1699)
// is lost. A discover result that offers no 2026-07-28-or-later version is
// no such server: it is handed to mcp-go as the error a server that does
// not know the method gives, and mcp-go falls back to initialize.
type discoverCheck struct{ next http.RoundTripper }

// maxDiscover bounds the discover answer read here.
const maxDiscover = 1 << 20

func (d discoverCheck) RoundTrip(req *http.Request) (*http.Response, error) {
	id, ok := discoverID(req)
	if !ok {
		return d.next.RoundTrip(req)
	}
	resp, err := d.next.RoundTrip(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		return resp, err
	}
	if media, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); media != "application/json" {
		return resp, nil
	}
	body, rerr := io.ReadAll(io.LimitReader(resp.Body, maxDiscover+1))
	resp.Body.Close()
	if rerr == nil && len(body) <= maxDiscover && noModernVersion(body) {
		body = fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"error":{"code":%d,"message":"server/discover offers no 2026-07-28 protocol version"}}`,
			id, mcp.METHOD_NOT_FOUND)
		resp.Header.Del("Content-Length")
		resp.ContentLength = int64(len(body))
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	return resp, nil
}

// discoverID is the JSON-RPC id of a server/discover request.
func discoverID(req *http.Request) (json.RawMessage, bool) {
	if req.Method != http.MethodPost || req.Body == nil || req.GetBody == nil {
		return nil, false
	}
	body, err := req.GetBody()
	if err != nil {
		return nil, false
	}
	defer body.Close()
	var head struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	if json.NewDecoder(body).Decode(&head) != nil || head.Method != string(mcp.MethodServerDiscover) || len(head.ID) == 0 {
		return nil, false
	}
	return head.ID, true
}

// noModernVersion: body is a result (not an error) whose supportedVersions
// names no version of the stateless era.
func noModernVersion(body []byte) bool {
	var m struct {
		Result *struct {
			SupportedVersions []string `json:"supportedVersions"`
		} `json:"result"`
	}
	if json.Unmarshal(body, &m) != nil || m.Result == nil {
		return false
	}
	for _, v := range m.Result.SupportedVersions {
		if mcp.IsModernProtocol(v) {
			return false
		}
	}
	return true
}
