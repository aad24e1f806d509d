package pgstore_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/cairn-dev/cairn/internal/pgtest"
	"github.com/cairn-dev/cairn/pgstore"
	"github.com/cairn-dev/cairn/session"
)

// TestAppendAcrossStoresWithoutCAS has 16 writers on two Store instances
// append to one session without an expected generation, so every commit
// starts from a cached row that the other store has usually moved since.
// Each append must land exactly once and none may fail: a stale cache is
// caught by the guard on the generation and the commit reads the row and
// goes again, never surfacing a conflict the caller did not ask for.
func TestAppendAcrossStoresWithoutCAS(t *testing.T) {
	srv := pgtest.Start(t)
	url := newDB(t, srv)
	stores := []*pgstore.Store{openStore(t, url), openStore(t, url)}
	const writers, each = 16, 15
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		st := stores[w%2]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range each {
				v := session.Value(fmt.Sprintf(`"w%d-%d"`, w, k))
				if _, err := st.Commit(ctx, "s", &session.Change{AppendMessages: []session.Value{v}}, session.CommitOptions{}); err != nil {
					errs <- fmt.Errorf("writer %d, append %d: %w", w, k, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	st, err := stores[0].Load(ctx, "s", 0)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, m := range st.Snapshot.Messages {
		if seen[string(m)] {
			t.Fatalf("message %s twice", m)
		}
		seen[string(m)] = true
	}
	if len(seen) != writers*each || st.Snapshot.Generation != writers*each {
		t.Fatalf("%d distinct messages at generation %d; want %d", len(seen), st.Snapshot.Generation, writers*each)
	}
}

// TestStaleCacheNoFalseConflict: a store whose cached row is stale (another
// store committed since) must judge an expected generation against the
// database, not its cache.
func TestStaleCacheNoFalseConflict(t *testing.T) {
	srv := pgtest.Start(t)
	url := newDB(t, srv)
	a, b := openStore(t, url), openStore(t, url)
	add := func(st *pgstore.Store, opts session.CommitOptions) error {
		_, err := st.Commit(ctx, "s", &session.Change{AppendMessages: []session.Value{session.Value(`1`)}}, opts)
		return err
	}
	if err := add(a, session.CommitOptions{}); err != nil { // a caches generation 1
		t.Fatal(err)
	}
	if err := add(b, session.CommitOptions{}); err != nil { // the session is at 2
		t.Fatal(err)
	}
	if err := add(a, session.CommitOptions{ExpectGeneration: session.Expect(2)}); err != nil {
		t.Fatalf("expecting the current generation through a stale cache: %v", err)
	}
	if err := add(b, session.CommitOptions{ExpectGeneration: session.Expect(2)}); session.CodeOf(err) != session.CodeConflict {
		t.Fatalf("expecting an old generation: %v, want conflict", err)
	}
}
