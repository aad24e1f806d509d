package fsstore_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/fsstore"
	"github.com/cairn-dev/cairn/internal/vfs/crashfs"
	"github.com/cairn-dev/cairn/session"
)

// noZeroTailKept fails when quarantine/ of the image img holds a tail of
// nothing but zeros: zeros written ahead of a log's end taken for a torn
// tail.
func noZeroTailKept(img string) error {
	q := filepath.Join(img, ".cairn", "quarantine")
	entries, err := os.ReadDir(q)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(q, e.Name()))
		if err != nil {
			return err
		}
		if len(data) > 0 && len(bytes.Trim(data, "\x00")) == 0 {
			return fmt.Errorf("quarantine holds %s, %d zero bytes: zeros ahead of a log's end were taken for a torn tail", e.Name(), len(data))
		}
	}
	return nil
}

// TestPowerCutPrealloc cuts the power at every sync of a workload with
// zeros written ahead of the session logs (a budget small enough that
// idle logs give theirs back), in the synced-only image and random ones,
// and checks each image against what was acknowledged, and that no zeros
// were kept as a torn tail. The cuts at a presync find zeros durable past
// a log's end, or a size extended without them.
func TestPowerCutPrealloc(t *testing.T) {
	root, cfs := crashRoot(t)
	var s *fsstore.Store
	var rec *crashfs.Recorder
	live := func() (crashfs.World, error) {
		if s == nil {
			return rec.Cur(), nil // closed: as acknowledged
		}
		return pcWorld(root, s)
	}
	read := func(img string) (crashfs.World, error) {
		w, err := pcRead(img)
		if err != nil {
			return nil, err
		}
		return w, noZeroTailKept(img)
	}
	rec = crashfs.NewRecorder(cfs, t.TempDir(), 21, read, live)
	rec.RandomCuts = 3
	opts := fsstore.Options{FS: cfs, Now: pcClock(), CompactMinBytes: 1 << 40, PreallocBytes: 16 << 10}
	step := func(name string, fn func() error) {
		t.Helper()
		if err := rec.Op(name, fn); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	c := func(id string, i int) {
		t.Helper()
		if err := commit(rec, s, id, &session.Change{AppendMessages: []session.Value{pcMsg(i)}}); err != nil {
			t.Fatalf("commit to %s: %v", id, err)
		}
	}
	step("open a new store", func() (err error) { s, err = fsstore.Open(root, opts); return err })
	for i := range 8 {
		c("p", i)
		c("q", 20+i)
	}
	step("compact p", func() error { return s.Compact(bg, "p") })
	c("p", 9)
	c("r", 30)
	c("r", 31)
	step("close", func() error { err := s.Close(); s = nil; return err })
	step("reopen", func() (err error) { s, err = fsstore.Open(root, opts); return err })
	c("p", 10)
	c("q", 40)
	rec.Final()
	must(t, s.Close())
	for _, f := range rec.Failures() {
		t.Error(f)
	}
	presyncs := slices.DeleteFunc(cfs.Sites(), func(site string) bool { return !strings.HasPrefix(site, crashfs.PresyncSite) })
	if len(presyncs) == 0 {
		t.Fatalf("the workload reaches no presync among %q", cfs.Sites())
	}
	t.Logf("%d images checked; presync sites %q", rec.Cuts, presyncs)
}
