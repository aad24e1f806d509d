package fsstore_test

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/fsstore"
	"github.com/cairn-dev/cairn/session"
)

// TestCommitAllocation checks that a commit of an agent's turn (about
// 8 KB of messages) allocates a fraction of the bytes it writes: the
// records are encoded straight into one frame buffer (not each into a
// buffer of its own, then copied into one grown by doubling), and that
// buffer is one a finished commit gave back (commitBufs), not a new one
// (about 1.3 times the bytes written when it was).
func TestCommitAllocation(t *testing.T) {
	s, err := fsstore.Open(t.TempDir(), fsstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ctx := context.Background()
	const turns = 40
	changes := make([]*session.Change, turns+1)
	for i := range changes {
		changes[i] = &session.Change{AppendMessages: []session.Value{
			session.Value(`{"role":"user","i":` + strconv.Itoa(i) + `,"text":"` + strings.Repeat("u", 2000) + `"}`),
			session.Value(`{"role":"assistant","i":` + strconv.Itoa(i) + `,"text":"` + strings.Repeat("a", 6000) + `"}`),
		}}
	}
	if _, err := s.Commit(ctx, "a", changes[0], session.CommitOptions{}); err != nil {
		t.Fatal(err)
	}
	var written int64
	alloc := allocated(func() {
		for _, c := range changes[1:] {
			var res session.CommitResult
			if res, err = s.Commit(ctx, "a", c, session.CommitOptions{}); err != nil {
				return
			}
			written += res.BytesWritten
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	perCommit := float64(alloc) / turns
	perWritten := float64(written) / turns
	t.Logf("%.0f bytes allocated per commit of %.0f bytes", perCommit, perWritten)
	limit := 0.5
	if raceEnabled {
		limit = 1.0 // a quarter of the buffers are not pooled (about 0.4-0.6x)
	}
	if perCommit > limit*perWritten {
		t.Fatalf("a commit of %.0f bytes allocated %.0f bytes, want at most %.1fx", perWritten, perCommit, limit)
	}
}

// TestPutCommitAllocations bounds the allocations of a commit like a
// LangGraph saver's put (four artifacts with data and one message): the
// index is folded in from the values as they are encoded, not from the
// records decoded back through reflection (99 allocations a commit when
// it was, 35 after), the artifact headers are encoded without reflection
// (26 then), and the commit and messages records are encoded by hand,
// through a bytes.Buffer the frame buffer keeps, with checksums that
// allocate nothing (7 now).
func TestPutCommitAllocations(t *testing.T) {
	s, err := fsstore.Open(t.TempDir(), fsstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ctx := context.Background()
	const puts = 50
	changes := make([]*session.Change, puts+1)
	for i := range changes {
		v := strconv.Itoa(i)
		c := &session.Change{AppendMessages: []session.Value{session.Value(`{"ns":"","id":"` + v + `"}`)}}
		for _, id := range []string{"b.messages." + v, "b.step." + v, "c." + v, "h"} {
			c.PutArtifacts = append(c.PutArtifacts, session.Artifact{ID: id, Kind: "langgraph", Data: []byte(strings.Repeat("d", 300))})
		}
		if err := session.Normalize(c); err != nil {
			t.Fatal(err)
		}
		changes[i] = c
	}
	if _, err := s.Commit(ctx, "put", changes[0], session.CommitOptions{Normalized: true}); err != nil {
		t.Fatal(err)
	}
	i := 1
	allocs := testing.AllocsPerRun(puts-1, func() {
		if _, err := s.Commit(ctx, "put", changes[i], session.CommitOptions{Normalized: true}); err != nil {
			t.Fatal(err)
		}
		i++
	})
	t.Logf("%.1f allocations per put commit", allocs)
	limit := 12.0
	if raceEnabled {
		limit = 20 // a quarter of the index lists are not pooled
	}
	if allocs > limit {
		t.Fatalf("a put's commit made %.1f allocations, want at most %.0f", allocs, limit)
	}
}
