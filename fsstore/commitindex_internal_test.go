package fsstore

import (
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
				c.UpsertRuns = []session.Run{{RunID: runs.Draw(rt, "run"), Status: rapid.SampledFrom([]string{"running", "completed"}).Draw(rt, "status"), StartedAt: base}}
				c.UpsertVerifications = []session.Verification{{ID: ids.Draw(rt, "verif"), Checks: []session.Check{{Name: "t", Status: "passed"}}}}
				c.UpsertSubagentTasks = []session.SubagentTask{{TaskID: ids.Draw(rt, "task"), Status: "done"}}
			case 7:
				cp := &session.LoopCheckpoint{RunID: runs.Draw(rt, "cprun"), Turn: int64(i), State: session.Value(`{"s":1}`),
					Usage: session.Usage{InputTokens: 3, Cost: 0.25}}
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
	if !reflect.DeepEqual(sf.t, replayed) {
		t.Fatalf("index after commit generation %d differs from replay:\n commit %+v\n replay %+v", sf.t.gen, *sf.t, *replayed)
	}
}
