package engine

import (
	"context"
	"sync"

	"github.com/cairn-dev/cairn/session"
)

// DefaultCachedSessions is how many sessions' latest state the engine keeps
// in memory when Options.CachedSessions is 0.
const DefaultCachedSessions = 8

// stateCache keeps the latest state of the sessions the engine touched
// most recently, so a checkpoint (the hot path: one per tool turn) does not
// re-read the whole session from the store to check its run. An entry is
// only trusted while the store's Stat reports the same generation and
// created_at, so a writer outside this engine (or a delete and re-create)
// just causes a reload. Entries are advanced by applying each committed
// change with session.Apply, the same function every store applies commits
// with. Only times the engine never reads (updated_at) can differ from the
// store's. Callers hold the session's lock for every use of an entry.
type stateCache struct {
	mu   sync.Mutex
	max  int
	tick uint64
	m    map[string]*cacheEntry
}

type cacheEntry struct {
	st   *session.State
	used uint64
}

func (c *stateCache) get(sid string) *session.State {
	c.mu.Lock()
	defer c.mu.Unlock()
	ent := c.m[sid]
	if ent == nil {
		return nil
	}
	c.tick++
	ent.used = c.tick
	return ent.st
}

func (c *stateCache) put(sid string, st *session.State) {
	if c.max <= 0 || st == nil || st.Snapshot == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]*cacheEntry{}
	}
	if _, ok := c.m[sid]; !ok && len(c.m) >= c.max {
		var oldest string
		var min uint64
		for k, e := range c.m {
			if oldest == "" || e.used < min {
				oldest, min = k, e.used
			}
		}
		delete(c.m, oldest)
	}
	c.tick++
	c.m[sid] = &cacheEntry{st: st, used: c.tick}
}

func (c *stateCache) drop(sid string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, sid)
}

// latestLocked returns the session's latest state for a read-modify-write:
// the cached one when the store confirms it is still current, else a fresh
// Load (which is then cached). The caller holds the session lock and must
// not modify the result.
func (e *Engine) latestLocked(ctx context.Context, sid string) (*session.State, error) {
	if st := e.cache.get(sid); st != nil {
		sum, err := e.store.Stat(ctx, sid)
		if err == nil && sum.Generation == st.Snapshot.Generation && sum.CreatedAt.Equal(st.Snapshot.CreatedAt) {
			return st, nil
		}
		e.cache.drop(sid)
		if err != nil && !isCode(err, session.CodeNotFound) {
			return nil, err
		}
	}
	st, err := e.store.Load(ctx, sid, 0)
	if err != nil {
		return nil, err
	}
	e.cache.put(sid, session.CloneState(st))
	return st, nil
}

// advanceLocked brings the cached state of sid forward by the change just
// committed as generation res.Generation, or drops it when it was not the
// generation before. The caller holds the session lock.
func (e *Engine) advanceLocked(sid string, c *session.Change, res session.CommitResult) {
	st := e.cache.get(sid)
	if st == nil {
		return
	}
	if st.Snapshot.Generation+1 != res.Generation {
		e.cache.drop(sid)
		return
	}
	session.Apply(st, sid, c, res.Generation, e.clock())
	if int64(len(st.Snapshot.Messages)) != res.MessageCount {
		// Should not happen: the store applied the same change. Trust
		// the store and reload next time.
		e.log.Warn("cached session state diverged from the store; dropping it", "session", sid, "generation", res.Generation)
		e.cache.drop(sid)
	}
}
