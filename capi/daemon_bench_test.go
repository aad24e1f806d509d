//go:build cgo

package main

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// turnRequest is the JSON a Python host sends for one agent turn's
// checkpoint (bench/bindings/python_turn.py): two messages, ~8 KiB.
func turnRequest(runID string, i int) []byte {
	msgs := fmt.Sprintf(`[{"role": "user", "content": "%s", "turn": %d}, {"role": "assistant", "content": [{"type": "text", "text": "%s"}, {"type": "tool_use", "id": "t%d", "name": "edit", "input": {"path": "src/a.go", "patch": "%s"}}]}]`,
		strings.Repeat("x", 2000), i, strings.Repeat("y", 3000), i, strings.Repeat("z", 3000))
	return fmt.Appendf(nil, `{"run_id": %q, "turn": %d, "new_messages": %s, "tool_calls_count": %d, "usage": {"input_tokens": %d, "output_tokens": %d, "total_tokens": %d, "cost": %g}, "state": {"step": "after_tool", "turn": %d}}`,
		runID, i, msgs, i, 1000*i, 200*i, 1200*i, 0.001*float64(i), i)
}

// BenchmarkDaemonCheckpoint is one agent turn through libcairn in daemon
// mode, as cairn_call runs it: the client's CPU is this process's, the
// daemon's is cairnd's. It needs CAIRN_DAEMON (a built cairnd).
func BenchmarkDaemonCheckpoint(b *testing.B) {
	daemon := os.Getenv("CAIRN_DAEMON")
	if daemon == "" {
		b.Skip("CAIRN_DAEMON is not set")
	}
	h, run := openRun(b, fmt.Sprintf(`{"workspace":%q,"daemon":%q,"daemon_args":["--idle-timeout=2s"]}`, b.TempDir(), daemon))
	reqs := make([][]byte, b.N)
	for i := range reqs {
		reqs[i] = turnRequest(run, i+1)
	}
	b.ReportAllocs()
	b.ResetTimer()
	c0 := cpuTime(b)
	for i := 0; i < b.N; i++ {
		if _, err := call(h, "checkpoint", reqs[i]); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64((cpuTime(b)-c0).Microseconds())/float64(b.N), "client-cpu-us/op")
}

// cpuTime is this process's user+system CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	ru := rusage(b)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
