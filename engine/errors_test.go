package engine_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/fsstore"
	"github.com/cairn-dev/cairn/session"
)

// TestInjectedENOSPCReachesTheCaller injects ENOSPC at the sync of a
// commit (a new session's create, a later session's append) and checks
// that the error Engine.Save returns has code no_space and is
// errors.Is(err, syscall.ENOSPC), that its message names the session's log
// (not a temp file), and that the store takes the next save.
func TestInjectedENOSPCReachesTheCaller(t *testing.T) {
	for _, tc := range []struct {
		name  string
		point string
		saves int // saves that succeed before the failing one
	}{
		{"create", fsstore.FaultCreateSync, 0},
		{"append", fsstore.FaultCommitSync, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			var armed atomic.Bool
			st, err := fsstore.Open(root, fsstore.Options{Fault: func(point string) error {
				if point == tc.point && armed.Load() {
					return syscall.ENOSPC
				}
				return nil
			}})
			if err != nil {
				t.Fatal(err)
			}
			e := engine.New(st, engine.Options{})
			t.Cleanup(func() { _ = e.Close() })
			ctx := context.Background()
			save := func() error {
				_, err := e.Save(ctx, api.SaveRequest{SessionID: "s1", Change: &session.Change{
					AppendMessages: []session.Value{session.Value(`{"role":"user"}`)},
				}})
				return err
			}
			for i := 0; i < tc.saves; i++ {
				if err := save(); err != nil {
					t.Fatal(err)
				}
			}
			armed.Store(true)
			err = save()
			armed.Store(false)
			if err == nil {
				t.Fatal("save succeeded through an injected ENOSPC")
			}
			if !errors.Is(err, syscall.ENOSPC) {
				t.Errorf("errors.Is(err, ENOSPC) = false for %v", err)
			}
			if !errors.Is(err, session.ErrNoSpace) || session.CodeOf(err) != session.CodeNoSpace {
				t.Errorf("code %q, want no_space: %v", session.CodeOf(err), err)
			}
			log := filepath.Join(".cairn", "sessions", "s-s1.log")
			if msg := err.Error(); !strings.Contains(msg, log) || strings.Contains(msg, ".tmp-") {
				t.Errorf("message does not name %s (or names a temp file): %s", log, msg)
			}
			if err := save(); err != nil {
				t.Fatalf("save after the failure: %v", err)
			}
		})
	}
}
