package pgstore

import "sync"

// maxCachedHeads bounds the head cache; when full it starts over.
const maxCachedHeads = 4096

// headCache keeps the session rows this store last committed, so the next
// commit of a session can skip reading its row: it sends one batch that
// moves the row only from the cached generation (the guard of build), and
// falls back to reading the row when another writer moved it since.
// Most sessions have one writer, whose commits then take one round trip.
type headCache struct {
	mu sync.Mutex
	m  map[string]sessionRow
}

func (c *headCache) get(id string) (sessionRow, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.m[id]
	return r, ok
}

func (c *headCache) put(id string, r sessionRow) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= maxCachedHeads {
		c.m = map[string]sessionRow{}
	}
	c.m[id] = r
}

func (c *headCache) drop(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, id)
}
