package session_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/cairn-dev/cairn/session"
)

// genSnapshot draws a small snapshot whose records come from narrow pools,
// so that two draws often share prefixes and ids.
func genSnapshot(t *rapid.T, label string) *session.Snapshot {
	s := &session.Snapshot{}
	for i, n := 0, rapid.IntRange(0, 4).Draw(t, label+"msgs"); i < n; i++ {
		s.Messages = append(s.Messages, session.Value(fmt.Sprintf(`{"m":%d}`, i+rapid.IntRange(0, 1).Draw(t, label+"mv"))))
	}
	for i, n := 0, rapid.IntRange(0, 2).Draw(t, label+"traces"); i < n; i++ {
		s.Traces = append(s.Traces, session.Trace{Seq: uint64(i), Type: rapid.SampledFrom([]string{"a", "b"}).Draw(t, label+"tt")})
	}
	for i, n := 0, rapid.IntRange(0, 3).Draw(t, label+"runs"); i < n; i++ {
		s.Runs = append(s.Runs, session.Run{RunID: fmt.Sprint("r", i), Status: rapid.SampledFrom([]string{session.RunRunning, session.RunCompleted}).Draw(t, label+"rs")})
	}
	if rapid.Bool().Draw(t, label+"hasHandoff") {
		s.Handoff = &session.Handoff{Done: []string{rapid.SampledFrom([]string{"x", "y"}).Draw(t, label+"hd")}}
	}
	if rapid.Bool().Draw(t, label+"hasAgent") {
		s.Agent = map[string]session.Value{"model": session.Value(rapid.SampledFrom([]string{`"a"`, `"b"`}).Draw(t, label+"am"))}
	}
	s.Metadata = map[string]session.Value{}
	for _, k := range []string{"k1", "k2"} {
		if rapid.Bool().Draw(t, label+k) {
			s.Metadata[k] = session.Value(rapid.SampledFrom([]string{`1`, `2`}).Draw(t, label+k+"v"))
		}
	}
	return s
}

// genNext draws the snapshot to diff against cur. Two independent draws
// rarely admit a delta (every list of cur must be a prefix of next's, no
// record may disappear), so most draws are an edit of cur that a delta can
// always express: appended messages, traces and runs, changed run statuses,
// a replaced handoff or agent, changed, added and removed metadata keys. The
// rest are independent draws, which exercise Diff's refusals.
func genNext(t *rapid.T, cur *session.Snapshot) *session.Snapshot {
	if rapid.IntRange(0, 3).Draw(t, "independent") == 0 {
		return genSnapshot(t, "next")
	}
	next := session.CloneSnapshot(cur)
	for i, n := 0, rapid.IntRange(0, 2).Draw(t, "addMsgs"); i < n; i++ {
		next.Messages = append(next.Messages, session.Value(fmt.Sprintf(`{"m":%d}`, len(next.Messages)+i)))
	}
	for i, n := 0, rapid.IntRange(0, 2).Draw(t, "addTraces"); i < n; i++ {
		next.Traces = append(next.Traces, session.Trace{Seq: uint64(len(next.Traces)), Type: "c"})
	}
	for i := range next.Runs {
		next.Runs[i].Status = rapid.SampledFrom([]string{session.RunRunning, session.RunCompleted}).Draw(t, "runStatus")
	}
	for i, n := 0, rapid.IntRange(0, 2).Draw(t, "addRuns"); i < n; i++ {
		next.Runs = append(next.Runs, session.Run{RunID: fmt.Sprint("r", len(next.Runs)), Status: session.RunRunning})
	}
	if next.Handoff == nil || rapid.Bool().Draw(t, "newHandoff") {
		next.Handoff = &session.Handoff{Done: []string{rapid.SampledFrom([]string{"x", "y"}).Draw(t, "nextHd")}}
	}
	if next.Agent == nil || rapid.Bool().Draw(t, "newAgent") {
		next.Agent = map[string]session.Value{"model": session.Value(rapid.SampledFrom([]string{`"a"`, `"b"`}).Draw(t, "nextAm"))}
	}
	next.Metadata = map[string]session.Value{}
	for _, k := range []string{"k1", "k2", "k3"} {
		if rapid.Bool().Draw(t, "next"+k) {
			next.Metadata[k] = session.Value(rapid.SampledFrom([]string{`1`, `2`}).Draw(t, "next"+k+"v"))
		}
	}
	return next
}

// TestDiffAgreesWithReplace checks that whenever Diff offers a delta,
// applying it gives exactly what replacing with the whole snapshot gives.
// It fails when no draw produced a delta, so it cannot pass vacuously;
// genNext makes that all but impossible (each of rapid's draws, 20 under
// -short, is a delta-admitting edit three times in four).
func TestDiffAgreesWithReplace(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	deltas := 0
	defer func() {
		if deltas == 0 {
			t.Fatal("no draw produced a delta: the property was never checked")
		}
	}()
	rapid.Check(t, func(t *rapid.T) {
		cur := genSnapshot(t, "cur")
		next := genNext(t, cur)
		base := &session.State{}
		session.Apply(base, "s", &session.Change{Replace: cur}, 1, now)
		d, ok := session.Diff(base.Snapshot, next)
		if !ok {
			return
		}
		deltas++
		viaReplace := session.CloneState(base)
		session.Apply(viaReplace, "s", &session.Change{Replace: session.CloneSnapshot(next)}, 2, now)
		viaDelta := session.CloneState(base)
		if err := session.Normalize(d); err != nil {
			t.Fatalf("delta does not validate: %v", err)
		}
		session.Apply(viaDelta, "s", d, 2, now)
		a, _ := json.Marshal(viaReplace)
		b, _ := json.Marshal(viaDelta)
		if string(a) != string(b) {
			t.Fatalf("delta and replace disagree:\nreplace %s\ndelta   %s", a, b)
		}
	})
}

func TestDiffRefusesWhatADeltaCannotSay(t *testing.T) {
	cur := &session.Snapshot{Messages: []session.Value{session.Value(`1`), session.Value(`2`)}, Runs: []session.Run{{RunID: "a"}, {RunID: "b"}}, Handoff: &session.Handoff{}}
	for name, next := range map[string]*session.Snapshot{
		"message removed": {Messages: []session.Value{session.Value(`1`)}, Runs: cur.Runs, Handoff: cur.Handoff},
		"message changed": {Messages: []session.Value{session.Value(`1`), session.Value(`3`)}, Runs: cur.Runs, Handoff: cur.Handoff},
		"runs reordered":  {Messages: cur.Messages, Runs: []session.Run{{RunID: "b"}, {RunID: "a"}}, Handoff: cur.Handoff},
		"run removed":     {Messages: cur.Messages, Runs: []session.Run{{RunID: "a"}}, Handoff: cur.Handoff},
		"handoff removed": {Messages: cur.Messages, Runs: cur.Runs},
	} {
		if _, ok := session.Diff(cur, next); ok {
			t.Errorf("%s: Diff offered a delta", name)
		}
	}
	d, ok := session.Diff(cur, &session.Snapshot{Messages: append(append([]session.Value{}, cur.Messages...), session.Value(`3`)), Runs: cur.Runs, Handoff: cur.Handoff})
	if !ok || len(d.AppendMessages) != 1 || d.UpsertRuns != nil || d.Handoff != nil {
		t.Fatalf("append-only change: %+v %v", d, ok)
	}
}
