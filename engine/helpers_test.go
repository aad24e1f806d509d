package engine_test

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/fsstore"
	"github.com/cairn-dev/cairn/internal/testkit"
	"github.com/cairn-dev/cairn/session"
)

// storeFactory opens a fresh, empty store in dir (an empty directory).
type storeFactory struct {
	name string
	open func(dir string) (session.Store, error)
}

// stores is the table every engine test runs against.
var stores = []storeFactory{
	{"mem", func(string) (session.Store, error) { return session.NewMemStore(), nil }},
	{"fs", func(dir string) (session.Store, error) { return fsstore.Open(dir, fsstore.Options{}) }},
}

// openStore opens a store from f under a fresh t.TempDir().
func openStore(t *testing.T, f storeFactory) session.Store {
	t.Helper()
	st, err := f.open(t.TempDir())
	if err != nil {
		t.Fatalf("open %s store: %v", f.name, err)
	}
	return st
}

// forEachStore runs fn as a subtest per store.
func forEachStore(t *testing.T, fn func(t *testing.T, f storeFactory)) {
	t.Helper()
	for _, f := range stores {
		t.Run(f.name, func(t *testing.T) { fn(t, f) })
	}
}

// fakeClock is a deterministic clock: each reading is one second later.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(time.Second)
	return c.t
}

// seqIDs hands out run ids run-1, run-2, ...
type seqIDs struct {
	mu sync.Mutex
	n  int
}

func (s *seqIDs) Next() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n++
	return fmt.Sprintf("run-%d", s.n)
}

// newEngine returns an engine over a fresh store from f, closed at cleanup.
func newEngine(t *testing.T, f storeFactory) *engine.Engine {
	t.Helper()
	clock := &fakeClock{t: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)}
	ids := &seqIDs{}
	e := engine.New(openStore(t, f), engine.Options{Now: clock.Now, NewRunID: ids.Next})
	t.Cleanup(func() { _ = e.Close() })
	return e
}

// wantCode fails the test unless err carries code ("" means no error).
func wantCode(t *testing.T, err error, code session.Code) {
	t.Helper()
	if got := session.CodeOf(err); got != code {
		t.Fatalf("error code = %q (%v), want %q", got, err, code)
	}
}

func noErr(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("unexpected error: %v", err)
	}
}

func msgs(ss ...string) []session.Value {
	out := make([]session.Value, len(ss))
	for i, s := range ss {
		out[i] = session.Value(s)
	}
	return out
}

func msg(role string, n int) session.Value {
	return session.Value(fmt.Sprintf(`{"role":%q,"n":%d}`, role, n))
}

// saveDelta saves a delta appending messages and returns the generation.
func saveDelta(t *testing.T, e *engine.Engine, sid string, m ...session.Value) uint64 {
	t.Helper()
	res, err := e.Save(testkit.Context(t), api.SaveRequest{SessionID: sid, Change: &session.Change{AppendMessages: m}})
	noErr(t, err)
	return res.Generation
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	noErr(t, err)
	return string(b)
}
