package pgstore_test

import (
	"context"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/internal/pgtest"
	"github.com/cairn-dev/cairn/pgstore"
	"github.com/cairn-dev/cairn/session"
)

// TestMaxSessionBytes: a commit that would take a session past
// MaxSessionBytes is too_large and writes nothing, on the store that wrote
// the session last (its cached row) and on another (which reads the row);
// a truncation is always taken and makes room again.
func TestMaxSessionBytes(t *testing.T) {
	srv := pgtest.Start(t)
	url := newDB(t, srv)
	open := func() *pgstore.Store {
		s, err := pgstore.Open(context.Background(), url, pgstore.Options{CollectEvery: -1, MaxSessionBytes: 4000})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	a, b := open(), open()
	msg := &session.Change{AppendMessages: []session.Value{session.Value(`"` + strings.Repeat("m", 500) + `"`)}}
	n := 0
	for ; n < 20; n++ {
		_, err := a.Commit(ctx, "s", msg, session.CommitOptions{})
		if session.CodeOf(err) == session.CodeTooLarge {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if n < 4 || n >= 8 {
		t.Fatalf("%d commits of 502 bytes taken under a limit of 4000 bytes", n)
	}
	sum, err := b.Stat(ctx, "s")
	if err != nil || sum.MessageCount != int64(n) || sum.Generation != uint64(n) {
		t.Fatalf("after the refused commit: %+v, %v; want %d messages and generations", sum, err, n)
	}
	if _, err := b.Commit(ctx, "s", msg, session.CommitOptions{}); session.CodeOf(err) != session.CodeTooLarge {
		t.Fatalf("the other store's commit past the limit: %v, want too_large", err)
	}
	cut := int64(1)
	if _, err := b.Commit(ctx, "s", &session.Change{TruncateMessages: &cut}, session.CommitOptions{}); err != nil {
		t.Fatalf("a truncation at the limit: %v", err)
	}
	for _, s := range []*pgstore.Store{a, b, a} {
		if _, err := s.Commit(ctx, "s", msg, session.CommitOptions{}); err != nil {
			t.Fatalf("an append after the truncation made room: %v", err)
		}
	}
	if n := count(t, url, "SELECT data_bytes FROM sessions WHERE id = 's'"); n != 4*502 {
		t.Fatalf("data_bytes %d, want %d (4 messages of 502 bytes)", n, 4*502)
	}
}
