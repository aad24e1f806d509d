package engine_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/fsstore"
	"github.com/cairn-dev/cairn/session"
)

// TestWholeSnapshotSavesCostTheirDelta saves a growing session as a whole
// snapshot each turn (as many hosts do) and checks that each save writes
// about what the turn added, not the session, while resuming gives back
// exactly the last snapshot.
func TestWholeSnapshotSavesCostTheirDelta(t *testing.T) {
	ctx := context.Background()
	st, err := fsstore.Open(t.TempDir(), fsstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e := engine.New(st, engine.Options{})
	defer e.Close()
	snap := &session.Snapshot{Metadata: map[string]session.Value{"k": session.Value(`1`)}}
	big := strings.Repeat("x", 64<<10)
	for turn := 1; turn <= 40; turn++ {
		snap.Messages = append(snap.Messages, session.Value(fmt.Sprintf(`{"turn":%d,"text":%q}`, turn, big)))
		snap.Runs = []session.Run{{RunID: "r", Status: session.RunRunning, ToolCallsCount: int64(turn)}}
		if turn == 20 {
			snap.Metadata = map[string]session.Value{"other": session.Value(`2`)}
		}
		before := st.Stats().BytesWritten
		res, err := e.Save(ctx, api.SaveRequest{SessionID: "s", Snapshot: snap})
		if err != nil {
			t.Fatal(err)
		}
		if res.Generation != uint64(turn) {
			t.Fatalf("turn %d: generation %d", turn, res.Generation)
		}
		if wrote := st.Stats().BytesWritten - before; turn > 1 && wrote > int64(len(big))+4096 {
			t.Fatalf("turn %d: saving the whole snapshot wrote %d bytes for a %d-byte message", turn, wrote, len(big))
		}
	}
	got, err := e.ResumeSession(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Snapshot.Messages) != 40 || got.Snapshot.Runs[0].ToolCallsCount != 40 || string(got.Snapshot.Metadata["other"]) != "2" || got.Snapshot.Metadata["k"] != nil {
		t.Fatalf("resumed %d messages, runs %+v, metadata %v", len(got.Snapshot.Messages), got.Snapshot.Runs, got.Snapshot.Metadata)
	}
	for i, m := range got.Snapshot.Messages {
		if string(m) != string(snap.Messages[i]) {
			t.Fatalf("message %d differs", i)
		}
	}
	// A snapshot that rewrites history is still saved whole and exactly.
	snap.Messages = snap.Messages[:3]
	if _, err := e.Save(ctx, api.SaveRequest{SessionID: "s", Snapshot: snap}); err != nil {
		t.Fatal(err)
	}
	got, _ = e.ResumeSession(ctx, "s")
	if len(got.Snapshot.Messages) != 3 {
		t.Fatalf("after a shrinking snapshot: %d messages", len(got.Snapshot.Messages))
	}
}
