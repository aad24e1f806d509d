package fsstore_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/fsstore"
	"github.com/cairn-dev/cairn/session"
)

// copyAllocation copies src to dst and returns the bytes the copy
// allocated.
func copyAllocation(t *testing.T, s *fsstore.Store, src, dst string) uint64 {
	t.Helper()
	var err error
	n := allocated(func() { _, err = s.Copy(context.Background(), src, dst, 0, nil) })
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestCopyAllocation checks that copying a session (a fork) allocates a
// small fraction of the bytes it copies: each frame is read into a buffer
// lent again once its bytes are in the new log, and the new log is
// indexed by reading every frame into one reused buffer. When each frame
// had a buffer of its own, a fork of 320 MiB allocated 775 MiB, and the
// daemon's peak RSS during it rose with how far the collector lagged (by
// 64 MiB in a CI run of TestE2EScale).
func TestCopyAllocation(t *testing.T) {
	s := openT(t, t.TempDir(), fsstore.Options{})
	ctx := context.Background()
	text := strings.Repeat("m", 8<<10)
	var live int64
	for k := range 16 {
		ms := make([]session.Value, 256)
		for i := range ms {
			ms[i] = session.Value(`{"n":` + strconv.Itoa(i) + `,"text":"` + text + `"}`)
		}
		data := make([]byte, 256<<10)
		rand.Read(data)
		id := "a-" + strconv.Itoa(k)
		res, err := s.Commit(ctx, "big", &session.Change{AppendMessages: ms, AppendArtifacts: []session.Artifact{{ID: id, Name: id, Data: data}}}, session.CommitOptions{})
		if err != nil {
			t.Fatal(err)
		}
		live += res.BytesWritten
	}
	alloc := int64(copyAllocation(t, s, "big", "fork"))
	t.Logf("a copy of %d MiB allocated %d MiB", live>>20, alloc>>20)
	if alloc > live/2 {
		t.Fatalf("a copy of %d MiB allocated %d MiB, want at most half", live>>20, alloc>>20)
	}
	// The fork holds what was copied.
	page, err := s.Messages(ctx, "fork", session.Query{Tail: 1})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"n":255,"text":"` + text + `"}`; page.Total != 16*256 || len(page.Items) != 1 || string(page.Items[0]) != want {
		t.Fatalf("the fork holds %d messages, the last %.40q", page.Total, page.Items)
	}
}

// TestCopyStreamsLargeFrames checks that a copy streams a frame larger
// than a scratch pad lends (an artifact's data) instead of holding it
// whole, once read and once more in the write buffer, and that it checks
// the frame's checksum as it streams: a copy of a frame damaged after
// Open fails as corrupt and leaves no session behind.
func TestCopyStreamsLargeFrames(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, fsstore.Options{})
	ctx := context.Background()
	data := make([]byte, 32<<20)
	rand.Read(data)
	change := &session.Change{
		AppendMessages:  []session.Value{session.Value(`{"role":"user"}`)},
		AppendArtifacts: []session.Artifact{{ID: "big", Name: "big.bin", Data: data}},
	}
	if _, err := s.Commit(ctx, "k", change, session.CommitOptions{}); err != nil {
		t.Fatal(err)
	}
	alloc := copyAllocation(t, s, "k", "fork")
	t.Logf("a copy of a 32 MiB artifact allocated %d KiB", alloc>>10)
	if alloc > 8<<20 {
		t.Fatalf("a copy of a 32 MiB artifact allocated %d MiB, want at most 8", alloc>>20)
	}
	page, err := s.Artifacts(ctx, "fork", []string{"big"}, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Items) != 1 || !bytes.Equal(page.Items[0].Data, data) {
		t.Fatalf("the fork's artifact does not read back as written")
	}

	// One bit of the artifact's data flipped on disk, mid-frame.
	log := filepath.Join(dir, ".cairn", "sessions", "s-k.log")
	raw, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	at := bytes.Index(raw, data[:64])
	if at < 0 {
		t.Fatal("the artifact's data is not in the log")
	}
	f, err := os.OpenFile(log, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{data[20<<20] ^ 1}, int64(at+20<<20)); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if _, err := s.Copy(ctx, "k", "fork2", 0, nil); session.CodeOf(err) != session.CodeCorrupt {
		t.Fatalf("copy of a damaged frame: %v, want code corrupt", err)
	}
	if _, err := s.Load(ctx, "fork2", 0); session.CodeOf(err) != session.CodeNotFound {
		t.Fatalf("load of the failed copy: %v, want not found", err)
	}
}
