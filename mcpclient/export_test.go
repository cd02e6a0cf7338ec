package mcpclient

// SetLineLimit sets the longest line a session started afterwards accepts
// from its server (maxLine otherwise), so tests need not stream 64 MiB.
func SetLineLimit(n int) (restore func()) {
	old := lineLimit.Swap(int64(n))
	return func() { lineLimit.Store(old) }
}
