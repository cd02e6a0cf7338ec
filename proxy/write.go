package proxy

import (
	"bytes"
	"encoding/json"
	"io"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mcp-confirm/mcp-confirm/mcpclient"
)

// Writing to the host: every message goes through one lineWriter, a
// whole line per Write, so that the proxy's own messages and mcp-go's
// never interleave.

// lineWriter serialises whole messages onto the host's stdout: mcp-go's
// responses and the proxy's own relayed ones.
type lineWriter struct {
	mu sync.Mutex // guards following: one whole line per Write
	w  io.Writer
}

func (l *lineWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// writeMessage writes one JSON-RPC message and a newline in one Write.
func (l *lineWriter) writeMessage(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = l.Write(append(b, '\n'))
	return err
}

type response struct {
	JSONRPC string              `json:"jsonrpc"`
	ID      json.RawMessage     `json:"id"`
	Result  json.RawMessage     `json:"result,omitempty"`
	Error   *mcpclient.RPCError `json:"error,omitempty"`
}

func (p *Proxy) write(v any) {
	if err := p.out.writeMessage(v); err != nil {
		p.log.Warn("write to the host", "err", err)
	}
}

// writeResult answers a request with a result as the server wrote it,
// without re-encoding it.
func (p *Proxy) writeResult(id, result json.RawMessage) {
	if bytes.ContainsAny(result, "\r\n") || !json.Valid(id) {
		p.write(response{JSONRPC: mcp.JSONRPC_VERSION, ID: id, Result: result})
		return
	}
	b := make([]byte, 0, len(result)+len(id)+40)
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = append(b, id...)
	b = append(b, `,"result":`...)
	b = append(b, result...)
	b = append(b, "}\n"...)
	if _, err := p.out.Write(b); err != nil {
		p.log.Warn("write to the host", "err", err)
	}
}
