//go:build cgo

package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/internal/pgtest"
)

// embeddedRun opens an embedded handle on a fresh workspace with one
// session and a run begun in it, as bench/bindings/python_turn.py does.
func embeddedRun(tb testing.TB) (uint64, string) {
	tb.Helper()
	return embeddedRunOn(tb, "")
}

// embeddedRunOn is embeddedRun on the store store names (cairn_open's
// "store": a postgres:// URL, or "" for the workspace's file store).
func embeddedRunOn(tb testing.TB, store string) (uint64, string) {
	return openRun(tb, fmt.Sprintf(`{"workspace":%q,"embedded":true,"store":%q}`, tb.TempDir(), store))
}

// openRun opens a handle with options (cairn_open's), closed at cleanup,
// saves session "agent" its system message and begins a run in it: the
// handle and the run's id.
func openRun(tb testing.TB, options string) (uint64, string) {
	tb.Helper()
	h, err := openHandle(options)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = closeHandle(h) })
	if _, err := call(h, "save", []byte(`{"session_id":"agent","change":{"append_messages":[{"role":"system","content":"you are an agent"}]}}`)); err != nil {
		tb.Fatal(err)
	}
	return h, beginRun(tb, h)
}

// beginRun begins a run in session "agent" of handle h: its id.
func beginRun(tb testing.TB, h uint64) string {
	tb.Helper()
	out, err := call(h, "beginRun", []byte(`{"session_id":"agent"}`))
	if err != nil {
		tb.Fatal(err)
	}
	var br struct {
		RunID string `json:"run_id"`
	}
	if err := json.Unmarshal(out, &br); err != nil {
		tb.Fatal(err)
	}
	return br.RunID
}

// rusage is this process's resource usage so far.
func rusage(tb testing.TB) syscall.Rusage {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return ru
}

// userTime is this process's user CPU time so far: the Go side's work
// besides the kernel's (the fdatasync, the pwrite).
func userTime(tb testing.TB) time.Duration {
	ru := rusage(tb)
	return time.Duration(ru.Utime.Nano())
}

// BenchmarkEmbeddedCheckpoint is one agent turn through libcairn in
// embedded mode, as cairn_call runs it (decode, the engine's checkpoint
// with its commit and fdatasync, the answer): allocations per turn and the
// user CPU per turn, which is the Go side's besides system calls.
func BenchmarkEmbeddedCheckpoint(b *testing.B) { benchEmbedded(b, "checkpoint", turnRequest) }

// BenchmarkCheckpointAmongSessions is BenchmarkEmbeddedCheckpoint in a
// workspace that also holds 0, 1,000 or 10,000 other sessions of one
// message: what a run operation that names no session costs per session
// of the store.
func BenchmarkCheckpointAmongSessions(b *testing.B) {
	for _, n := range []int{0, 1000, 10000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			h := embeddedAmong(b, n)
			benchCalls(b, h, beginRun(b, h), "checkpoint", turnRequest)
		})
	}
}

// BenchmarkBeginRunAmongSessions is a beginRun in session "agent" of a
// workspace that also holds 0, 1,000 or 10,000 other sessions of one
// message: what checking that the new run id is unused costs.
func BenchmarkBeginRunAmongSessions(b *testing.B) {
	for _, n := range []int{0, 1000, 10000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			h := embeddedAmong(b, n)
			benchCalls(b, h, "", "beginRun", func(string, int) []byte { return []byte(`{"session_id":"agent"}`) })
		})
	}
}

// embeddedAmong is embeddedRun's handle in a workspace that also holds n
// other sessions of one message.
func embeddedAmong(b *testing.B, n int) uint64 {
	h, _ := embeddedRun(b)
	for i := range n {
		if _, err := call(h, "save", fmt.Appendf(nil, `{"session_id":"other-%d","change":{"append_messages":[{"role":"user","content":"hi"}]}}`, i)); err != nil {
			b.Fatal(err)
		}
	}
	return h
}

// BenchmarkCheckpointAfterRuns is BenchmarkEmbeddedCheckpoint in a session
// that has had 0, 100 or 1,000 runs before, each a turn and a checkpoint
// then completed: what a run operation costs per run the session holds.
func BenchmarkCheckpointAfterRuns(b *testing.B) {
	for _, n := range []int{0, 100, 1000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			h, _ := embeddedRun(b)
			for range n {
				run := beginRun(b, h)
				for _, c := range []struct {
					method string
					req    []byte
				}{{"checkpoint", turnRequest(run, 1)}, {"completeRun", fmt.Appendf(nil, `{"run_id":%q,"status":"completed"}`, run)}} {
					if _, err := call(h, c.method, c.req); err != nil {
						b.Fatal(err)
					}
				}
			}
			benchCalls(b, h, beginRun(b, h), "checkpoint", turnRequest)
		})
	}
}

// BenchmarkEmbeddedPut is a LangGraph CairnSaver.put's save through
// libcairn in embedded mode (putRequest), measured as
// BenchmarkEmbeddedCheckpoint.
func BenchmarkEmbeddedPut(b *testing.B) {
	benchEmbedded(b, "save", func(_ string, i int) []byte { return putRequest(i) })
}

// benchEmbedded runs b.N calls of method in embedded mode, the i-th
// (from 1) with req(run, i), and reports the user CPU per call.
func benchEmbedded(b *testing.B, method string, req func(run string, i int) []byte) {
	h, run := embeddedRun(b)
	benchCalls(b, h, run, method, req)
}

// benchCalls is benchEmbedded on handle h and run run.
func benchCalls(b *testing.B, h uint64, run, method string, req func(run string, i int) []byte) {
	reqs := make([][]byte, b.N)
	for i := range reqs {
		reqs[i] = req(run, i+1)
	}
	b.ReportAllocs()
	b.ResetTimer()
	u0 := userTime(b)
	for i := 0; i < b.N; i++ {
		if _, err := call(h, method, reqs[i]); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64((userTime(b)-u0).Nanoseconds())/1000/float64(b.N), "user-cpu-us/op")
}

// TestEmbeddedParamsNotRetained: the fast decoders hand the engine the
// request's own bytes (values), so nothing may keep them past the call:
// cairn_call's request is the host's memory, freed or reused once the
// call returns. Each request is overwritten after its call, and what was
// committed must still read back as it was sent: the messages, the
// checkpoint's state (which Head answers from the last commit's memo) and
// an artifact's metadata; on the file store and on PostgreSQL.
func TestEmbeddedParamsNotRetained(t *testing.T) {
	t.Run("fsstore", func(t *testing.T) { testParamsNotRetained(t, "") })
	t.Run("pgstore", func(t *testing.T) { testParamsNotRetained(t, pgtest.Start(t).CreateDB("retained")) })
}

func testParamsNotRetained(t *testing.T, store string) {
	h, run := embeddedRunOn(t, store)
	scribble := func(b []byte) {
		for i := range b {
			b[i] = '#'
		}
	}
	do := func(method, req string) []byte {
		t.Helper()
		b := []byte(req)
		out, err := call(h, method, b)
		if err != nil {
			t.Fatalf("%s: %v", method, err)
		}
		scribble(b)
		return out
	}
	do("checkpoint", fmt.Sprintf(`{"run_id":%q,"turn":1,"new_messages":[{"role":"user","content":"first"},{"role":"assistant","content":"second"}],"usage":{"input_tokens":3},"tool_calls_count":1,"state":{"step":"after_tool"}}`, run))

	// Head answers the run from the memo of the last commit (this one).
	var got struct {
		Checkpoint struct {
			State json.RawMessage `json:"state"`
			Turn  int64           `json:"turn"`
		} `json:"checkpoint"`
	}
	if err := json.Unmarshal(do("run", fmt.Sprintf(`{"run_id":%q}`, run)), &got); err != nil {
		t.Fatal(err)
	}
	if string(got.Checkpoint.State) != `{"step":"after_tool"}` || got.Checkpoint.Turn != 1 {
		t.Errorf("run's checkpoint after the request was overwritten: state %s turn %d", got.Checkpoint.State, got.Checkpoint.Turn)
	}
	do("save", `{"session_id":"agent","change":{"append_messages":[{"m":"third"}],"put_artifacts":[{"id":"a1","kind":"note","data":"aGk=","metadata":{"k":"v"}}]}}`)
	msgs := string(do("messages", `{"session_id":"agent"}`))
	for _, want := range []string{`{"role":"user","content":"first"}`, `{"role":"assistant","content":"second"}`, `{"m":"third"}`} {
		if !strings.Contains(msgs, want) {
			t.Errorf("messages lack %s: %s", want, msgs)
		}
	}
	if arts := string(do("artifacts", `{"session_id":"agent"}`)); !strings.Contains(arts, `"metadata":{"k":"v"}`) {
		t.Errorf("artifact metadata after the request was overwritten: %s", arts)
	}
}

// TestEmbeddedCallAllocations bounds the allocations of the two calls an
// embedded host makes most, through cairn_call's dispatch: an agent turn's
// checkpoint (two messages, usage, state) and a LangGraph saver's put.
// They were 97 and 73 before the fast decoders stopped copying the
// messages, the commit and messages records were encoded by hand, and
// Head, the frame buffer, the checksums and a put's ids and kinds stopped
// allocating (57 and 42 after); allocations are what keeps the garbage
// collector busy between commits.
func TestEmbeddedCallAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's sync.Pool drops what it is given at random; make test-allocs runs this without -race")
	}
	const runs = 100
	for _, tc := range []struct {
		method string
		req    func(run string, i int) []byte
		limit  float64
	}{
		{"checkpoint", turnRequest, 64},
		{"save", func(_ string, i int) []byte { return putRequest(i) }, 50},
	} {
		h, run := embeddedRun(t)
		reqs := make([][]byte, runs+2)
		for i := range reqs {
			reqs[i] = tc.req(run, i+1)
		}
		i := 0
		allocs := testing.AllocsPerRun(runs, func() {
			if _, err := call(h, tc.method, reqs[i]); err != nil {
				t.Fatal(err)
			}
			i++
		})
		t.Logf("%s: %.1f allocations per call", tc.method, allocs)
		if allocs > tc.limit {
			t.Errorf("%s made %.1f allocations per call, want at most %.0f", tc.method, allocs, tc.limit)
		}
	}
}

// BenchmarkEmbeddedResumeRun is a resumeRun of a run with 100 turns behind
// its checkpoint (201 messages, about 800 KB), asked again with the same
// new run id, which writes nothing and answers the same: what reading the
// messages up to the boundary and encoding the answer cost.
func BenchmarkEmbeddedResumeRun(b *testing.B) {
	h, run := embeddedRun(b)
	for i := 1; i <= 100; i++ {
		if _, err := call(h, "checkpoint", turnRequest(run, i)); err != nil {
			b.Fatal(err)
		}
	}
	req := fmt.Appendf(nil, `{"run_id":%q,"new_run_id":"resumed"}`, run)
	benchCalls(b, h, run, "resumeRun", func(string, int) []byte { return req })
}
