package fsstore

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/internal/testkit"
	"github.com/cairn-dev/cairn/session"
)

// TestHeadReadsNoOldRuns checks that Head, which every run operation
// (beginRun, checkpoint, completeRun, resumeRun) reads, does not read back
// the record of every run the session has had: a session of 300 ended runs,
// each with a turn of messages and a checkpoint beside its records, is read
// for a few kilobytes, after its commits and after a reopen once Head has
// run, where reading each run's record took over a megabyte. What it
// answers is what decoding every record gives, and a caller that changes
// a run it was given changes nothing Head answers next.
func TestHeadReadsNoOldRuns(t *testing.T) {
	const runs = 300
	dir := t.TempDir()
	fs := testkit.NewReadCountFS()
	read := fs.Bytes
	open := func() *Store {
		s, err := Open(dir, Options{FS: fs})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := open()
	ctx := context.Background()
	start := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	for i := 0; i < runs; i++ {
		id := fmt.Sprintf("run-%d", i)
		turn := session.Change{
			AppendMessages: []session.Value{session.Value(fmt.Sprintf(`{"role":"user","pad":%q}`, strings.Repeat("u", 4000)))},
			UpsertRuns:     []session.Run{{RunID: id, Status: session.RunRunning, StartedAt: start}},
			Checkpoint:     &session.LoopCheckpoint{RunID: id, Turn: 1, State: session.Value(`{"step":"after_tool"}`)},
		}
		end := start.Add(time.Minute)
		done := session.Change{
			UpsertRuns:      []session.Run{{RunID: id, Status: session.RunCompleted, StartedAt: start, EndedAt: &end, ToolCallsCount: int64(i)}},
			DropCheckpoints: []string{id},
		}
		for _, c := range []*session.Change{&turn, &done} {
			if _, err := s.Commit(ctx, "agent", c, session.CommitOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}

	head := func(s *Store) ([]session.Run, int64) {
		t.Helper()
		before := read.Load()
		st, _, err := s.Head(ctx, "agent")
		if err != nil {
			t.Fatal(err)
		}
		return st.Snapshot.Runs, read.Load() - before
	}
	full, err := s.Load(ctx, "agent", 0)
	if err != nil {
		t.Fatal(err)
	}
	want := full.Snapshot.Runs
	if len(want) != runs {
		t.Fatalf("%d runs, want %d", len(want), runs)
	}
	got, n := head(s)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Head after the commits answers runs %+v, want %+v", got[:2], want[:2])
	}
	if n > 16<<10 {
		t.Fatalf("Head after the commits read %d bytes for %d runs, want at most 16 KiB", n, runs)
	}
	// The caller owns what it was given.
	*got[0].EndedAt = time.Time{}
	got[1].Status = "scribbled"
	if again, _ := head(s); !reflect.DeepEqual(again, want) {
		t.Fatalf("Head answers runs %+v after its caller changed its last answer, want %+v", again[:2], want[:2])
	}

	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open()
	defer s.Close()
	if got, _ := head(s); !reflect.DeepEqual(got, want) {
		t.Fatalf("Head after a reopen answers runs %+v, want %+v", got[:2], want[:2])
	}
	got, n = head(s)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Head again after a reopen answers runs %+v, want %+v", got[:2], want[:2])
	}
	if n > 16<<10 {
		t.Fatalf("Head again after a reopen read %d bytes for %d runs, want at most 16 KiB", n, runs)
	}
}
