package fsstore

import (
	"cmp"
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/session"
)

// TestHeadPrefetch checks that the records Head decodes are read in one
// pread per run of neighbouring frames (the last commit's run and
// checkpoint together), a distant one alone, and that the frames read
// from spans decode to what reading each alone gives.
func TestHeadPrefetch(t *testing.T) {
	s, _ := agentLog(t, 1)
	ctx := context.Background()
	// A metadata record far behind the run and checkpoint the last commit
	// rewrites: its frame is not joined to theirs.
	meta := session.Change{Metadata: map[string]session.Value{"k": session.Value(`"v"`)}}
	if _, err := s.Commit(ctx, "agent", &meta, session.CommitOptions{}); err != nil {
		t.Fatal(err)
	}
	agentTurns(t, s, 2, 120) // > spanGap of messages after the metadata

	for _, tc := range []struct {
		name     string
		pick     func(its []item) []item
		maxReads int64
	}{
		{"run and checkpoint", func(its []item) []item { return its[len(its)-2:] }, 1},
		{"all head records", func(its []item) []item { return its }, 2},
		{"one record", func(its []item) []item { return its[:1] }, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sf, fr, err := s.reading("agent")
			if err != nil {
				t.Fatal(err)
			}
			defer sf.mu.Unlock()
			its := appendHeadItems(nil, sf.t, false, false)
			sortItems(its)
			its = tc.pick(its)
			want := make([]any, len(its))
			for i, it := range its {
				rec, err := fr.frame(it)
				if err != nil {
					t.Fatal(err)
				}
				want[i] = rec
			}
			cr := &countingReader{r: fr.r}
			pf, err := frameReader{r: cr, path: fr.path}.prefetch(append([]item(nil), its...))
			if err != nil {
				t.Fatal(err)
			}
			for i, it := range its {
				rec, err := pf.frame(it)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(rec, want[i]) {
					t.Fatalf("frame %d at %d: read through a span %+v, alone %+v", i, it.off(), rec, want[i])
				}
			}
			if n := cr.reads.Load(); n > tc.maxReads {
				t.Fatalf("%d records took %d reads, want at most %d", len(its), n, tc.maxReads)
			}
		})
	}

	// Head through the spans answers what it answered before.
	st, sum, err := s.Head(ctx, "agent")
	if err != nil {
		t.Fatal(err)
	}
	if got := st.Checkpoints["r1"]; got == nil || got.Turn != 121 || string(got.State) != `{"step":"after_tool"}` {
		t.Fatalf("head checkpoint %+v", got)
	}
	if len(st.Snapshot.Runs) != 1 || st.Snapshot.Runs[0].RunID != "r1" || string(st.Snapshot.Metadata["k"]) != `"v"` || sum.Generation != st.Snapshot.Generation {
		t.Fatalf("head %+v, summary %+v", st.Snapshot, sum)
	}
}

// agentTurns commits agentLog's turns first .. first+n-1 to s.
func agentTurns(t *testing.T, s *Store, first, n int) {
	t.Helper()
	for i := first; i < first+n; i++ {
		c := session.Change{
			AppendMessages: []session.Value{
				session.Value(fmt.Sprintf(`{"role":"user","turn":%d,"pad":%q}`, i, strings.Repeat("u", 300))),
				session.Value(fmt.Sprintf(`{"role":"assistant","turn":%d,"pad":%q}`, i, strings.Repeat("a", 900))),
			},
			UpsertRuns: []session.Run{{RunID: "r1", Status: session.RunRunning}},
			Checkpoint: &session.LoopCheckpoint{RunID: "r1", Turn: int64(i), State: session.Value(`{"step":"after_tool"}`)},
		}
		if _, err := s.Commit(context.Background(), "agent", &c, session.CommitOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

func sortItems(its []item) {
	slices.SortFunc(its, func(a, b item) int { return cmp.Compare(a.off(), b.off()) })
}
