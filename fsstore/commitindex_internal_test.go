package fsstore

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"reflect"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/cairn-dev/cairn/session"
)

// TestCommitIndexEqualsReplay checks that the index a commit folds in from
// what its encoder took of each record (indexValue) is the index replay
// builds by parsing the log's records back (parseRecord), after every
// commit of random sequences of changes touching every kind of record a
// commit writes, including checkpoints whose time is not in UTC (which
// indexValue leaves to the parser).
func TestCommitIndexEqualsReplay(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		dir, err := os.MkdirTemp(t.TempDir(), "idx")
		if err != nil {
			rt.Fatal(err)
		}
		// No compaction: the replayed log is then the commits as written.
		s, err := Open(dir, Options{CompactMinBytes: 1 << 40, IndexCheckpointBytes: -1})
		if err != nil {
			rt.Fatal(err)
		}
		defer s.Close()
		ctx := context.Background()
		ids := rapid.SampledFrom([]string{"a", "b", "c/d", "é"})
		runs := rapid.SampledFrom([]string{"r1", "r2", "r3"})
		zone := time.FixedZone("x", 2*3600)
		base := time.Date(2026, 12, 1, 10, 0, 0, 123456789, time.UTC)
		steps := rapid.IntRange(1, 12).Draw(rt, "steps")
		for i := range steps {
			c := &session.Change{}
			opts := session.CommitOptions{}
			switch rapid.IntRange(0, 9).Draw(rt, "kind") {
			case 0:
				n := rapid.IntRange(1, 5).Draw(rt, "msgs")
				for j := range n {
					size := rapid.IntRange(0, 20000).Draw(rt, "size")
					c.AppendMessages = append(c.AppendMessages, session.Value(fmt.Sprintf(`{"i":%d,"t":"%0*d"}`, j, size, 0)))
				}
			case 1:
				c.TruncateMessages = new(int64)
				*c.TruncateMessages = int64(rapid.IntRange(0, 6).Draw(rt, "keep"))
				c.AppendMessages = []session.Value{session.Value(`"after"`)}
			case 2:
				for j := range rapid.IntRange(1, 3).Draw(rt, "traces") {
					tr := session.Trace{Seq: uint64(j), Time: base, Type: "tool", Data: session.Value(`{"x":1}`)}
					if rapid.Bool().Draw(rt, "traceRun") {
						tr.RunID = runs.Draw(rt, "traceRunID")
					}
					c.AppendTraces = append(c.AppendTraces, tr)
				}
			case 3:
				a := session.Artifact{ID: ids.Draw(rt, "art"), Kind: "k"}
				if rapid.Bool().Draw(rt, "data") {
					a.Data = []byte(rapid.StringN(1, 64, -1).Draw(rt, "bytes"))
				} else {
					a.Path = "p/q"
				}
				c.PutArtifacts = []session.Artifact{a}
				if rapid.Bool().Draw(rt, "meta") {
					c.PutArtifacts[0].Metadata = session.Value(`{"m":1}`)
				}
			case 4:
				c.DeleteArtifacts = []string{ids.Draw(rt, "del")}
			case 5:
				v := session.Value(`"v"`)
				if rapid.Bool().Draw(rt, "null") {
					v = session.Value(` null `)
				}
				c.Metadata = map[string]session.Value{ids.Draw(rt, "key"): v, "other": session.Value(`1`)}
			case 6:
				r := session.Run{RunID: runs.Draw(rt, "run"), Status: rapid.SampledFrom([]string{"running", "completed"}).Draw(rt, "status"), StartedAt: base,
					Usage: session.Usage{OutputTokens: 9, Cost: 1.5}}
				if rapid.Bool().Draw(rt, "unstarted") {
					r.StartedAt = time.Time{} // encoded as null
				}
				if rapid.Bool().Draw(rt, "ended") {
					end := base.Add(time.Second)
					r.EndedAt = &end
				}
				if rapid.Bool().Draw(rt, "runZone") {
					// Not UTC: the record is read back, not remembered.
					r.StartedAt = base.In(zone)
					opts.Normalized = true
				}
				c.UpsertRuns = []session.Run{r}
				if rapid.Bool().Draw(rt, "files") {
					c.Files = &session.ManifestRef{ID: ids.Draw(rt, "manifest"), Clock: "c:1", Entries: 4}
				}
				c.UpsertVerifications = []session.Verification{{ID: ids.Draw(rt, "verif"), Checks: []session.Check{{Name: "t", Status: "passed"}}}}
				c.UpsertSubagentTasks = []session.SubagentTask{{TaskID: ids.Draw(rt, "task"), Status: "done"}}
			case 7:
				cp := &session.LoopCheckpoint{RunID: runs.Draw(rt, "cprun"), Turn: int64(i),
					Usage: session.Usage{InputTokens: 3, Cost: 0.25}}
				switch rapid.IntRange(0, 2).Draw(rt, "state") {
				case 1:
					cp.State = session.Value(`{"s":1}`)
				case 2:
					// Past memoStateMax: read back.
					cp.State = session.Value(fmt.Sprintf(`"%0*d"`, memoStateMax, 0))
				}
				switch rapid.IntRange(0, 2).Draw(rt, "cptime") {
				case 1:
					cp.CreatedAt = base
				case 2:
					// Not UTC: committed as normalised, so the time
					// reaches the store as it is.
					cp.CreatedAt = base.In(zone)
					opts.Normalized = true
				}
				if rapid.Bool().Draw(rt, "files") {
					cp.Files = &session.ManifestRef{ID: "m", Entries: 2}
				}
				c.Checkpoint = cp
				c.AppendMessages = []session.Value{session.Value(`{"turn":1}`)}
			case 8:
				c.DropCheckpoints = []string{runs.Draw(rt, "drop")}
			case 9:
				c.Replace = &session.Snapshot{Messages: []session.Value{session.Value(`"fresh"`)},
					Workspace: &session.Workspace{}, Agent: map[string]session.Value{"name": session.Value(`"x"`)},
					Handoff: &session.Handoff{Done: []string{"d"}}, Runtime: &session.Runtime{}, Files: &session.ManifestRef{ID: "f"}}
			}
			if _, err := s.Commit(ctx, "s", c, opts); err != nil {
				switch session.CodeOf(err) {
				case session.CodeInvalidArgument, session.CodeNotFound, session.CodeConflict:
					continue // a change the store refuses changes nothing
				}
				rt.Fatalf("commit %d: %v", i, err)
			}
			checkIndexIsReplay(rt, s, "s")
			checkHeadMemo(rt, s, "s")
		}
	})
}

// checkIndexIsReplay compares session id's index in s with the index
// built by replaying its log file as it is on disk.
func checkIndexIsReplay(t interface {
	Helper()
	Fatalf(string, ...any)
}, s *Store, id string) {
	t.Helper()
	sf, err := s.lockSession(id)
	if err != nil {
		t.Fatalf("lock: %v", err)
	}
	defer sf.mu.Unlock()
	data, err := os.ReadFile(sf.path)
	if err != nil {
		t.Fatalf("read log: %v", err)
	}
	groups, valid, err := scan(data[:sf.size])
	if err != nil || valid != sf.size {
		t.Fatalf("scan: valid %d of %d, %v", valid, sf.size, err)
	}
	replayed := newTracker()
	for _, g := range groups {
		if err := replayed.observe(g, 0); err != nil {
			t.Fatalf("replay: %v", err)
		}
	}
	live := *sf.t
	live.memo = nil // what replay cannot have: see checkHeadMemo
	live.runVals, replayed.runVals = nil, nil
	if !reflect.DeepEqual(&live, replayed) {
		t.Fatalf("index after commit generation %d differs from replay:\n commit %+v\n replay %+v", sf.t.gen, live, *replayed)
	}
}

// checkHeadMemo compares Head of session id, answered in part from the
// last commit's memo and the runs kept decoded, with Head read wholly from
// the log.
func checkHeadMemo(t interface {
	Helper()
	Fatalf(string, ...any)
}, s *Store, id string) {
	t.Helper()
	ctx := context.Background()
	withMemo, sum1, err := s.Head(ctx, id)
	if err != nil {
		t.Fatalf("head: %v", err)
	}
	sf, err := s.lockSession(id)
	if err != nil {
		t.Fatalf("lock: %v", err)
	}
	memo, runVals := sf.t.memo, sf.t.runVals
	sf.t.memo, sf.t.runVals = nil, nil
	sf.mu.Unlock()
	read, sum2, err := s.Head(ctx, id)
	if err != nil {
		t.Fatalf("head without memo: %v", err)
	}
	sf.mu.Lock()
	sf.t.memo, sf.t.runVals = memo, runVals
	sf.mu.Unlock()
	if !reflect.DeepEqual(withMemo, read) || !reflect.DeepEqual(sum1, sum2) {
		t.Fatalf("head from the memo differs from the log's (%d memos):\n memo %+v\n log  %+v", len(memo), *withMemo.Snapshot, *read.Snapshot)
	}
}

// TestHeadAfterCommitFromMemo checks that Head right after a commit
// answers the run, checkpoint and manifest reference that commit wrote
// from what the commit encoded, without reading their records: with those
// records overwritten on disk, Head still gives the committed values.
func TestHeadAfterCommitFromMemo(t *testing.T) {
	s, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ctx := context.Background()
	for i := 1; i <= 3; i++ {
		c := &session.Change{
			AppendMessages: []session.Value{session.Value(`{"role":"user"}`)},
			UpsertRuns:     []session.Run{{RunID: "r1", Status: session.RunRunning}},
			Checkpoint:     &session.LoopCheckpoint{RunID: "r1", Turn: int64(i), State: session.Value(`{"turn":` + fmt.Sprint(i) + `}`)},
			Files:          &session.ManifestRef{ID: "m:" + fmt.Sprint(i), Entries: int64(i)},
		}
		if _, err := s.Commit(ctx, "agent", c, session.CommitOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	want, _, err := s.Head(ctx, "agent")
	if err != nil {
		t.Fatal(err)
	}
	sf, err := s.lockSession("agent")
	if err != nil {
		t.Fatal(err)
	}
	its := []item{sf.t.runs.at["r1"], sf.t.ckpts["r1"].events[2].at, sf.t.single[kindFiles]}
	path := sf.path
	sf.mu.Unlock()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range its {
		if _, err := f.WriteAt(bytes.Repeat([]byte{0xee}, int(it.fsz)), it.off()); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	got, _, err := s.Head(ctx, "agent")
	if err != nil {
		t.Fatalf("Head read the records the last commit wrote: %v", err)
	}
	if !reflect.DeepEqual(got, want) || string(got.Checkpoints["r1"].State) != `{"turn":3}` || got.Snapshot.Files.ID != "m:3" {
		t.Fatalf("Head after the commit:\n got  %+v\n want %+v", got, want)
	}
}
