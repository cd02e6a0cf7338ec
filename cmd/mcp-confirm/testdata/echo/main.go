// Command echo is an MCP server over stdio for the redaction tests: it
// says back whatever it is given, as a careless payment server does, so
// that a redacted value reaches every place a server's words are stored.
//
//   - pay (a write) answers with its arguments, in text and in structured
//     content; with "mode":"error" it answers a JSON-RPC error whose message
//     holds them; with "mode":"silent" it never answers (the call is unknown).
//   - find_payment (a read) lists every pay it was given (kept in the file
//     named by its first command-line argument), arguments and all.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"strings"
)

func main() {
	store := os.Args[1]
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<20)
	for in.Scan() {
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Name            string          `json:"name"`
				ProtocolVersion string          `json:"protocolVersion"`
				Arguments       json.RawMessage `json:"arguments"`
			} `json:"params"`
		}
		if json.Unmarshal(in.Bytes(), &req) != nil || len(req.ID) == 0 {
			continue // a notification, or not JSON
		}
		var result string
		switch req.Method {
		case "initialize":
			v := req.Params.ProtocolVersion
			if v == "" {
				v = "2025-06-18"
			}
			result = fmt.Sprintf(`{"protocolVersion":%q,"capabilities":{"tools":{}},"serverInfo":{"name":"echo","version":"1.0"}}`, v)
		case "tools/list":
			result = `{"tools":[` +
				`{"name":"pay","description":"Pays.","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":false,"destructiveHint":true}},` +
				`{"name":"find_payment","description":"Finds payments.","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":true}}]}`
		case "tools/call":
			args := string(req.Params.Arguments)
			switch {
			case req.Params.Name == "find_payment":
				b, _ := os.ReadFile(store)
				lines := strings.Split(strings.TrimSpace(string(b)), "\n")
				text, _ := json.Marshal("payments: " + strings.Join(lines, " "))
				result = fmt.Sprintf(`{"content":[{"type":"text","text":%s}],"structuredContent":{"payments":[%s]}}`,
					text, strings.Join(lines, ","))
			case strings.Contains(args, `"mode":"error"`):
				msg, _ := json.Marshal("cannot charge " + args)
				fmt.Printf(`{"jsonrpc":"2.0","id":%s,"error":{"code":-32000,"message":%s,"data":%s}}`+"\n", req.ID, msg, args)
				continue
			default:
				f, err := os.OpenFile(store, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
				if err == nil {
					fmt.Fprintln(f, args)
					f.Close()
				}
				if strings.Contains(args, `"mode":"silent"`) {
					continue
				}
				text, _ := json.Marshal("charged " + args)
				result = fmt.Sprintf(`{"content":[{"type":"text","text":%s}],"structuredContent":{"charged":%s}}`, text, args)
			}
		case "ping":
			result = `{}`
		default:
			fmt.Printf(`{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"no method"}}`+"\n", req.ID)
			continue
		}
		fmt.Printf(`{"jsonrpc":"2.0","id":%s,"result":%s}`+"\n", req.ID, result)
	}
}
