package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// maxToolPages bounds tools/list paging against a server whose cursors
// never end.
const maxToolPages = 1000

// rawTools lists the downstream's tools as the server wrote them, all pages.
func (p *Proxy) rawTools(ctx context.Context) ([]json.RawMessage, error) {
	var all []json.RawMessage
	var cursor string
	for page := 0; page < maxToolPages; page++ {
		params := json.RawMessage(`{}`)
		if cursor != "" {
			params, _ = json.Marshal(map[string]string{"cursor": cursor})
		}
		res, err := p.client.Request(ctx, string(mcp.MethodToolsList), params)
		if err != nil {
			return nil, fmt.Errorf("list the MCP server's tools: %w", err)
		}
		var r struct {
			Tools      []json.RawMessage `json:"tools"`
			NextCursor string            `json:"nextCursor"`
		}
		if err := json.Unmarshal(res, &r); err != nil {
			return nil, fmt.Errorf("list the MCP server's tools: unreadable answer: %w", err)
		}
		all = append(all, r.Tools...)
		if r.NextCursor == "" || r.NextCursor == cursor {
			return all, nil
		}
		cursor = r.NextCursor
	}
	return nil, fmt.Errorf("list the MCP server's tools: more than %d pages", maxToolPages)
}

// toolSet is the downstream's tools as registered on the proxy's mcp-go
// server, which lists them to the host.
//
// Invariant: served names exactly the tools last given to srv.SetTools,
// and sig is the listing they were made from; both change together, under
// mu, which is held across a whole refresh so that two listings never
// interleave their registrations.
type toolSet struct {
	srv atomic.Pointer[server.MCPServer] // set once, by start; nil: nothing to register on yet
	// served is read without the lock (toolCall): mcp-go's GetTool copies
	// the whole tool, schemas and all, on every call.
	served atomic.Pointer[map[string]bool]

	mu  sync.Mutex // guards following
	sig string     // the listing last registered (raw JSON)
}

// serves: name is one of the tools registered.
func (ts *toolSet) serves(name string) bool {
	served := ts.served.Load()
	return served != nil && (*served)[name]
}

// refreshTools registers the downstream's tools on the proxy's server when
// they differ from the ones registered; mcp-go then sends the host
// notifications/tools/list_changed. Each new listing is checked against
// the policy (so at start, and after a restart that changed the tools).
func (p *Proxy) refreshTools(ctx context.Context) error {
	return p.tools.refresh(ctx, p.rawTools, p.log, p.checkPolicy)
}

// checkPolicy says on the log which parts of the policy will not apply to
// the tools served (guard.Policy.Check): a section for a tool the server
// does not list, whose redact, kind and query would otherwise be silently
// unused; a query_tool that is missing or is a write; a key_arg the tool
// does not take. A tool left out as unservable counts as not listed: the
// host cannot call it through the proxy either.
func (p *Proxy) checkPolicy(tools []mcp.Tool) {
	for _, pp := range p.opts.Policy.Check(tools) {
		attrs := []any{"section", pp.Section, "problem", pp.Problem}
		if pp.Nearest != "" {
			attrs = append(attrs, "did_you_mean", pp.Nearest)
		}
		p.log.Warn("policy: a part of it does not apply to the server's tools", attrs...)
	}
}

// refresh registers the tools list gives, when they differ from the ones
// registered, and then gives them to changed (nil: nothing to tell).
func (ts *toolSet) refresh(ctx context.Context, list func(context.Context) ([]json.RawMessage, error), log *slog.Logger, changed func([]mcp.Tool)) error {
	srv := ts.srv.Load()
	if srv == nil {
		return nil
	}
	ts.mu.Lock()
	defer ts.mu.Unlock()
	raws, err := list(ctx)
	if err != nil {
		return err
	}
	sig, _ := json.Marshal(raws)
	if string(sig) == ts.sig {
		return nil
	}
	var tools []server.ServerTool
	var listed []mcp.Tool
	served := map[string]bool{}
	for _, raw := range raws {
		t, err := toolFromRaw(raw)
		if err != nil {
			log.Warn("tool left out: the MCP server described it in a way mcp-go cannot serve", "err", err)
			continue
		}
		tools = append(tools, server.ServerTool{Tool: t, Handler: unreachable})
		listed = append(listed, t)
		served[t.Name] = true
	}
	srv.SetTools(tools...)
	ts.served.Store(&served)
	ts.sig = string(sig)
	log.Info("tools registered", "count", len(tools))
	if changed != nil {
		changed(listed)
	}
	return nil
}

// toolFromRaw keeps what the server wrote: the input and output schemas
// are registered raw (mcp-go's structured schema type would drop keys such
// as $schema), and the annotations exactly as given, absent hints absent.
func toolFromRaw(raw json.RawMessage) (mcp.Tool, error) {
	var w struct {
		Meta         *mcp.Meta           `json:"_meta"`
		Name         string              `json:"name"`
		Title        string              `json:"title"`
		Description  string              `json:"description"`
		InputSchema  json.RawMessage     `json:"inputSchema"`
		OutputSchema json.RawMessage     `json:"outputSchema"`
		Annotations  *mcp.ToolAnnotation `json:"annotations"`
		Icons        []mcp.Icon          `json:"icons"`
		Execution    *mcp.ToolExecution  `json:"execution"`
		DeferLoading bool                `json:"defer_loading"`
	}
	if err := json.Unmarshal(raw, &w); err != nil {
		return mcp.Tool{}, fmt.Errorf("unreadable tool: %w", err)
	}
	if w.Name == "" {
		return mcp.Tool{}, fmt.Errorf("a tool without a name")
	}
	t := mcp.Tool{
		Meta: w.Meta, Name: w.Name, Title: w.Title, Description: w.Description,
		RawInputSchema: w.InputSchema, Icons: w.Icons, DeferLoading: w.DeferLoading,
	}
	if isNull(t.RawInputSchema) {
		t.RawInputSchema = json.RawMessage(`{"type":"object"}`)
	}
	if !isNull(w.OutputSchema) {
		t.RawOutputSchema = w.OutputSchema
	}
	if w.Annotations != nil {
		t.Annotations = *w.Annotations
	}
	// As written. The proxy declares no task capability, so a host calls
	// every tool synchronously, through the guard; a tool whose
	// taskSupport is "required" then fails on the server, as it would for
	// any host without tasks.
	t.Execution = w.Execution
	if err := mcp.ValidateParamHeaderAnnotations(&t); err != nil {
		return mcp.Tool{}, fmt.Errorf("tool %q: %w", w.Name, err)
	}
	return t, nil
}

func isNull(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || string(raw) == "null"
}
