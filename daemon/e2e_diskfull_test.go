//go:build linux

package daemon_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/internal/atomicfile"
	"github.com/cairn-dev/cairn/internal/layout"
	"github.com/cairn-dev/cairn/internal/testkit"
	"github.com/cairn-dev/cairn/protocol"
	"github.com/cairn-dev/cairn/session"
)

// diskFullEnv set to "rlimit" makes TestE2EDiskFull use RLIMIT_FSIZE even
// where it could mount a tmpfs.
const diskFullEnv = "CAIRN_DAEMON_DISKFULL"

// daemonDisk is the small disk under a daemon's workspace: a 2 MiB tmpfs
// filled by a filler file, or, when none can be mounted, the daemon's own
// RLIMIT_FSIZE lowered and raised through prlimit(2).
type daemonDisk struct {
	dir    string
	filler string // tmpfs
	pid    int    // rlimit
	orig   syscall.Rlimit
	kind   string
}

func newDaemonDisk(t *testing.T) *daemonDisk {
	dir, err := "", errors.New(diskFullEnv+"=rlimit")
	if os.Getenv(diskFullEnv) != "rlimit" {
		dir, err = testkit.MountTmpfs(t, "2m")
	}
	if err != nil {
		t.Logf("small disk: RLIMIT_FSIZE of cairnd (cannot mount a tmpfs: %v)", err)
		return &daemonDisk{dir: t.TempDir(), kind: "rlimit"}
	}
	t.Log("small disk: 2 MiB tmpfs")
	return &daemonDisk{dir: dir, filler: filepath.Join(dir, "filler"), kind: "tmpfs"}
}

func prlimit(pid int, newLim, old *syscall.Rlimit) error {
	_, _, e := syscall.RawSyscall6(syscall.SYS_PRLIMIT64, uintptr(pid), uintptr(syscall.RLIMIT_FSIZE), uintptr(unsafe.Pointer(newLim)), uintptr(unsafe.Pointer(old)), 0, 0)
	if e != 0 {
		return e
	}
	return nil
}

// attach notes the daemon whose limit the rlimit disk sets.
func (d *daemonDisk) attach(t *testing.T, pid int) {
	if d.kind != "rlimit" {
		return
	}
	d.pid = pid
	if err := prlimit(pid, nil, &d.orig); err != nil {
		t.Fatal(err)
	}
}

func (d *daemonDisk) full(t *testing.T) {
	t.Helper()
	if d.kind == "rlimit" {
		if err := prlimit(d.pid, &syscall.Rlimit{Cur: 4096, Max: d.orig.Max}, nil); err != nil {
			t.Fatal(err)
		}
		return
	}
	testkit.FillUp(t, d.filler)
}

func (d *daemonDisk) free(t *testing.T) {
	t.Helper()
	if d.kind == "rlimit" {
		if err := prlimit(d.pid, &d.orig, nil); err != nil {
			t.Fatal(err)
		}
		return
	}
	if err := os.Remove(d.filler); err != nil {
		t.Fatal(err)
	}
}

// TestE2EDiskFull runs cairnd on a workspace on a small disk and fills it:
// a save, a new session and a workflow step answer no_space on the wire
// with a plain message naming the log, the daemon keeps serving, nothing
// acknowledged is lost, and once space is freed the same daemon and
// connection take writes again.
func TestE2EDiskFull(t *testing.T) {
	disk := newDaemonDisk(t)
	ws := filepath.Join(disk.dir, "ws")
	if err := os.Mkdir(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	p := startCairnd(t, ws)
	disk.attach(t, p.cmd.Process.Pid)
	c := p.dial(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	big := func(i int) session.Value {
		return session.Value(fmt.Sprintf(`{"i":%d,"pad":%q}`, i, strings.Repeat("x", 8<<10)))
	}
	acked := 0
	save := func(sid string, i int) error {
		_, err := c.Save(ctx, api.SaveRequest{SessionID: sid, Change: &session.Change{AppendMessages: []session.Value{big(i)}}})
		return err
	}
	for i := 1; i <= 3; i++ {
		if err := save("a", i); err != nil {
			t.Fatal(err)
		}
		acked++
	}
	if err := c.CompleteStep(ctx, api.CompleteStepRequest{WorkflowID: "w", SessionID: "a", StepID: "s1", Identity: "i", Result: big(0)}); err != nil {
		t.Fatal(err)
	}

	disk.full(t)
	sessions, flows := layout.Sessions(ws), layout.Workflows(ws)
	for _, tc := range []struct {
		what string
		log  string
		call func() error
	}{
		{"save", filepath.Join(sessions, "s-a.log"), func() error {
			// The zeros written ahead of a's log are its own: saves that
			// fit in them are taken and acknowledged; the first that
			// does not must fail with no_space.
			for i := 100; i < 300; i++ {
				if err := save("a", i); err != nil {
					return err
				}
				acked++
			}
			return nil
		}},
		{"new session", filepath.Join(sessions, "s-b.log"), func() error { return save("b", 1) }},
		{"workflow step", filepath.Join(flows, "s-w.log"), func() error {
			return c.CompleteStep(ctx, api.CompleteStepRequest{WorkflowID: "w", SessionID: "a", StepID: "s2", Identity: "i", Result: big(1)})
		}},
	} {
		err := tc.call()
		var re *protocol.RemoteError
		if !errors.As(err, &re) || re.Code != session.CodeNoSpace || !errors.Is(err, session.ErrNoSpace) {
			t.Fatalf("%s on a full disk: %v, want the wire code no_space", tc.what, err)
		}
		plain := "no space left on the device holding " + tc.log
		if disk.kind == "rlimit" {
			plain = tc.log + " would pass the largest file size allowed"
		}
		if !strings.Contains(re.Message, plain) || strings.Contains(re.Message, atomicfile.TempPrefix) {
			t.Errorf("%s: wire message %q, want one containing %q and no temp file", tc.what, re.Message, plain)
		}
		t.Logf("%s: %s: %s", tc.what, re.Code, re.Message)
	}
	var tmps []string
	_ = filepath.WalkDir(filepath.Join(ws, ".cairn"), func(path string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(d.Name(), atomicfile.TempPrefix) {
			tmps = append(tmps, path)
		}
		return nil
	})
	if len(tmps) > 0 {
		t.Errorf("temp files left behind: %v", tmps)
	}

	// Space freed: the same daemon, on the same connection, takes writes.
	disk.free(t)
	if err := save("a", 4); err != nil {
		t.Fatalf("save after space was freed: %v", err)
	}
	acked++
	if err := save("b", 1); err != nil {
		t.Fatalf("new session after space was freed: %v", err)
	}
	if err := c.CompleteStep(ctx, api.CompleteStepRequest{WorkflowID: "w", SessionID: "a", StepID: "s2", Identity: "i", Result: big(1)}); err != nil {
		t.Fatalf("workflow step after space was freed: %v", err)
	}
	r, err := c.ResumeSession(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Snapshot.Messages) != acked || r.Generation != uint64(acked) {
		t.Fatalf("session a: %d messages at generation %d, want the %d acknowledged", len(r.Snapshot.Messages), r.Generation, acked)
	}
	select {
	case <-p.done:
		t.Fatalf("cairnd exited: %v", p.err)
	default:
	}
}
