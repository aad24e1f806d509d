package daemon_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/protocol"
	"github.com/cairn-dev/cairn/session"
)

// saver commits to one session through one client, expecting each time the
// generation it last had acknowledged, and remembers what was acknowledged.
type saver struct {
	c     *protocol.Client
	id    string
	acked []string // message content of generations 1..len
}

// save commits the next message; err is the daemon's answer.
func (s *saver) save(ctx context.Context) error {
	gen := uint64(len(s.acked))
	m := fmt.Sprintf(`{"id":%q,"gen":%d}`, s.id, gen+1)
	r, err := s.c.Save(ctx, api.SaveRequest{SessionID: s.id, ExpectGeneration: session.Expect(gen),
		Change: &session.Change{AppendMessages: []session.Value{session.Value(m)}}})
	if err != nil {
		return err
	}
	if r.Generation != gen+1 {
		return fmt.Errorf("save on generation %d acknowledged as %d", gen, r.Generation)
	}
	s.acked = append(s.acked, m)
	return nil
}

// wantAcked checks that the daemon behind c holds exactly what s had
// acknowledged.
func wantAcked(t *testing.T, ctx context.Context, c *protocol.Client, s *saver) {
	t.Helper()
	rs, err := c.ResumeSession(ctx, s.id)
	if err != nil {
		t.Fatalf("resume %q: %v", s.id, err)
	}
	if rs.Generation != uint64(len(s.acked)) || len(rs.Snapshot.Messages) != len(s.acked) {
		t.Fatalf("session %q at generation %d with %d messages; %d saves were acknowledged", s.id, rs.Generation, len(rs.Snapshot.Messages), len(s.acked))
	}
	for i, m := range rs.Snapshot.Messages {
		if string(m) != s.acked[i] {
			t.Fatalf("session %q message %d = %s, acknowledged %s", s.id, i+1, m, s.acked[i])
		}
	}
}

// TestE2EDeletedLockFile deletes .cairn/LOCK under a running cairnd. A
// second cairnd on the workspace is refused; the first goes on
// acknowledging; after a SIGKILL and a restart every acknowledged save is
// there.
func TestE2EDeletedLockFile(t *testing.T) {
	ws := workspace(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	p := startCairnd(t, ws)
	s := &saver{c: p.dial(t), id: "s"}
	for range 5 {
		if err := s.save(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Remove(filepath.Join(ws, ".cairn", "LOCK")); err != nil {
		t.Fatal(err)
	}
	for round := range 3 {
		second := spawnCairnd(t, ws)
		if code := second.wait(t, 10*time.Second); code != protocol.ExitAlreadyRunning {
			t.Fatalf("round %d: second cairnd with LOCK deleted exited %d, want %d; log:\n%s", round, code, protocol.ExitAlreadyRunning, second.logText())
		}
		for range 5 {
			if err := s.save(ctx); err != nil {
				t.Fatalf("round %d: the lock holder stopped acknowledging: %v", round, err)
			}
		}
	}
	// The holder put LOCK back on its next write, with its pid.
	if b, err := os.ReadFile(filepath.Join(ws, ".cairn", "LOCK")); err != nil || strings.TrimSpace(string(b)) != fmt.Sprint(p.cmd.Process.Pid) {
		t.Fatalf("LOCK holds %q (%v), want pid %d", b, err, p.cmd.Process.Pid)
	}
	p.cmd.Process.Signal(syscall.SIGKILL)
	p.wait(t, 10*time.Second)
	wantAcked(t, ctx, startCairnd(t, ws).dial(t), s)
}

// TestE2ECairnDirReplaced renames .cairn away under a running cairnd and
// makes an empty one in its place. A second cairnd serves the new one; the
// first acknowledges no more saves (code locked), however many its
// clients send. After both are killed and restarted, each directory holds
// exactly the saves acknowledged into it. (workspace's own test covers
// the manifests' lock.)
func TestE2ECairnDirReplaced(t *testing.T) {
	ws := workspace(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	// Without file tracking: the tracker of the first cairnd, having lost
	// its workspace's .cairn, would make each save wait out its sync
	// timeout before the store refuses it.
	p1 := startCairnd(t, ws, "--no-track-files")
	first := &saver{c: p1.dial(t), id: "s"}
	for range 5 {
		if err := first.save(ctx); err != nil {
			t.Fatal(err)
		}
	}
	away := workspace(t)
	if err := os.Rename(filepath.Join(ws, ".cairn"), filepath.Join(away, ".cairn")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(ws, ".cairn"), 0o700); err != nil {
		t.Fatal(err)
	}
	p2 := startCairnd(t, ws)
	second := &saver{c: p2.dial(t), id: "s"}
	other := &saver{c: first.c, id: "other"}
	for i := range 10 {
		if err := second.save(ctx); err != nil {
			t.Fatalf("save %d through the second cairnd: %v", i, err)
		}
		for _, s := range []*saver{first, other} {
			if err := s.save(ctx); protocol.CodeOf(err) != session.CodeLocked {
				t.Fatalf("save %d to %q through the first cairnd after .cairn was replaced: %v, want locked; log:\n%s", i, s.id, err, p1.logText())
			}
		}
	}
	if n := strings.Count(p1.logText(), "writer lock lost"); n != 1 {
		t.Fatalf("the first cairnd logged the lost lock %d times, want once; log:\n%s", n, p1.logText())
	}
	for _, p := range []*proc{p1, p2} {
		p.cmd.Process.Signal(syscall.SIGKILL)
		p.wait(t, 10*time.Second)
	}
	wantAcked(t, ctx, startCairnd(t, ws).dial(t), second)
	wantAcked(t, ctx, startCairnd(t, away).dial(t), first)
}
