package pgstore_test

import (
	"testing"
	"time"

	"github.com/cairn-dev/cairn/internal/pgtest"
	"github.com/cairn-dev/cairn/session"
)

// TestLeaseFencing has host A hold a run's lease on one Store and host B
// take it over on another (two pools, as two hosts): A's commit fenced with
// its old token is refused with not_owner and leaves no trace, a live lease
// is not taken without takeover, an expired one is, and every change of
// holder raises the token. The same holds for a fenced workflow step.
func TestLeaseFencing(t *testing.T) {
	srv := pgtest.Start(t)
	url := newDB(t, srv)
	a, b := openStore(t, url), openStore(t, url)
	const key = "run:r1"
	la, err := a.AcquireLease(ctx, key, "A", time.Minute, false)
	if err != nil || la.Holder != "A" || la.Token < 1 {
		t.Fatalf("A acquires: %+v, %v", la, err)
	}
	fa := &session.Fence{Key: key, Holder: "A", Token: la.Token, TTL: time.Minute}
	msg := func(s string) *session.Change {
		return &session.Change{AppendMessages: []session.Value{session.Value(`"` + s + `"`)}}
	}
	if _, err := a.Commit(ctx, "s", msg("a1"), session.CommitOptions{Fence: fa}); err != nil {
		t.Fatalf("A's fenced commit under its lease: %v", err)
	}
	if _, err := b.AcquireLease(ctx, key, "B", time.Minute, false); session.CodeOf(err) != session.CodeConflict {
		t.Fatalf("B takes a live lease without takeover: %v, want conflict", err)
	}
	if l, err := a.AcquireLease(ctx, key, "A", time.Minute, false); err != nil || l.Token != la.Token {
		t.Fatalf("A renews its own lease: %+v, %v (the token must stay)", l, err)
	}
	lb, err := b.AcquireLease(ctx, key, "B", time.Minute, true)
	if err != nil || lb.Holder != "B" || lb.Token <= la.Token {
		t.Fatalf("B takes over: %+v, %v", lb, err)
	}
	_, err = a.Commit(ctx, "s", msg("a2-late"), session.CommitOptions{Fence: fa})
	if session.CodeOf(err) != session.CodeNotOwner {
		t.Fatalf("A's late commit: %v, want not_owner", err)
	}
	sum, err := b.Stat(ctx, "s")
	if err != nil || sum.Generation != 1 || sum.MessageCount != 1 {
		t.Fatalf("after A's refused commit: %+v, %v; want generation 1, 1 message", sum, err)
	}
	if n := count(t, url, "SELECT count(*) FROM commits WHERE session_id = 's'"); n != 1 {
		t.Fatalf("%d commit rows, want 1: the refused commit left a row", n)
	}
	fb := &session.Fence{Key: key, Holder: "B", Token: lb.Token, TTL: time.Minute}
	if _, err := b.Commit(ctx, "s", msg("b1"), session.CommitOptions{Fence: fb}); err != nil {
		t.Fatalf("B's fenced commit: %v", err)
	}

	// An expired lease goes to whoever asks, and its token goes up.
	l2, err := b.AcquireLease(ctx, "run:r2", "B", 50*time.Millisecond, false)
	if err != nil {
		t.Fatal(err)
	}
	exec(t, url, "UPDATE leases SET expires_at = now() - interval '1 second' WHERE key = 'run:r2'")
	if l, err := a.AcquireLease(ctx, "run:r2", "A", time.Minute, false); err != nil || l.Token <= l2.Token || l.Holder != "A" {
		t.Fatalf("A takes an expired lease: %+v, %v", l, err)
	}
	if n, err := b.RenewLeases(ctx, "B", time.Minute); err != nil || n != 1 {
		t.Fatalf("B renews: %d, %v; want 1 (run:r1 only)", n, err)
	}

	// A workflow step under a lost lease is refused the same way.
	const wk = "workflow:w"
	lw, err := a.AcquireLease(ctx, wk, "A", time.Minute, false)
	if err != nil {
		t.Fatal(err)
	}
	step := func(id string) session.StepRecord {
		return session.StepRecord{StepID: id, Identity: "i-" + id, Result: session.Value(`1`), CompletedAt: time.Now()}
	}
	if err := a.SaveStepFenced(ctx, "w", "s", step("one"), session.Fence{Key: wk, Holder: "A", Token: lw.Token, TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.AcquireLease(ctx, wk, "B", time.Minute, true); err != nil {
		t.Fatal(err)
	}
	err = a.SaveStepFenced(ctx, "w", "s", step("two"), session.Fence{Key: wk, Holder: "A", Token: lw.Token, TTL: time.Minute})
	if session.CodeOf(err) != session.CodeNotOwner {
		t.Fatalf("A's late step: %v, want not_owner", err)
	}
	w, err := b.Workflow(ctx, "w")
	if err != nil || len(w.Steps) != 1 {
		t.Fatalf("workflow after A's refused step: %+v, %v; want one step", w, err)
	}
	if err := b.ReleaseLease(ctx, wk, "A"); err != nil {
		t.Fatal(err)
	}
	if l, err := b.LeaseOf(ctx, wk); err != nil || l.Holder != "B" {
		t.Fatalf("A released B's lease: %+v, %v", l, err)
	}
}

// TestEndedRunsDropTheirLeases has a resume's commit mark the resumed run
// interrupted (superseded) and start its successor: the superseded run's
// lease goes in that commit, the successor's and unrelated ones stay.
func TestEndedRunsDropTheirLeases(t *testing.T) {
	srv := pgtest.Start(t)
	url := newDB(t, srv)
	s := openStore(t, url)
	for _, k := range []string{"run:old", "run:new", "run:other"} {
		if _, err := s.AcquireLease(ctx, k, "A", time.Minute, false); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Commit(ctx, "s", &session.Change{UpsertRuns: []session.Run{{RunID: "old", Status: session.RunRunning}, {RunID: "other", Status: session.RunRunning}}}, session.CommitOptions{}); err != nil {
		t.Fatal(err)
	}
	l, err := s.AcquireLease(ctx, "run:old", "B", time.Minute, true)
	if err != nil {
		t.Fatal(err)
	}
	f := &session.Fence{Key: "run:old", Holder: "B", Token: l.Token, TTL: time.Minute}
	resume := &session.Change{UpsertRuns: []session.Run{
		{RunID: "old", Status: session.RunInterrupted},
		{RunID: "new", Status: session.RunRunning, ParentRunID: "old"},
	}}
	if _, err := s.Commit(ctx, "s", resume, session.CommitOptions{Fence: f}); err != nil {
		t.Fatalf("the resume's commit: %v", err)
	}
	if n := count(t, url, "SELECT count(*) FROM leases WHERE key = 'run:old'"); n != 0 {
		t.Fatalf("the superseded run's lease is still there (%d rows)", n)
	}
	if n := count(t, url, "SELECT count(*) FROM leases WHERE key IN ('run:new', 'run:other')"); n != 2 {
		t.Fatalf("%d of the running runs' 2 leases left", n)
	}
}
