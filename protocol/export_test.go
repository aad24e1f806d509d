package protocol

// ConnDead returns a channel closed once the client's current connection
// has failed, so a test can wait for the client to notice a killed daemon
// before it makes the next call.
func ConnDead(c *Client) <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cur.dead
}

// SetReadFailedHook makes f run in a connection's reader goroutine when its
// read fails, before the reader marks the connection dead (f gets the
// channel closed once it is dead), until the returned function is called.
// A test holds the reader back with it, as when a daemon died and the
// reader has not run since.
func SetReadFailedHook(f func(dead <-chan struct{})) (restore func()) {
	testHookReadFailed.Store(&f)
	return func() { testHookReadFailed.Store(nil) }
}
