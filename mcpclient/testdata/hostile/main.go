// Command hostile is an MCP server over stdio that misbehaves in one way,
// chosen by its first argument, for the tests of what a hostile server
// cannot do to mcp-confirm:
//
//	stall-stdin   answers the handshake and tools/list, then stops reading
//	              its stdin while staying alive
//	silent-list   answers the handshake, never tools/list
//	endless       answers tools/call with a line that never ends
//	over N        answers tools/call with one line of about N bytes that ends
//
// It speaks raw JSON-RPC (no SDK), so that it can break the rules.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

const tools = `{"tools":[{"name":"put","description":"Stores a thing.",` +
	`"inputSchema":{"type":"object","properties":{"data":{"type":"string"},"idempotency_key":{"type":"string"}}},` +
	`"annotations":{"readOnlyHint":false,"destructiveHint":true,"idempotentHint":false}}]}`

func main() {
	mode := ""
	if len(os.Args) > 1 {
		mode = os.Args[1]
	}
	out := bufio.NewWriterSize(os.Stdout, 1<<20)
	reply := func(id json.RawMessage, result string) {
		fmt.Fprintf(out, `{"jsonrpc":"2.0","id":%s,"result":%s}`+"\n", id, result)
		out.Flush()
	}
	in := bufio.NewReaderSize(os.Stdin, 1<<20)
	for {
		line, err := in.ReadBytes('\n')
		if err != nil {
			return
		}
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if json.Unmarshal(line, &m) != nil || len(m.ID) == 0 {
			continue // a notification
		}
		switch m.Method {
		case "initialize":
			reply(m.ID, `{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"hostile","version":"1"}}`)
		case "tools/list":
			if mode == "silent-list" {
				fmt.Fprintln(os.Stderr, "hostile: not answering tools/list")
				continue
			}
			reply(m.ID, tools)
			if mode == "stall-stdin" {
				fmt.Fprintln(os.Stderr, "hostile: no longer reading stdin")
				for {
					time.Sleep(time.Hour)
				}
			}
		case "tools/call":
			switch mode {
			case "endless":
				fmt.Fprintf(out, `{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"`, m.ID)
				chunk := strings.Repeat("a", 1<<16)
				for {
					if _, err := out.WriteString(chunk); err != nil {
						return
					}
				}
			case "over":
				n, _ := strconv.Atoi(os.Args[2])
				fmt.Fprintf(out, `{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"`, m.ID)
				chunk := strings.Repeat("a", 1<<16)
				for n > 0 {
					k := min(n, len(chunk))
					out.WriteString(chunk[:k])
					n -= k
				}
				out.WriteString(`"}]}}` + "\n")
				out.Flush()
			default:
				reply(m.ID, `{"content":[{"type":"text","text":"stored"}]}`)
			}
		default:
			fmt.Fprintf(out, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"method not found"}}`+"\n", m.ID)
			out.Flush()
		}
	}
}
