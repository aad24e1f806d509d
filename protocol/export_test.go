package protocol

// ConnDead returns a channel closed once the client's current connection
// has failed, so a test can wait for the client to notice a killed daemon
// before it makes the next call.
func ConnDead(c *Client) <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cur.dead
}
