package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
)

func TestRefuseAnswersTheFirstRequest(t *testing.T) {
	in := strings.NewReader(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{}}` + "\n" +
		"not json\n" +
		`{"jsonrpc":"2.0","id":"init-1","method":"initialize","params":{}}` + "\n" +
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}` + "\n")
	var out bytes.Buffer
	if err := Refuse(context.Background(), in, &out, "mcp-confirm proxy: cannot open the journal:\n/x/j.db is not a journal"); err != nil {
		t.Fatal(err)
	}
	var got struct {
		ID    string `json:"id"`
		Error struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(out.Bytes(), &got); err != nil || strings.Count(out.String(), "\n") != 1 {
		t.Fatalf("answer %q: %v", out.String(), err)
	}
	want := "mcp-confirm proxy: cannot open the journal: /x/j.db is not a journal"
	if got.ID != "init-1" || got.Error.Code != -32603 || got.Error.Message != want {
		t.Fatalf("got %+v, want id init-1, code -32603, message %q", got, want)
	}
}

func TestRefuseWithoutARequest(t *testing.T) {
	var out bytes.Buffer
	if err := Refuse(context.Background(), strings.NewReader(`{"jsonrpc":"2.0","method":"x"}`+"\n"), &out, "r"); err == nil || out.Len() != 0 {
		t.Fatalf("no request: err %v, wrote %q", err, out.String())
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	pr, pw := io.Pipe()
	defer pw.Close()
	if err := Refuse(ctx, pr, &out, "r"); err != context.Canceled || out.Len() != 0 {
		t.Fatalf("cancelled: err %v, wrote %q", err, out.String())
	}
}
