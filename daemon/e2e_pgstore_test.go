package daemon_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/internal/layout"
	"github.com/cairn-dev/cairn/internal/pgtest"
	"github.com/cairn-dev/cairn/protocol"
	"github.com/cairn-dev/cairn/session"
)

// TestPostgresStoreAcrossHosts runs two cairnd processes with their own
// workspace folders on one PostgreSQL database (--store), as two hosts
// would: a run host A checkpointed three times before it was SIGKILLed is
// resumed on host B with its turn, messages, usage and tool-call count
// carried on. The sessions stay out of each workspace's .cairn folder, the
// workspace lock stays local, and CAIRN_STORE selects the store as well.
func TestPostgresStoreAcrossHosts(t *testing.T) {
	srv := pgtest.Start(t)
	url := srv.CreateDB("hosts")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	wsA, wsB := t.TempDir(), t.TempDir()
	a := startCairnd(t, wsA, "--store", url)
	ca := a.dial(t)
	if _, err := ca.Save(ctx, api.SaveRequest{SessionID: "s", Snapshot: &session.Snapshot{}}); err != nil {
		t.Fatal(err)
	}
	run, err := ca.BeginRun(ctx, api.BeginRunRequest{SessionID: "s", RunID: "run-a"})
	if err != nil {
		t.Fatal(err)
	}
	for turn := int64(1); turn <= 3; turn++ {
		_, err := ca.Checkpoint(ctx, api.CheckpointRequest{RunID: run.RunID, SessionID: "s", Turn: turn,
			NewMessages: []session.Value{session.Value(fmt.Sprintf(`{"turn":%d}`, turn))},
			Usage:       session.Usage{InputTokens: 10 * turn, TotalTokens: 10 * turn}, ToolCallsCount: turn})
		if err != nil {
			t.Fatalf("checkpoint %d: %v", turn, err)
		}
	}
	// A second daemon on A's workspace is refused: the lock is local.
	if code := spawnCairnd(t, wsA, "--store", url).wait(t, 20*time.Second); code != protocol.ExitAlreadyRunning {
		t.Fatalf("second cairnd on workspace A exited %d, want %d", code, protocol.ExitAlreadyRunning)
	}
	ca.Close()
	a.cmd.Process.Signal(syscall.SIGKILL)
	<-a.done
	if _, err := os.Stat(layout.Sessions(wsA)); !os.IsNotExist(err) {
		t.Fatalf("workspace A has a sessions folder (%v): the sessions went to the file store", err)
	}

	t.Setenv("CAIRN_STORE", url) // host B picks the store from the environment
	b := startCairnd(t, wsB)
	cb := b.dial(t)
	defer cb.Close()
	// A is gone but its lease is live: the caller says so (takeover).
	res, err := cb.ResumeRun(ctx, api.ResumeRunRequest{RunID: run.RunID, SessionID: "s", Takeover: true})
	if err != nil {
		t.Fatalf("resume on host B: %v\n%s", err, b.logText())
	}
	if res.Turn != 3 || len(res.Messages) != 3 || res.Usage.TotalTokens != 30 || res.ToolCallsCount != 3 || string(res.Messages[2]) != `{"turn":3}` {
		t.Fatalf("resumed on host B: turn %d, %d messages, usage %+v, tool calls %d", res.Turn, len(res.Messages), res.Usage, res.ToolCallsCount)
	}
	if _, err := cb.CompleteRun(ctx, api.CompleteRunRequest{RunID: res.RunID, SessionID: "s", Status: session.RunCompleted}); err != nil {
		t.Fatalf("complete on host B: %v", err)
	}
	if _, err := os.Stat(filepath.Join(wsB, layout.Dir, layout.SessionsName)); !os.IsNotExist(err) {
		t.Fatalf("workspace B has a sessions folder (%v)", err)
	}
}
