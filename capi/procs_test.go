//go:build cgo

package main

import (
	"fmt"
	"path/filepath"
	"runtime"
	"testing"
)

// TestProcsFollowMode: a daemon-mode open leaves the Go runtime one P (the
// client runs little Go code; see procs), and an embedded open puts the
// default back, which a later daemon-mode open does not lower while the
// embedded handle is open.
func TestProcsFollowMode(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts cairnd")
	}
	if procsHostSet || runtime.NumCPU() < 2 {
		t.Skip("GOMAXPROCS is set in the environment, or there is one CPU")
	}
	reset := func() {
		procs.Lock()
		procs.lowered = false
		procs.Unlock()
		runtime.SetDefaultGOMAXPROCS()
	}
	reset()
	t.Cleanup(reset)
	def := runtime.GOMAXPROCS(0)
	dir := t.TempDir()
	daemon := filepath.Join(dir, "cairnd")
	run(t, "go", "build", "-o", daemon, "../cmd/cairnd")
	open := func(opts string) uint64 {
		t.Helper()
		h, err := openHandle(opts)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	ws, ws2 := filepath.Join(dir, "ws"), filepath.Join(dir, "ws2")
	run(t, "mkdir", ws, ws2)
	h := open(fmt.Sprintf(`{"workspace":%q,"daemon":%q}`, ws, daemon))
	in, err := lookup(h)
	if err != nil {
		t.Fatal(err)
	}
	pid := in.client.Hello().PID
	t.Cleanup(func() { stopProcess(t, pid) })
	if got := runtime.GOMAXPROCS(0); got != clientProcs {
		t.Fatalf("GOMAXPROCS with a daemon-mode handle open: %d, want %d", got, clientProcs)
	}
	e := open(fmt.Sprintf(`{"workspace":%q,"embedded":true}`, ws2))
	if got := runtime.GOMAXPROCS(0); got != def {
		t.Fatalf("GOMAXPROCS with an embedded handle open: %d, want the default %d", got, def)
	}
	h2 := open(fmt.Sprintf(`{"workspace":%q,"daemon":%q}`, ws, daemon))
	if got := runtime.GOMAXPROCS(0); got != def {
		t.Fatalf("GOMAXPROCS after a daemon-mode open beside an embedded handle: %d, want the default %d", got, def)
	}
	for _, x := range []uint64{h2, e, h} {
		if err := closeHandle(x); err != nil {
			t.Fatal(err)
		}
	}
	h3 := open(fmt.Sprintf(`{"workspace":%q,"daemon":%q}`, ws, daemon))
	defer closeHandle(h3)
	if got := runtime.GOMAXPROCS(0); got != clientProcs {
		t.Fatalf("GOMAXPROCS with only a daemon-mode handle open again: %d, want %d", got, clientProcs)
	}
}
