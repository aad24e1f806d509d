package pgstore_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/internal/pgtest"
	"github.com/cairn-dev/cairn/pgstore"
	"github.com/cairn-dev/cairn/session"
	"github.com/jackc/pgx/v5"
)

// openQuiet opens a store without the background collection pass, so a
// test decides when passes run.
func openQuiet(t *testing.T, url string) *pgstore.Store {
	t.Helper()
	s, err := pgstore.Open(context.Background(), url, pgstore.Options{CollectEvery: -1})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func artifact(id, content string) *session.Change {
	return &session.Change{AppendArtifacts: []session.Artifact{{ID: id, Data: []byte(content)}}}
}

// TestCollectLeases: only leases expired for longer than the grace go, at
// most Limit per pass; a holder whose lease row went is refused, and gets
// a higher token when it takes the key again, so its old fence never
// matches again.
func TestCollectLeases(t *testing.T) {
	srv := pgtest.Start(t)
	url := newDB(t, srv)
	a, b := openQuiet(t, url), openQuiet(t, url)
	dead, err := a.AcquireLease(ctx, "run:dead", "A", time.Minute, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"run:recent", "run:d1", "run:d2", "run:d3"} {
		if _, err := a.AcquireLease(ctx, k, "A", time.Minute, false); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.AcquireLease(ctx, "run:live", "B", time.Minute, false); err != nil {
		t.Fatal(err)
	}
	exec(t, url, "UPDATE leases SET expires_at = now() - interval '2 hours' WHERE key IN ('run:dead', 'run:d1', 'run:d2', 'run:d3')")
	exec(t, url, "UPDATE leases SET expires_at = now() - interval '1 second' WHERE key = 'run:recent'")

	got, err := b.Collect(ctx, pgstore.CollectOptions{Limit: 2})
	if err != nil || got.Leases != 2 {
		t.Fatalf("first pass: %+v, %v; want 2 leases (the limit)", got, err)
	}
	if got, err = b.Collect(ctx, pgstore.CollectOptions{}); err != nil || got.Leases != 2 {
		t.Fatalf("second pass: %+v, %v; want the other 2", got, err)
	}
	if n := count(t, url, "SELECT count(*) FROM leases WHERE key IN ('run:recent', 'run:live')"); n != 2 {
		t.Fatalf("%d of the live and the recently expired lease left, want 2", n)
	}
	if n := count(t, url, "SELECT count(*) FROM leases"); n != 2 {
		t.Fatalf("%d lease rows left, want 2", n)
	}

	old := &session.Fence{Key: "run:dead", Holder: "A", Token: dead.Token, TTL: time.Minute}
	msg := &session.Change{AppendMessages: []session.Value{session.Value(`"late"`)}}
	if _, err := a.Commit(ctx, "s", msg, session.CommitOptions{Fence: old}); session.CodeOf(err) != session.CodeNotOwner {
		t.Fatalf("a commit fenced by a collected lease: %v, want not_owner", err)
	}
	again, err := a.AcquireLease(ctx, "run:dead", "A", time.Minute, false)
	if err != nil || again.Token <= dead.Token {
		t.Fatalf("the key taken again: %+v, %v; want a token above %d", again, err, dead.Token)
	}
	if _, err := a.Commit(ctx, "s", msg, session.CommitOptions{Fence: old}); session.CodeOf(err) != session.CodeNotOwner {
		t.Fatalf("the old fence after the key was taken again: %v, want not_owner", err)
	}
	if _, err := a.Commit(ctx, "s", msg, session.CommitOptions{Fence: &session.Fence{Key: "run:dead", Holder: "A", Token: again.Token, TTL: time.Minute}}); err != nil {
		t.Fatalf("the new fence: %v", err)
	}
}

// TestCollectBlobs: the bytes of a deleted session's artifacts go, unless
// another session still refers to them, and every remaining artifact
// reads back whole; a pass examines at most Limit hashes.
func TestCollectBlobs(t *testing.T) {
	srv := pgtest.Start(t)
	url := newDB(t, srv)
	s := openQuiet(t, url)
	for _, c := range []struct{ sid, id, content string }{
		{"keep", "shared", "bytes both sessions have"},
		{"gone", "shared", "bytes both sessions have"},
		{"gone", "only1", "bytes only the deleted session has"},
		{"gone", "only2", "more bytes only the deleted session has"},
	} {
		if _, err := s.Commit(ctx, c.sid, artifact(c.id, c.content), session.CommitOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := s.Collect(ctx, pgstore.CollectOptions{}); err != nil || got.Blobs != 0 {
		t.Fatalf("a pass before any delete: %+v, %v; want nothing removed", got, err)
	}
	if err := s.Delete(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	removed := 0
	for range 3 { // 3 hashes, 1 per pass
		got, err := s.Collect(ctx, pgstore.CollectOptions{Limit: 1})
		if err != nil || got.Blobs > 1 {
			t.Fatalf("a pass of limit 1: %+v, %v", got, err)
		}
		removed += got.Blobs
	}
	if removed != 2 {
		t.Fatalf("%d artifacts' bytes removed, want 2 (only the deleted session's own)", removed)
	}
	if n := count(t, url, "SELECT count(DISTINCT sha256) FROM blobs"); n != 1 {
		t.Fatalf("%d hashes left in blobs, want 1", n)
	}
	st, err := s.Load(ctx, "keep", 0)
	if err != nil || string(st.Snapshot.Artifacts[0].Data) != "bytes both sessions have" {
		t.Fatalf("Load of the session that keeps the shared bytes: %v", err)
	}
}

// TestCollectRacesACommit: host A commits an artifact whose bytes are in
// blobs, unreferenced (its earlier session was deleted), so A's commit
// writes no chunk and only adds its reference; host B collects while A's
// transaction is open. B must leave the bytes, and A's artifact must read
// back whole once A commits. A is held mid-transaction by an uncommitted
// row with the key of A's commit row, so the order is certain.
func TestCollectRacesACommit(t *testing.T) {
	srv := pgtest.Start(t)
	url := newDB(t, srv)
	a, b := openQuiet(t, url), openQuiet(t, url)
	const content = "the bytes of an artifact two sessions have, one after the other"
	if _, err := a.Commit(ctx, "old", artifact("x", content), session.CommitOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := a.Delete(ctx, "old"); err != nil {
		t.Fatal(err)
	}
	chunks := count(t, url, "SELECT count(*) FROM blobs")

	hold, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hold.Close(context.Background()) })
	tx, err := hold.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "INSERT INTO commits (session_id, generation, token, committed_at, changes) VALUES ('new', 1, '\\x00', now(), '\\x00')"); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := a.Commit(ctx, "new", artifact("x", content), session.CommitOptions{})
		done <- err
	}()
	deadline := time.Now().Add(20 * time.Second)
	for count(t, url, "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%INSERT INTO commits%'") == 0 {
		if time.Now().After(deadline) {
			tx.Rollback(ctx)
			t.Fatalf("A's commit never waited on the held row (it ended: %v)", <-done)
		}
		time.Sleep(10 * time.Millisecond)
	}
	got, err := b.Collect(ctx, pgstore.CollectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n := count(t, url, "SELECT count(*) FROM blobs"); n != chunks || got.Blobs != 0 {
		t.Fatalf("B's pass during A's commit: %+v, %d of %d chunks left; it removed bytes A's commit refers to", got, n, chunks)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("A's commit: %v", err)
	}
	if got, err := b.Collect(ctx, pgstore.CollectOptions{}); err != nil || got.Blobs != 0 || got.BlobsBusy {
		t.Fatalf("B's pass after A's commit: %+v, %v; want nothing removed, not busy", got, err)
	}
	for _, s := range []*pgstore.Store{a, b} {
		p, err := s.Artifacts(ctx, "new", []string{"x"}, true)
		if err != nil || len(p.Items) != 1 || !bytes.Equal(p.Items[0].Data, []byte(content)) {
			t.Fatalf("A's artifact after the passes: %v, %+v", err, p.Items)
		}
	}
}

// TestCollectAfterUpgrade: a database written before schema 4 has no
// blob_refs rows for its artifacts; the migration pins their bytes, so
// Collect never removes them, and lease tokens go on from the highest.
func TestCollectAfterUpgrade(t *testing.T) {
	srv := pgtest.Start(t)
	url := newDB(t, srv)
	s := openQuiet(t, url)
	if _, err := s.Commit(ctx, "old", artifact("x", "bytes from before schema 4"), session.CommitOptions{}); err != nil {
		t.Fatal(err)
	}
	l, err := s.AcquireLease(ctx, "run:old", "A", time.Minute, false)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	// Back to schema 3, as an older build left it.
	exec(t, url, "DROP TABLE blob_refs; DROP SEQUENCE lease_tokens; DROP INDEX leases_expires; ALTER TABLE sessions DROP COLUMN data_bytes; UPDATE schema_version SET version = 3")
	exec(t, url, "UPDATE leases SET token = $1", l.Token+41)
	s = openQuiet(t, url)
	if _, err := s.Commit(ctx, "other", artifact("y", "bytes from after"), session.CommitOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "other"); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Collect(ctx, pgstore.CollectOptions{}); err != nil || got.Blobs != 1 {
		t.Fatalf("pass after the upgrade: %+v, %v; want only the deleted session's bytes removed", got, err)
	}
	p, err := s.Artifacts(ctx, "old", []string{"x"}, true)
	if err != nil || len(p.Items) != 1 || string(p.Items[0].Data) != "bytes from before schema 4" {
		t.Fatalf("the artifact from before the upgrade: %v, %+v", err, p.Items)
	}
	nl, err := s.AcquireLease(ctx, "run:old", "B", time.Minute, true)
	if err != nil || nl.Token <= l.Token+41 {
		t.Fatalf("a takeover after the upgrade: %+v, %v; want a token above %d", nl, err, l.Token+41)
	}
}
