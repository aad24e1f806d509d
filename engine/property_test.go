package engine_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/session"
)

// The property test drives the engine with random interleavings of save
// (snapshot), delta, beginRun, checkpoint, completeRun, resumeRun, fork and
// delete, and after every step compares everything observable with a
// simple in-memory model of the semantics the package documents.

type mRun struct {
	ID, Status, Parent string
	Usage, TC          int64
	Ended              bool
}

type mCP struct{ Turn, Count, Usage, TC int64 }

type mSess struct {
	Msgs []string
	Runs []mRun
	CPs  map[string]mCP
}

func (s *mSess) clone() *mSess {
	out := &mSess{Msgs: slices.Clone(s.Msgs), Runs: slices.Clone(s.Runs), CPs: map[string]mCP{}}
	for k, v := range s.CPs {
		out.CPs[k] = v
	}
	return out
}

func (s *mSess) run(id string) *mRun {
	for i := range s.Runs {
		if s.Runs[i].ID == id {
			return &s.Runs[i]
		}
	}
	return nil
}

// resumedFrom mirrors the engine: the checkpoint a pending successor
// resumed from.
func (s *mSess) resumedFrom(r *mRun) (mCP, bool) {
	if r.Parent == "" || r.Status != session.RunRunning {
		return mCP{}, false
	}
	if _, own := s.CPs[r.ID]; own {
		return mCP{}, false
	}
	p := s.run(r.Parent)
	if p == nil || p.Status != session.RunInterrupted {
		return mCP{}, false
	}
	cp, ok := s.CPs[r.Parent]
	return cp, ok
}

// superseded mirrors the engine: a run that was resumed (some run names it
// as parent), or a pending successor that a later resume of the same run
// replaced.
func (s *mSess) superseded(r *mRun) bool {
	last := func(parent string) string {
		out := ""
		for _, x := range s.Runs {
			if x.Parent == parent {
				out = x.ID
			}
		}
		return out
	}
	if last(r.ID) != "" {
		return true
	}
	return r.Parent != "" && last(r.Parent) != r.ID
}

type model struct {
	hist map[string][]*mSess // hist[sid][g-1] is generation g
}

func (m *model) cur(sid string) *mSess {
	h := m.hist[sid]
	if len(h) == 0 {
		return nil
	}
	return h[len(h)-1]
}

func (m *model) gen(sid string) uint64 { return uint64(len(m.hist[sid])) }

func (m *model) commit(sid string, s *mSess) uint64 {
	m.hist[sid] = append(m.hist[sid], s)
	return m.gen(sid)
}

func (m *model) recording(runID string) []string {
	var out []string
	for sid := range m.hist {
		if m.cur(sid).run(runID) != nil {
			out = append(out, sid)
		}
	}
	slices.Sort(out)
	return out
}

func (m *model) allRuns() []string {
	seen := map[string]bool{}
	var out []string
	for _, sid := range sortedSIDs(m) {
		for _, r := range m.cur(sid).Runs {
			if !seen[r.ID] {
				seen[r.ID] = true
				out = append(out, r.ID)
			}
		}
	}
	return out
}

func sortedSIDs(m *model) []string {
	var out []string
	for sid := range m.hist {
		out = append(out, sid)
	}
	slices.Sort(out)
	return out
}

// resolve mirrors locateRun for a call without a session hint: the session
// holding the run's checkpoint, else the only session recording it, else
// the only one where it is running. ambiguous when none of these decide.
func (m *model) resolve(runID string) (sid string, found, ambiguous bool) {
	for _, s := range sortedSIDs(m) {
		if _, ok := m.cur(s).CPs[runID]; ok {
			return s, true, false
		}
	}
	recs := m.recording(runID)
	switch len(recs) {
	case 0:
		return "", false, false
	case 1:
		return recs[0], true, false
	}
	var running []string
	for _, s := range recs {
		if m.cur(s).run(runID).Status == session.RunRunning {
			running = append(running, s)
		}
	}
	if len(running) == 1 {
		return running[0], true, false
	}
	return "", false, true
}

type harness struct {
	e       *engine.Engine
	m       *model
	ctx     context.Context
	next    int
	pool    []string
	lastErr string
}

func (h *harness) fresh(prefix string) string {
	h.next++
	return fmt.Sprintf("%s-%d", prefix, h.next)
}

func (h *harness) newMsgs(n int) []string {
	out := make([]string, n)
	for i := range out {
		h.next++
		if h.next%3 == 0 {
			out[i] = fmt.Sprintf("{\"m\":  %d,\n \"pad\": [1, 2]}", h.next) // not compact on purpose
		} else {
			out[i] = fmt.Sprintf(`{"m":%d}`, h.next)
		}
	}
	return out
}

func values(ss []string) []session.Value {
	out := make([]session.Value, len(ss))
	for i, s := range ss {
		out[i] = session.Value(s)
	}
	return out
}

func wantCodeT(t *rapid.T, what string, err error, code session.Code) {
	t.Helper()
	if got := session.CodeOf(err); got != code {
		t.Fatalf("%s: code %q (%v), want %q", what, got, err, code)
	}
}

func (h *harness) pickRun(t *rapid.T) string {
	runs := append(h.m.allRuns(), "ghost")
	return rapid.SampledFrom(runs).Draw(t, "run")
}

// pickHint picks the session to name for a run operation: none when the
// model can resolve the run unambiguously (sometimes), else a session that
// records it or any session of the pool.
func (h *harness) pickHint(t *rapid.T, runID string) string {
	_, _, ambiguous := h.m.resolve(runID)
	if !ambiguous && rapid.Bool().Draw(t, "no hint") {
		return ""
	}
	choices := append(h.m.recording(runID), h.pool...)
	return rapid.SampledFrom(choices).Draw(t, "hint")
}

func (h *harness) saveDelta(t *rapid.T) {
	sid := rapid.SampledFrom(h.pool).Draw(t, "sid")
	n := rapid.IntRange(0, 3).Draw(t, "n")
	mode := rapid.IntRange(0, 2).Draw(t, "expect mode")
	gen := h.m.gen(sid)
	var expect *uint64
	switch mode {
	case 1:
		expect = session.Expect(gen)
	case 2:
		// Stale: behind the session (when it has a generation to be
		// behind) or ahead of it.
		if gen > 0 && rapid.Bool().Draw(t, "behind") {
			expect = session.Expect(gen - 1 - rapid.Uint64Range(0, gen-1).Draw(t, "back"))
		} else {
			expect = session.Expect(gen + 1 + rapid.Uint64Range(0, 2).Draw(t, "off"))
		}
	}
	ms := h.newMsgs(n)
	res, err := h.e.Save(h.ctx, api.SaveRequest{SessionID: sid, ExpectGeneration: expect, Change: &session.Change{AppendMessages: values(ms)}})
	if mode == 2 {
		wantCodeT(t, "delta with stale expect", err, session.CodeConflict)
		return
	}
	wantCodeT(t, "delta", err, "")
	s := &mSess{CPs: map[string]mCP{}}
	if c := h.m.cur(sid); c != nil {
		s = c.clone()
	}
	s.Msgs = append(s.Msgs, ms...)
	if g := h.m.commit(sid, s); res.Generation != g || (expect != nil && res.Generation != *expect+1) {
		t.Fatalf("delta generation %d, model %d, expected %v", res.Generation, g, expect)
	}
}

func (h *harness) saveSnapshot(t *rapid.T) {
	sid := rapid.SampledFrom(h.pool).Draw(t, "sid")
	cur := h.m.cur(sid)
	s := &mSess{CPs: map[string]mCP{}}
	if cur != nil {
		s = cur.clone()
	}
	keep := rapid.IntRange(0, len(s.Msgs)).Draw(t, "keep")
	s.Msgs = append(s.Msgs[:keep:keep], h.newMsgs(rapid.IntRange(0, 2).Draw(t, "add"))...)
	if len(s.Runs) > 0 && rapid.Bool().Draw(t, "end a run") {
		i := rapid.IntRange(0, len(s.Runs)-1).Draw(t, "which")
		s.Runs[i].Status = rapid.SampledFrom([]string{session.RunCompleted, session.RunFailed, session.RunInterrupted}).Draw(t, "status")
	}
	snap := &session.Snapshot{Messages: values(s.Msgs)}
	ended := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, r := range s.Runs {
		sr := session.Run{RunID: r.ID, Status: r.Status, ParentRunID: r.Parent, Usage: session.Usage{TotalTokens: r.Usage}, ToolCallsCount: r.TC}
		if r.Ended {
			sr.EndedAt = &ended
		}
		snap.Runs = append(snap.Runs, sr)
	}
	res, err := h.e.Save(h.ctx, api.SaveRequest{SessionID: sid, Snapshot: snap})
	wantCodeT(t, "snapshot", err, "")
	for id, cp := range s.CPs {
		r := s.run(id)
		live := r != nil && (r.Status == session.RunRunning || r.Status == session.RunInterrupted)
		if !live || cp.Count > int64(len(s.Msgs)) {
			delete(s.CPs, id)
		}
	}
	if g := h.m.commit(sid, s); res.Generation != g {
		t.Fatalf("snapshot generation %d, model %d", res.Generation, g)
	}
}

func (h *harness) beginRun(t *rapid.T) {
	sid := rapid.SampledFrom(h.pool).Draw(t, "sid")
	id := ""
	switch rapid.IntRange(0, 2).Draw(t, "id mode") {
	case 1:
		id = h.fresh("x")
	case 2:
		if runs := h.m.allRuns(); len(runs) > 0 {
			id = rapid.SampledFrom(runs).Draw(t, "existing id")
		}
	}
	res, err := h.e.BeginRun(h.ctx, api.BeginRunRequest{SessionID: sid, RunID: id})
	switch {
	case id != "" && len(h.m.recording(id)) > 0:
		wantCodeT(t, "begin with taken id", err, session.CodeConflict)
		return
	case h.m.cur(sid) == nil:
		wantCodeT(t, "begin in missing session", err, session.CodeNotFound)
		return
	}
	wantCodeT(t, "begin", err, "")
	if id != "" && res.RunID != id {
		t.Fatalf("begin returned %q, asked for %q", res.RunID, id)
	}
	if len(h.m.recording(res.RunID)) > 0 {
		t.Fatalf("begin assigned an id already in use: %q", res.RunID)
	}
	s := h.m.cur(sid).clone()
	s.Runs = append(s.Runs, mRun{ID: res.RunID, Status: session.RunRunning})
	if g := h.m.commit(sid, s); res.Generation != g {
		t.Fatalf("begin generation %d, model %d", res.Generation, g)
	}
}

// target mirrors the engine's choice of session for a run operation and
// the errors on the way; "" code means proceed with the returned session.
func (h *harness) target(runID, hint string) (string, session.Code) {
	sid := hint
	if sid == "" {
		s, found, _ := h.m.resolve(runID)
		if !found {
			return "", session.CodeNotFound
		}
		sid = s
	}
	cur := h.m.cur(sid)
	if cur == nil {
		return "", session.CodeNotFound
	}
	if cur.run(runID) == nil {
		if hint != "" && len(h.m.recording(runID)) > 0 {
			return "", session.CodeNotOwner
		}
		return "", session.CodeNotFound
	}
	return sid, ""
}

func (h *harness) checkpoint(t *rapid.T) {
	runID := h.pickRun(t)
	hint := h.pickHint(t, runID)
	var prev int64 = -1
	if sid, code := h.target(runID, hint); code == "" {
		s := h.m.cur(sid)
		if cp, ok := s.CPs[runID]; ok {
			prev = cp.Turn
		} else if cp, ok := s.resumedFrom(s.run(runID)); ok {
			prev = cp.Turn
		}
	}
	turn := prev + int64(rapid.IntRange(0, 2).Draw(t, "turn step"))
	if prev < 0 {
		turn = int64(rapid.IntRange(0, 3).Draw(t, "first turn"))
	}
	ms := h.newMsgs(rapid.IntRange(0, 2).Draw(t, "n"))
	usage := int64(rapid.IntRange(0, 100).Draw(t, "usage"))
	tc := int64(rapid.IntRange(0, 5).Draw(t, "tool calls"))
	res, err := h.e.Checkpoint(h.ctx, api.CheckpointRequest{RunID: runID, SessionID: hint, Turn: turn, NewMessages: values(ms),
		Usage: session.Usage{TotalTokens: usage}, ToolCallsCount: tc, State: session.Value(fmt.Sprintf(`{"turn":%d}`, turn))})

	sid, code := h.target(runID, hint)
	if code != "" {
		wantCodeT(t, "checkpoint target", err, code)
		return
	}
	s := h.m.cur(sid).clone()
	r := s.run(runID)
	if s.superseded(r) {
		wantCodeT(t, "checkpoint of a superseded run", err, session.CodeNotOwner)
		return
	}
	if r.Status != session.RunRunning {
		wantCodeT(t, "checkpoint of a run that is not running", err, session.CodeConflict)
		return
	}
	if turn <= prev {
		wantCodeT(t, "checkpoint turn not increasing", err, session.CodeInvalidArgument)
		return
	}
	wantCodeT(t, "checkpoint", err, "")
	if _, ok := s.resumedFrom(r); ok {
		delete(s.CPs, r.Parent)
	}
	s.Msgs = append(s.Msgs, ms...)
	r.Usage, r.TC = usage, tc
	s.CPs[runID] = mCP{Turn: turn, Count: int64(len(s.Msgs)), Usage: usage, TC: tc}
	if g := h.m.commit(sid, s); res.Generation != g || res.MessageCount != int64(len(s.Msgs)) {
		t.Fatalf("checkpoint = %+v, model generation %d, %d messages", res, g, len(s.Msgs))
	}
}

func (h *harness) complete(t *rapid.T) {
	runID := h.pickRun(t)
	hint := h.pickHint(t, runID)
	status := rapid.SampledFrom([]string{session.RunCompleted, session.RunFailed, session.RunInterrupted, session.RunRunning}).Draw(t, "status")
	res, err := h.e.CompleteRun(h.ctx, api.CompleteRunRequest{RunID: runID, SessionID: hint, Status: status})
	if status == session.RunRunning {
		wantCodeT(t, "complete as running", err, session.CodeInvalidArgument)
		return
	}
	sid, code := h.target(runID, hint)
	if code != "" {
		wantCodeT(t, "complete target", err, code)
		return
	}
	s := h.m.cur(sid).clone()
	r := s.run(runID)
	if s.superseded(r) {
		wantCodeT(t, "complete a superseded run", err, session.CodeNotOwner)
		return
	}
	_, own := s.CPs[runID]
	if r.Status == status && r.Ended && !own {
		wantCodeT(t, "complete again", err, "")
		if res.Generation != h.m.gen(sid) {
			t.Fatalf("idempotent complete returned generation %d, model %d", res.Generation, h.m.gen(sid))
		}
		return
	}
	if r.Status == session.RunCompleted || r.Status == session.RunFailed {
		wantCodeT(t, "complete an ended run differently", err, session.CodeConflict)
		return
	}
	wantCodeT(t, "complete", err, "")
	if own {
		delete(s.CPs, runID)
	} else if _, ok := s.resumedFrom(r); ok {
		delete(s.CPs, r.Parent)
	}
	r.Status, r.Ended = status, true
	if g := h.m.commit(sid, s); res.Generation != g {
		t.Fatalf("complete generation %d, model %d", res.Generation, g)
	}
}

func (h *harness) resume(t *rapid.T) {
	runID := h.pickRun(t)
	hint := ""
	if rapid.Bool().Draw(t, "resume hint") {
		hint = rapid.SampledFrom(append(h.m.recording(runID), h.pool...)).Draw(t, "hint")
	}
	newID := ""
	switch rapid.IntRange(0, 3).Draw(t, "new id mode") {
	case 1:
		newID = h.fresh("x")
	case 2:
		newID = rapid.SampledFrom(append(h.m.allRuns(), "ghost")).Draw(t, "existing new id")
	case 3: // the pending successor, for the idempotent retry
		for _, sid := range sortedSIDs(h.m) {
			for _, r := range h.m.cur(sid).Runs {
				if r.Parent == runID {
					newID = r.ID
				}
			}
		}
	}
	res, err := h.e.ResumeRun(h.ctx, api.ResumeRunRequest{RunID: runID, SessionID: hint, NewRunID: newID})

	if newID == runID {
		wantCodeT(t, "resume onto itself", err, session.CodeInvalidArgument)
		return
	}
	sid := hint
	if sid == "" {
		for _, s := range sortedSIDs(h.m) {
			if _, ok := h.m.cur(s).CPs[runID]; ok {
				sid = s
			}
		}
		if sid == "" {
			wantCodeT(t, "resume without checkpoint", err, session.CodeNoCheckpoint)
			return
		}
	}
	cur := h.m.cur(sid)
	if cur == nil {
		wantCodeT(t, "resume in missing session", err, session.CodeNotFound)
		return
	}
	r := cur.run(runID)
	if r == nil {
		if hint != "" && len(h.m.recording(runID)) > 0 {
			wantCodeT(t, "resume through another session", err, session.CodeNotOwner)
		} else {
			wantCodeT(t, "resume unknown run", err, session.CodeNoCheckpoint)
		}
		return
	}
	cp, ok := cur.CPs[runID]
	if !ok || r.Status == session.RunCompleted || r.Status == session.RunFailed {
		wantCodeT(t, "resume without checkpoint", err, session.CodeNoCheckpoint)
		return
	}
	idempotent := false
	if newID != "" {
		if ex := cur.run(newID); ex != nil {
			_, exCP := cur.CPs[newID]
			if ex.Parent == runID && ex.Status == session.RunRunning && !exCP {
				idempotent = true
			} else {
				wantCodeT(t, "resume onto a taken id in the session", err, session.CodeConflict)
				return
			}
		} else if len(h.m.recording(newID)) > 0 {
			wantCodeT(t, "resume onto an id taken elsewhere", err, session.CodeConflict)
			return
		}
	}
	wantCodeT(t, "resume", err, "")
	if res.ResumedFrom != runID || res.SessionID != sid || res.Turn != cp.Turn || res.Usage.TotalTokens != cp.Usage || res.ToolCallsCount != cp.TC {
		t.Fatalf("resume = %+v, model checkpoint %+v in %s", res, cp, sid)
	}
	if int64(len(res.Messages)) != cp.Count {
		t.Fatalf("resume returned %d messages, boundary %d", len(res.Messages), cp.Count)
	}
	for i, m := range res.Messages {
		if string(m) != cur.Msgs[i] {
			t.Fatalf("resume message %d = %q, model %q", i, m, cur.Msgs[i])
		}
	}
	if newID != "" && res.RunID != newID {
		t.Fatalf("resume returned run %q, asked for %q", res.RunID, newID)
	}
	if idempotent {
		return
	}
	if len(h.m.recording(res.RunID)) > 0 {
		t.Fatalf("resume assigned an id already in use: %q", res.RunID)
	}
	s := cur.clone()
	for i := range s.Runs {
		x := &s.Runs[i]
		_, xcp := s.CPs[x.ID]
		if x.ID == runID || (x.Parent == runID && x.Status == session.RunRunning && !xcp) {
			x.Status, x.Ended = session.RunInterrupted, true
		}
	}
	s.Runs = append(s.Runs, mRun{ID: res.RunID, Status: session.RunRunning, Parent: runID, Usage: cp.Usage, TC: cp.TC})
	h.m.commit(sid, s)
}

func (h *harness) fork(t *rapid.T) {
	src := rapid.SampledFrom(h.pool).Draw(t, "src")
	dst := rapid.SampledFrom(append([]string{h.fresh("f")}, h.pool...)).Draw(t, "dst")
	gen := h.m.gen(src)
	at := uint64(0)
	if rapid.Bool().Draw(t, "at generation") {
		at = rapid.Uint64Range(1, gen+1).Draw(t, "at")
	}
	res, err := h.e.Fork(h.ctx, api.ForkRequest{SessionID: src, NewID: dst, AtGeneration: at})
	switch {
	case gen == 0 || at > gen:
		wantCodeT(t, "fork of a missing session or generation", err, session.CodeNotFound)
		return
	case h.m.gen(dst) > 0:
		wantCodeT(t, "fork onto an existing id", err, session.CodeConflict)
		return
	}
	wantCodeT(t, "fork", err, "")
	from := h.m.cur(src)
	if at > 0 {
		from = h.m.hist[src][at-1]
	}
	s := from.clone()
	s.CPs = map[string]mCP{}
	for i := range s.Runs {
		if s.Runs[i].Status == session.RunRunning {
			s.Runs[i].Status = session.RunInterrupted
		}
	}
	if !slices.Contains(h.pool, dst) {
		h.pool = append(h.pool, dst)
	}
	if g := h.m.commit(dst, s); res.Generation != g || g != 1 {
		t.Fatalf("fork generation %d, model %d", res.Generation, g)
	}
}

func (h *harness) del(t *rapid.T) {
	sid := rapid.SampledFrom(h.pool).Draw(t, "sid")
	err := h.e.Delete(h.ctx, sid)
	if h.m.gen(sid) == 0 {
		wantCodeT(t, "delete missing", err, session.CodeNotFound)
		return
	}
	wantCodeT(t, "delete", err, "")
	delete(h.m.hist, sid)
}

// check compares everything observable with the model.
func (h *harness) check(t *rapid.T) {
	sums, err := h.e.List(h.ctx)
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	sids := sortedSIDs(h.m)
	if len(sums) != len(sids) {
		t.Fatalf("list has %d sessions, model %d (%v)", len(sums), len(sids), sids)
	}
	for i, sum := range sums {
		sid := sids[i]
		s := h.m.cur(sid)
		if sum.SessionID != sid || sum.Generation != h.m.gen(sid) || sum.MessageCount != int64(len(s.Msgs)) || sum.Checkpoints != len(s.CPs) {
			t.Fatalf("summary %+v, model %s gen %d msgs %d cps %d", sum, sid, h.m.gen(sid), len(s.Msgs), len(s.CPs))
		}
		res, err := h.e.ResumeSession(h.ctx, sid)
		if err != nil {
			t.Fatalf("resume session %s: %v", sid, err)
		}
		snap := res.Snapshot
		if len(snap.Messages) != len(s.Msgs) {
			t.Fatalf("%s: %d messages, model %d", sid, len(snap.Messages), len(s.Msgs))
		}
		for j, m := range snap.Messages {
			if !bytes.Equal(m, []byte(s.Msgs[j])) {
				t.Fatalf("%s: message %d = %q, model %q", sid, j, m, s.Msgs[j])
			}
		}
		if len(snap.Runs) != len(s.Runs) {
			t.Fatalf("%s: runs %+v, model %+v", sid, snap.Runs, s.Runs)
		}
		for j, r := range snap.Runs {
			mr := s.Runs[j]
			if r.RunID != mr.ID || r.Status != mr.Status || r.ParentRunID != mr.Parent || r.Usage.TotalTokens != mr.Usage || r.ToolCallsCount != mr.TC || (r.EndedAt != nil) != mr.Ended {
				t.Fatalf("%s: run %+v, model %+v", sid, r, mr)
			}
		}
		var want []string
		for _, r := range s.Runs {
			if cp, ok := s.CPs[r.ID]; ok && (r.Status == session.RunRunning || r.Status == session.RunInterrupted) {
				want = append(want, fmt.Sprintf("%s@%d/%d/%d/%d", r.ID, cp.Turn, cp.Count, cp.Usage, cp.TC))
			}
		}
		var got []string
		for _, ir := range res.InterruptedRuns {
			got = append(got, fmt.Sprintf("%s@%d/%d/%d/%d", ir.RunID, ir.Turn, ir.MessageCount, ir.Usage.TotalTokens, ir.ToolCallsCount))
		}
		if !slices.Equal(got, want) {
			t.Fatalf("%s: interrupted runs %v, model %v", sid, got, want)
		}
	}
}

func TestProperty(t *testing.T) {
	forEachStore(t, func(t *testing.T, f storeFactory) {
		parent := t.TempDir()
		rapid.Check(t, func(rt *rapid.T) {
			dir, err := os.MkdirTemp(parent, "case")
			if err != nil {
				rt.Fatal(err)
			}
			defer os.RemoveAll(dir)
			st, err := f.open(dir)
			if err != nil {
				rt.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			clock := &fakeClock{t: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
			ids := &seqIDs{}
			h := &harness{
				e:    engine.New(st, engine.Options{Now: clock.Now, NewRunID: ids.Next}),
				m:    &model{hist: map[string][]*mSess{}},
				ctx:  ctx,
				pool: []string{"a", "b", "c"},
			}
			defer h.e.Close()
			rt.Repeat(map[string]func(*rapid.T){
				"delta":       h.saveDelta,
				"snapshot":    h.saveSnapshot,
				"beginRun":    h.beginRun,
				"beginRun2":   h.beginRun,
				"checkpoint":  h.checkpoint,
				"checkpoint2": h.checkpoint,
				"complete":    h.complete,
				"resumeRun":   h.resume,
				"resumeRun2":  h.resume,
				"fork":        h.fork,
				"delete":      h.del,
				"":            h.check,
			})
		})
	})
}
