package demo_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcp-confirm/mcp-confirm/demo"
)

// rawDemo is a demo-server process spoken to line by line, with no MCP
// client in between: the tests see the exact lines the server writes.
type rawDemo struct {
	t     *testing.T
	cmd   *exec.Cmd
	in    io.WriteCloser
	lines chan string
}

func startRaw(t *testing.T, flags ...string) *rawDemo {
	t.Helper()
	db := filepath.Join(t.TempDir(), "demo.db")
	d := &rawDemo{t: t, cmd: exec.Command(bin, append([]string{"demo-server", "--db", db}, flags...)...), lines: make(chan string, 64)}
	var err error
	if d.in, err = d.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	out, err := d.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			d.lines <- sc.Text()
		}
		close(d.lines)
	}()
	t.Cleanup(func() {
		d.in.Close()
		done := make(chan struct{})
		go func() { d.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			d.cmd.Process.Kill()
			<-done
		}
	})
	d.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`)
	d.next()
	d.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return d
}

func (d *rawDemo) send(line string) {
	d.t.Helper()
	if _, err := io.WriteString(d.in, line+"\n"); err != nil {
		d.t.Fatal(err)
	}
}

// next is the next line the server writes.
func (d *rawDemo) next() string {
	d.t.Helper()
	select {
	case l, ok := <-d.lines:
		if !ok {
			d.t.Fatal("the server closed its stdout")
		}
		return l
	case <-time.After(10 * time.Second):
		d.t.Fatal("no line from the server in 10s")
	}
	return ""
}

// quiet checks that the server writes nothing more for a moment.
func (d *rawDemo) quiet() {
	d.t.Helper()
	select {
	case l := <-d.lines:
		d.t.Fatalf("unexpected line: %s", l)
	case <-time.After(200 * time.Millisecond):
	}
}

func createOrder(id, key string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":"create_order","arguments":{"item":"widget","quantity":1,"buyer":"alice"},"_meta":{"io.github.mcp-confirm/idempotency-key":%q}}}`, id, key)
}

type rawResp struct {
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result"`
}

func parseResp(t *testing.T, line string) rawResp {
	t.Helper()
	var r rawResp
	if err := json.Unmarshal([]byte(line), &r); err != nil {
		t.Fatalf("%v: %s", err, line)
	}
	return r
}

// --unusable-answer N: the first N create_order answers are lines that are
// no usable tool result, each with the request's id; the order is committed
// all the same; later answers and other tools are untouched.
func TestUnusableAnswer(t *testing.T) {
	for seed := uint64(1); seed <= 12; seed++ {
		kind := demo.UnusableAnswerKind(seed, 1)
		t.Run(fmt.Sprintf("seed%d_%s", seed, kind), func(t *testing.T) {
			d := startRaw(t, "--unusable-answer", "1", "--seed", fmt.Sprint(seed))
			d.send(createOrder(`"a-7"`, "KEY-UNUSABLE-1"))
			line := d.next()
			if !strings.HasPrefix(line, `{"jsonrpc":"2.0","id":"a-7",`) {
				t.Fatalf("the unusable answer should keep the id first: %s", line)
			}
			switch kind {
			case demo.UnusableInvalidJSON:
				if json.Valid([]byte(line)) {
					t.Fatalf("want a line that is not valid JSON: %s", line)
				}
			default:
				r := parseResp(t, line)
				want := map[string]string{demo.UnusableNull: `null`, demo.UnusableString: `"a string"`}[kind]
				if want != "" && string(r.Result) != want {
					t.Fatalf("kind %s: result %s", kind, r.Result)
				}
				var m map[string]json.RawMessage
				_ = json.Unmarshal(r.Result, &m)
				if kind == demo.UnusableIsErrorString && string(m["isError"]) != `"yes"` ||
					kind == demo.UnusableInputRequired && string(m["resultType"]) != `"input_required"` {
					t.Fatalf("kind %s: result %s", kind, r.Result)
				}
			}
			d.quiet()
			// The second create_order (another key) is answered normally.
			d.send(createOrder(`8`, "KEY-UNUSABLE-2"))
			r := parseResp(t, d.next())
			if string(r.ID) != "8" || !strings.Contains(string(r.Result), `"order_id":2`) {
				t.Fatalf("second answer: %+v", r)
			}
			// The first was committed: its key replays order 1.
			d.send(createOrder(`9`, "KEY-UNUSABLE-1"))
			r = parseResp(t, d.next())
			if string(r.ID) != "9" || !strings.Contains(string(r.Result), `"order_id":1`) {
				t.Fatalf("replay: %s", r.Result)
			}
		})
	}
}

// --answer-twice N: the first N create_order answers come twice; the copy
// differs (another order_id) for an odd order id, else it is the same line.
func TestAnswerTwice(t *testing.T) {
	d := startRaw(t, "--answer-twice", "2")
	for n, want := range []bool{true, false} { // order 1 odd: differs; order 2: identical
		d.send(createOrder(fmt.Sprint(10+n), fmt.Sprintf("KEY-TWICE-%d", n)))
		first, second := d.next(), d.next()
		r1, r2 := parseResp(t, first), parseResp(t, second)
		if string(r1.ID) != fmt.Sprint(10+n) || string(r2.ID) != string(r1.ID) {
			t.Fatalf("ids %s %s", r1.ID, r2.ID)
		}
		if !strings.Contains(string(r1.Result), fmt.Sprintf(`"order_id":%d`, n+1)) {
			t.Fatalf("first answer: %s", first)
		}
		if differs := first != second; differs != want || demo.SecondAnswerDiffers(int64(n+1)) != want {
			t.Fatalf("order %d: second copy differs %v, want %v:\n%s\n%s", n+1, differs, want, first, second)
		}
		if want && !strings.Contains(second, `"order_id":1000001`) {
			t.Fatalf("the differing copy should carry another order id: %s", second)
		}
	}
	d.send(createOrder(`12`, "KEY-TWICE-3"))
	d.next()
	d.quiet() // the third answer is written once
}
