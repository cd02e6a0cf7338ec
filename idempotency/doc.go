// Package idempotency is server-side middleware for mcp-go tool handlers that
// makes a write tool safe to resend: a call that carries an idempotency key is
// executed at most once, and a repeat of it gets the stored result instead of
// a second execution.
//
// The key travels in the request's _meta under MetaKey, or in a tool argument
// named by Options.KeyArg. The middleware keeps one Record per key in a Store:
//
//	processing  the first arrival claimed the key and its handler is running;
//	            a repeat gets an in-progress answer (isError, structuredContent
//	            {"idempotency":"in_progress"}), never a second execution
//	completed   the handler answered; a repeat gets the stored result with
//	            _meta "io.github.mcp-confirm/replayed": true
//	failed      the handler failed; a repeat gets the stored failure, unless
//	            the handler marked its error Retryable, then it runs again
//
// A repeat whose arguments (without the key argument) differ from the first
// arrival's is refused and the differing fields are named. A processing record
// carries a lease; once it expires a repeat is told that the first execution is
// in progress or its outcome unknown. It is never run again on the quiet,
// unless Options.ReclaimExpiredLeases says every effect of the handler is
// committed through Commit (then an unfinished record proves nothing happened).
//
// A handler whose effect lives in the same database as the store commits it
// with Commit, in the transaction that completes the key's record, so no key is
// ever left processing with its effect applied, nor completed without it.
//
// Calls without a key run every time, unless WithDedupeWindow is given: then
// a keyless call identical to one that arrived within the window (same tool,
// same canonical arguments, same DedupeScope; with WrapTool, only the
// arguments the tool's input schema declares) is answered with that call's
// result, marked replayed and MetaDeduplicatedBy "window", or in progress
// while it runs, and is not executed. Its record is kept in the Store like a
// key's, so it holds across restarts and sessions and Commit works the same.
// MetaIntentionalRepeat or IntentionalRepeatArg lets a meant repeat through.
// The window never applies to a call with a key.
//
// WithLogger logs every write once with its WriteOutcome; WithMetrics counts
// them, and the dedupe hits, on a Prometheus registry (see Metrics).
package idempotency
