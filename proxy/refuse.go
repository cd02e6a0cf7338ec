package proxy

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
)

// maxRefusedLine bounds the line Refuse reads: it only needs the id of the
// host's first request.
const maxRefusedLine = 1 << 20

// Refuse is the proxy when it cannot serve at all (its journal will not
// open, its policy is wrong, no server was given): it answers the host's
// first request with an error that says why, so that the host shows the
// reason rather than an unexplained "server disconnected". Notifications
// before it are skipped. It returns when that answer is written, when in
// ends, or when ctx does (the caller bounds the wait).
func Refuse(ctx context.Context, in io.Reader, out io.Writer, reason string) error {
	ids := make(chan json.RawMessage, 1)
	errc := make(chan error, 1)
	go func() {
		id, err := firstRequestID(in)
		if err != nil {
			errc <- err
			return
		}
		ids <- id
	}()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case err := <-errc:
		return err
	case id := <-ids:
		answer := struct {
			JSONRPC string          `json:"jsonrpc"`
			ID      json.RawMessage `json:"id"`
			Error   rpcError        `json:"error"`
		}{mcp.JSONRPC_VERSION, id, rpcError{Code: mcp.INTERNAL_ERROR, Message: oneLine(reason)}}
		b, err := json.Marshal(answer)
		if err != nil {
			return err
		}
		_, err = out.Write(append(b, '\n'))
		return err
	}
}

type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// firstRequestID reads lines until one is a JSON-RPC request (a method and
// an id that is not null) and returns its id.
func firstRequestID(in io.Reader) (json.RawMessage, error) {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), maxRefusedLine)
	for sc.Scan() {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if json.Unmarshal(sc.Bytes(), &m) != nil || m.Method == "" || len(m.ID) == 0 || string(m.ID) == "null" {
			continue
		}
		return m.ID, nil
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return nil, errors.New("the host sent no request")
}

// oneLine keeps a reason to one line: a host shows it in a status line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
