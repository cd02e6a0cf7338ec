package mcpclient

// SetLineLimit sets the longest line a session started afterwards accepts
// from its server (maxLine otherwise), so tests need not stream 64 MiB.
func SetLineLimit(n int) (restore func()) {
	old := lineLimit.Swap(int64(n))
	return func() { lineLimit.Store(old) }
}

// RequestsOnWire says how many tools/call requests of the current session
// are registered with its tap (being written, or written and unanswered),
// so a test can act once a write has begun rather than after a guess.
func (c *Client) RequestsOnWire() int {
	c.mu.Lock()
	s := c.cur
	c.mu.Unlock()
	if s == nil {
		return 0
	}
	s.tap.mu.Lock()
	defer s.tap.mu.Unlock()
	return len(s.tap.byID)
}
