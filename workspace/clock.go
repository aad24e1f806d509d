package workspace

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/session"
)

// A clock names a moment in one tracker instance's history:
// "c:<instance>:<tick>". The instance is random per Open, so a clock from
// before a restart, or from another workspace, is recognised as foreign.
// Ticks advance once per applied batch of changes.

func (t *Tracker) clockLocked() string {
	return "c:" + t.instance + ":" + strconv.FormatUint(uint64(t.tick), 10)
}

// parseClock splits a clock into instance and tick.
func parseClock(c string) (string, uint32, error) {
	rest, ok := strings.CutPrefix(c, "c:")
	inst, tick, ok2 := strings.Cut(rest, ":")
	n, err := strconv.ParseUint(tick, 10, 32)
	if !ok || !ok2 || inst == "" || err != nil {
		// Also session.ErrInvalidArgument, so every caller reports the
		// stable code without a special case.
		return "", 0, fmt.Errorf("%q: %w (%w)", c, ErrBadClock, session.ErrInvalidArgument)
	}
	return inst, uint32(n), nil
}

// Changes returns what changed after the clock since, having first synced
// (see Sync) so every change made before the call is included. A path that
// was deleted and recreated is reported as modified; one created and
// deleted again in between is not reported.
func (t *Tracker) Changes(ctx context.Context, since string) (api.ChangeSet, error) {
	var inst string
	var from uint32
	if since != "" {
		var err error
		if inst, from, err = parseClock(since); err != nil {
			return api.ChangeSet{}, fmt.Errorf("workspace.Changes: %w", err)
		}
	}
	if err := t.Sync(ctx); err != nil {
		return api.ChangeSet{}, fmt.Errorf("workspace.Changes: %w", err)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	cs := api.ChangeSet{Clock: t.clockLocked(), Added: []string{}, Modified: []string{}, Deleted: []string{}}
	if since == "" || inst != t.instance || from > t.tick || from < t.horizon {
		cs.FreshInstance = true
		t.walkLocked(func(rel string, _ *entry) { cs.Added = append(cs.Added, rel) })
		slices.Sort(cs.Added)
		return cs, nil
	}
	// The earliest deletion after from says whether a path existed then.
	firstDel := map[string]deletion{}
	for _, d := range t.deletions {
		if d.tick > from {
			if _, ok := firstDel[d.path]; !ok {
				firstDel[d.path] = d
			}
		}
	}
	t.walkLocked(func(rel string, e *entry) {
		d, deleted := firstDel[rel]
		if deleted {
			delete(firstDel, rel)
			if d.born <= from {
				cs.Modified = append(cs.Modified, rel)
			} else {
				cs.Added = append(cs.Added, rel)
			}
			return
		}
		switch {
		case e.born > from:
			cs.Added = append(cs.Added, rel)
		case e.changed > from:
			cs.Modified = append(cs.Modified, rel)
		}
	})
	for rel, d := range firstDel {
		if d.born <= from {
			cs.Deleted = append(cs.Deleted, rel)
		}
	}
	slices.Sort(cs.Added)
	slices.Sort(cs.Modified)
	slices.Sort(cs.Deleted)
	return cs, nil
}

// Clock returns the current clock without syncing.
func (t *Tracker) Clock() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.clockLocked()
}
