package idempotency

import (
	"fmt"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// refusal is an isError answer the middleware makes itself (never stored).
// structuredContent {"idempotency": kind, ...extra} lets a client branch on
// kind without parsing the text.
func refusal(kind, text string, extra map[string]any) *mcp.CallToolResult {
	sc := map[string]any{"idempotency": kind}
	for k, v := range extra {
		sc[k] = v
	}
	res := mcp.NewToolResultError(text)
	res.StructuredContent = sc
	return res
}

// inProgress is the SPEC §3 in-progress signal. With an expired lease the
// kind stays "in_progress" (clients treat both as unknown) and lease_expired
// and the text say that the first execution may have died.
func inProgress(p Record, leaseExpired bool) *mcp.CallToolResult {
	extra := map[string]any{"key": p.Key, "since": p.CreatedAt.UTC().Format(time.RFC3339)}
	text := fmt.Sprintf("idempotency key %q: the first call with this key is still in progress (started %s); resend later with the same key to get its result",
		p.Key, p.CreatedAt.UTC().Format(time.RFC3339))
	if leaseExpired {
		extra["lease_expired"] = true
		text = fmt.Sprintf("idempotency key %q: the first call with this key is in progress or its outcome is unknown: it started %s and its lease expired %s, so the server running it may have stopped. "+
			"It will not be run again automatically; check with a read whether it took effect before deciding",
			p.Key, p.CreatedAt.UTC().Format(time.RFC3339), p.LeaseUntil.UTC().Format(time.RFC3339))
	}
	return refusal("in_progress", text, extra)
}

func keyReused(key string, fields []string) *mcp.CallToolResult {
	return refusal("key_reused", fmt.Sprintf("idempotency key %q was first used with different arguments (differing: %s); nothing was executed. Use a new key for a new operation",
		key, strings.Join(fields, ", ")), map[string]any{"key": key, "fields": fields})
}

// decorate sets this package's _meta on a copy of res (handlers may return
// shared results). shouldRetry nil means unknown: the key is left out.
func decorate(res *mcp.CallToolResult, replayed bool, shouldRetry *bool) *mcp.CallToolResult {
	cp := *res
	meta := &mcp.Meta{}
	if res.Meta != nil {
		meta.ProgressToken = res.Meta.ProgressToken
		for k, v := range res.Meta.AdditionalFields {
			meta.SetMetaField(k, v)
		}
	}
	if replayed {
		meta.SetMetaField(MetaReplayed, true)
	}
	if shouldRetry != nil {
		meta.SetMetaField(MetaShouldRetry, *shouldRetry)
	}
	if meta.ProgressToken != nil || len(meta.AdditionalFields) > 0 {
		cp.Meta = meta
	}
	return &cp
}
