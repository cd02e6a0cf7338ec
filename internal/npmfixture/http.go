package npmfixture

import (
	"context"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcp-confirm/mcp-confirm/internal/testbin"
)

// EverythingHTTP runs server-everything in its Streamable HTTP mode on a
// free loopback port for the rest of the test and returns its endpoint
// (http://127.0.0.1:PORT/mcp). It keeps an event store, so its SSE events
// carry ids, and opens a server of its own for each session.
func EverythingHTTP(t testing.TB) string {
	t.Helper()
	bin := Bin(t, "mcp-server-everything")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, "node", bin, "streamableHttp")
	cmd.Env = append(os.Environ(), "PORT="+port)
	var out testbin.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
	})
	for deadline := time.Now().Add(60 * time.Second); !strings.Contains(out.String(), "listening on port "+port); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("server-everything did not start on port %s:\n%s", port, out.String())
		}
	}
	return "http://127.0.0.1:" + port + "/mcp"
}
