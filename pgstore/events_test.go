package pgstore_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/internal/pgtest"
	"github.com/cairn-dev/cairn/pgstore"
	"github.com/cairn-dev/cairn/session"
)

// collector is a Listen callback that keeps what it got, for waitFor.
type collector struct {
	mu   sync.Mutex
	got  []string
	more chan struct{}
}

func (c *collector) add(p string) {
	c.mu.Lock()
	c.got = append(c.got, p)
	c.mu.Unlock()
	select {
	case c.more <- struct{}{}:
	default:
	}
}

// waitFor returns the payloads once there are n of them, or fails after a
// generous bound (a liveness limit, not a timing assertion).
func (c *collector) waitFor(t *testing.T, n int) []string {
	t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		c.mu.Lock()
		got := append([]string(nil), c.got...)
		c.mu.Unlock()
		if len(got) >= n {
			return got
		}
		select {
		case <-c.more:
		case <-time.After(100 * time.Millisecond):
		case <-deadline:
			t.Fatalf("%d events of %d arrived: %.200q", len(got), n, got)
		}
	}
}

// listen starts s.Listen until the test ends and returns once it listens.
func listen(t *testing.T, s *pgstore.Store) *collector {
	t.Helper()
	c := &collector{more: make(chan struct{}, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	ready, done := make(chan struct{}), make(chan struct{})
	var once sync.Once
	go func() {
		defer close(done)
		_ = s.Listen(ctx, c.add, func() { once.Do(func() { close(ready) }) })
	}()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case <-ready:
	case <-time.After(30 * time.Second):
		t.Fatal("the listener does not listen")
	}
	return c
}

func commitNotify(t *testing.T, s *pgstore.Store, sid, payload string) uint64 {
	t.Helper()
	res, err := s.Commit(ctx, sid, &session.Change{AppendMessages: []session.Value{session.Value(`"m"`)}},
		session.CommitOptions{Notify: func(gen uint64) string { return fmt.Sprintf("%s:%d:%s", sid, gen, payload) }})
	if err != nil {
		t.Fatalf("commit to %s: %v", sid, err)
	}
	return res.Generation
}

// TestEventsOfAnySize sends a commit's 64 KiB event and a 64 KiB event
// outside any commit from host A: host B's listener gets both whole
// (NOTIFY alone refuses payloads over 8000 bytes).
func TestEventsOfAnySize(t *testing.T) {
	srv := pgtest.Start(t)
	url := newDB(t, srv)
	a, b := openStore(t, url), openStore(t, url)
	got := listen(t, b)
	big := strings.Repeat("x", 64<<10)
	commitNotify(t, a, "s", big)
	if err := a.Notify(ctx, "out:"+big); err != nil {
		t.Fatalf("Notify of 64 KiB: %v", err)
	}
	ps := got.waitFor(t, 2)
	if len(ps) != 2 || ps[0] != "s:1:"+big || ps[1] != "out:"+big {
		t.Fatalf("got %d events, lengths %d..., want the commit's then Notify's, 64 KiB each", len(ps), len(ps[0]))
	}
}

// TestEventsCaughtUpAfterReconnect kills host B's listening connection
// (pg_terminate_backend) and commits on host A while B is away: once B's
// listener is back it delivers those events, each session's in generation
// order, with none missing and none twice.
func TestEventsCaughtUpAfterReconnect(t *testing.T) {
	srv := pgtest.Start(t)
	url := newDB(t, srv)
	a, b := openStore(t, url), openStore(t, url)
	got := listen(t, b)
	want := map[string]uint64{}
	commit := func(sid string) {
		want[sid] = commitNotify(t, a, sid, "")
	}
	commit("s0")
	got.waitFor(t, 1)
	listeners := func() int64 {
		return count(t, url, "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND datname = current_database()", pgstore.ListenerName)
	}
	total, away := 1, 0
	for round := 0; round < 20 && away < 3; round++ {
		exec(t, url, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1 AND datname = current_database()", pgstore.ListenerName)
		// Bounded: the listener may be back before this sees it gone.
		for i := 0; i < 200 && listeners() != 0; i++ {
			time.Sleep(5 * time.Millisecond)
		}
		for k := range 6 {
			commit(fmt.Sprintf("s%d", k%3))
			total++
		}
		// Count the rounds whose commits all landed while B was away:
		// the ones only a catch-up can deliver.
		if listeners() == 0 {
			away++
		}
		got.waitFor(t, total)
	}
	if away == 0 {
		t.Fatal("no round committed while the listener was disconnected")
	}
	ps := got.waitFor(t, total)
	last := map[string]uint64{}
	for _, p := range ps {
		var sid string
		var gen uint64
		if _, err := fmt.Sscanf(strings.ReplaceAll(p, ":", " "), "%s %d", &sid, &gen); err != nil {
			t.Fatalf("payload %q: %v", p, err)
		}
		if gen != last[sid]+1 {
			t.Fatalf("%s: generation %d after %d: out of order, missing or twice (all: %q)", sid, gen, last[sid], ps)
		}
		last[sid] = gen
	}
	if len(ps) != total || fmt.Sprint(last) != fmt.Sprint(want) {
		t.Fatalf("got %d events up to %v, want %d up to %v", len(ps), last, total, want)
	}
	t.Logf("%d events, %d of %d rounds committed while the listener was away", total, away, 20)
}
