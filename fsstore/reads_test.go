package fsstore_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/cairn-dev/cairn/fsstore"
	"github.com/cairn-dev/cairn/session"
)

// TestReadsMatchFullRead is the property of the indexed log: over random
// histories of appends, truncations, replacements, artifact puts and
// deletes, checkpoints, compactions and reopens, every paged read returns
// exactly what a full replay of the log (Load) holds for the same range,
// and the same as the memory store given the same history.
func TestReadsMatchFullRead(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		dir := t.TempDir()
		open := func() *fsstore.Store {
			s, err := fsstore.Open(dir, fsstore.Options{CompactMinBytes: 1, MaxOpenLogs: 1})
			if err != nil {
				rt.Fatal(err)
			}
			return s
		}
		fs := open()
		defer func() { fs.Close() }()
		mem := session.NewMemStore()
		const id = "prop"
		seq := 0
		commit := func(c session.Change) {
			c2 := cloneChange(rt, c)
			_, errF := fs.Commit(bg, id, &c, session.CommitOptions{})
			_, errM := mem.Commit(bg, id, &c2, session.CommitOptions{})
			if session.CodeOf(errF) != session.CodeOf(errM) || (errF == nil) != (errM == nil) {
				rt.Fatalf("commit: file store %v, memory store %v", errF, errM)
			}
		}
		msg := func() session.Value {
			seq++
			return session.Value(fmt.Sprintf(`{"n":%d,"pad":%q}`, seq, strings.Repeat("p", rapid.IntRange(0, 9000).Draw(rt, "pad"))))
		}
		commit(session.Change{AppendMessages: []session.Value{msg()}})
		steps := rapid.IntRange(1, 25).Draw(rt, "steps")
		for i := 0; i < steps; i++ {
			head, err := mem.Load(bg, id, 0)
			if err != nil {
				rt.Fatal(err)
			}
			n := int64(len(head.Snapshot.Messages))
			switch rapid.IntRange(0, 9).Draw(rt, "op") {
			case 0, 1:
				var c session.Change
				for k := rapid.IntRange(1, 5).Draw(rt, "k"); k > 0; k-- {
					c.AppendMessages = append(c.AppendMessages, msg())
				}
				c.AppendTraces = []session.Trace{{Seq: uint64(seq), Type: "tool", RunID: rapid.SampledFrom([]string{"", "r1", "r2"}).Draw(rt, "run"), Data: msg()}}
				commit(c)
			case 2:
				cut := rapid.Int64Range(0, n).Draw(rt, "cut")
				commit(session.Change{TruncateMessages: &cut, AppendMessages: []session.Value{msg()}})
			case 3:
				aid := rapid.SampledFrom([]string{"a", "b", "c"}).Draw(rt, "art")
				commit(session.Change{PutArtifacts: []session.Artifact{{ID: aid, Data: []byte(msg()), Metadata: session.Value(`{"v":1}`)}}})
			case 4:
				aid := rapid.SampledFrom([]string{"a", "b", "c"}).Draw(rt, "art")
				commit(session.Change{DeleteArtifacts: []string{aid}})
			case 5:
				run := rapid.SampledFrom([]string{"r1", "r2"}).Draw(rt, "ckrun")
				commit(session.Change{
					UpsertRuns:     []session.Run{{RunID: run, Status: session.RunRunning}},
					AppendMessages: []session.Value{msg()},
					Checkpoint:     &session.LoopCheckpoint{RunID: run, Turn: int64(seq), State: msg()},
				})
			case 6:
				commit(session.Change{DropCheckpoints: []string{rapid.SampledFrom([]string{"r1", "r2"}).Draw(rt, "drop")}})
			case 7:
				snap := session.CloneSnapshot(head.Snapshot)
				snap.Messages = snap.Messages[:rapid.IntRange(0, len(snap.Messages)).Draw(rt, "keep")]
				snap.Metadata = map[string]session.Value{"k": session.Value(`"v"`)}
				commit(session.Change{Replace: snap})
			case 8:
				// conflict: a background compaction is running already.
				if err := fs.Compact(bg, id); err != nil && session.CodeOf(err) != session.CodeConflict {
					rt.Fatal(err)
				}
			case 9:
				fs.Close()
				fs = open()
			}
			checkReads(rt, fs, mem, id)
		}
	})
}

func cloneChange(t *rapid.T, c session.Change) session.Change {
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	var out session.Change
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func same(t *rapid.T, what string, got, want any) {
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	if string(g) != string(w) {
		t.Fatalf("%s:\n got %.2000s\nwant %.2000s", what, g, w)
	}
}

func checkReads(t *rapid.T, fs *fsstore.Store, mem *session.MemStore, id string) {
	full, err := fs.Load(bg, id, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := full.Snapshot
	memFull, _ := mem.Load(bg, id, 0)
	same(t, "full replay against memory store", want.Messages, memFull.Snapshot.Messages)
	total := int64(len(want.Messages))

	// A random range, then a walk of the whole list in small pages.
	from := rapid.Int64Range(0, total).Draw(t, "from")
	to := rapid.Int64Range(from, total).Draw(t, "to")
	q := session.Query{From: from, To: to}
	if to == total && rapid.Bool().Draw(t, "open") {
		q.To = 0
	}
	if q.To == 0 { // 0 means the end
		to = total
	}
	p, err := fs.Messages(bg, id, q)
	if err != nil {
		t.Fatal(err)
	}
	if p.Total != total || p.From != from || p.Next != to || p.More {
		t.Fatalf("page of %+v: total %d from %d next %d more %v; want %d %d %d", q, p.Total, p.From, p.Next, p.More, total, from, to)
	}
	same(t, fmt.Sprintf("messages [%d,%d)", from, to), p.Items, want.Messages[from:to])
	tail := rapid.Int64Range(1, 12).Draw(t, "tail")
	p, err = fs.Messages(bg, id, session.Query{Tail: tail})
	if err != nil {
		t.Fatal(err)
	}
	same(t, "tail", p.Items, want.Messages[max(total-tail, 0):])
	var walked []session.Value
	for next := int64(0); ; {
		p, err := fs.Messages(bg, id, session.Query{From: next, MaxBytes: 4000, Limit: 3})
		if err != nil {
			t.Fatal(err)
		}
		walked = append(walked, p.Items...)
		if !p.More {
			break
		}
		next = p.Next
	}
	same(t, "paged walk", orEmpty(walked), want.Messages)
	gen := rapid.Uint64Range(0, want.Generation).Draw(t, "since")
	pf, err := fs.Messages(bg, id, session.Query{SinceGeneration: gen})
	if err != nil {
		t.Fatal(err)
	}
	pm, _ := mem.Messages(bg, id, session.Query{SinceGeneration: gen})
	if pf.From != pm.From {
		t.Fatalf("since generation %d: file store from %d, memory store %d", gen, pf.From, pm.From)
	}
	same(t, "since", pf.Items, pm.Items)

	tr, err := fs.Traces(bg, id, session.Query{})
	if err != nil {
		t.Fatal(err)
	}
	same(t, "traces", tr.Items, orEmpty(want.Traces))

	arts, err := fs.Artifacts(bg, id, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	same(t, "artifacts", arts.Items, orEmpty(want.Artifacts))
	meta, err := fs.Artifacts(bg, id, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	for i := range meta.Items {
		if meta.Items[i].Data != nil || meta.Items[i].Metadata == nil && want.Artifacts[i].Metadata != nil {
			t.Fatalf("artifact listing %d: %+v", i, meta.Items[i])
		}
	}

	head, sum, err := fs.Head(bg, id)
	if err != nil {
		t.Fatal(err)
	}
	h := session.CloneSnapshot(want)
	h.Messages, h.Artifacts, h.Traces = []session.Value{}, nil, nil
	same(t, "head", head.Snapshot, h)
	same(t, "head checkpoints", &session.State{Checkpoints: head.Checkpoints}, &session.State{Checkpoints: full.Checkpoints})
	if sum.MessageCount != total || sum.ArtifactCount != int64(len(want.Artifacts)) || sum.TraceCount != int64(len(want.Traces)) || sum.Generation != want.Generation {
		t.Fatalf("summary %+v against %d messages, %d artifacts, %d traces", sum, total, len(want.Artifacts), len(want.Traces))
	}

	for _, run := range []string{"r1", "r2"} {
		ef, err := fs.RunEvents(bg, id, run, session.Query{})
		if err != nil {
			t.Fatal(err)
		}
		em, _ := mem.RunEvents(bg, id, run, session.Query{})
		if !reflect.DeepEqual(kinds(ef.Items), kinds(em.Items)) {
			t.Fatalf("run %s events: file store %v, memory store %v", run, kinds(ef.Items), kinds(em.Items))
		}
		// Each store stamps checkpoints with its own clock.
		for _, evs := range [][]session.RunEvent{ef.Items, em.Items} {
			for _, e := range evs {
				if e.Checkpoint != nil {
					e.Checkpoint.CreatedAt = time.Time{}
				}
			}
		}
		same(t, "run events", ef.Items, em.Items)
	}
}

func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return slices.Clip(s)
}

func kinds(evs []session.RunEvent) []string {
	out := []string{}
	for _, e := range evs {
		out = append(out, fmt.Sprintf("%s@%d", e.Kind, e.Generation))
	}
	return out
}
