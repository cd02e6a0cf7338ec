package proxy_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The proxy as a host runs it, fed by hand: every line on its stdout is a
// JSON-RPC message, whatever happens (a lost response, a held resend, an
// unknown tool); its log and the server's stderr go to stderr, or to --log.
func TestStdoutCarriesOnlyProtocol(t *testing.T) {
	for _, useLog := range []bool{false, true} {
		name := "stderr"
		if useLog {
			name = "log-file"
		}
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			logFile := filepath.Join(dir, "proxy.log")
			args := []string{"proxy", "--db", filepath.Join(dir, "journal.db"), "--timeout", "1s"}
			if useLog {
				args = append(args, "--log", logFile)
			}
			args = append(args, "--", bin, "demo-server", "--db", filepath.Join(dir, "demo.db"), "--hang-after-commit", "1")
			cmd := exec.Command(bin, args...)
			stdin, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			lines := bufio.NewScanner(stdout)
			lines.Buffer(make([]byte, 1<<20), 1<<20)
			var out []string
			// send writes one message; when it is a request, it reads up to
			// and including its answer (notifications may come first).
			send := func(msg string, id int) {
				t.Helper()
				if _, err := io.WriteString(stdin, msg+"\n"); err != nil {
					t.Fatal(err)
				}
				for id != 0 && lines.Scan() {
					out = append(out, lines.Text())
					var m struct {
						ID *int `json:"id"`
					}
					if json.Unmarshal(lines.Bytes(), &m) == nil && m.ID != nil && *m.ID == id {
						return
					}
				}
			}
			order := `{"name":"create_order","arguments":{"item":"widget","quantity":1,"buyer":"bob"}}`
			send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"by-hand","version":"0"}}}`, 1)
			send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`, 0)
			send(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, 2)
			send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":`+order+`}`, 3)
			send(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":`+order+`}`, 4)
			send(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"no_such_tool","arguments":{}}}`, 5)
			send(`{"jsonrpc":"2.0","id":6,"method":"ping"}`, 6)
			_ = stdin.Close()
			rest, _ := io.ReadAll(stdout)
			if err := cmd.Wait(); err != nil {
				t.Fatalf("proxy exited: %v\nstderr:\n%s", err, stderr.String())
			}
			for _, l := range strings.Split(string(rest), "\n") {
				if strings.TrimSpace(l) != "" {
					out = append(out, l)
				}
			}
			for _, l := range out {
				var m struct {
					JSONRPC string `json:"jsonrpc"`
				}
				if json.Unmarshal([]byte(l), &m) != nil || m.JSONRPC != "2.0" {
					t.Errorf("stdout line is not JSON-RPC: %q", l)
				}
			}
			all := strings.Join(out, "\n")
			for _, want := range []string{`"mcp-confirm":"unknown"`, `"mcp-confirm":"held"`, `Unknown tool: no_such_tool`} {
				if !strings.Contains(all, want) {
					t.Errorf("stdout lacks %s:\n%s", want, all)
				}
			}
			logs := stderr.String()
			if useLog {
				b, err := os.ReadFile(logFile)
				if err != nil {
					t.Fatal(err)
				}
				if strings.TrimSpace(logs) != "" {
					t.Errorf("with --log, stderr should be empty, got:\n%s", logs)
				}
				logs = string(b)
			}
			for _, want := range []string{"MCP server started", "demo server ready", "state=unknown", "held"} {
				if !strings.Contains(logs, want) {
					t.Errorf("the log lacks %q:\n%s", want, logs)
				}
			}
		})
	}
}
