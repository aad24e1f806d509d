package fsstore_test

import (
	"context"
	"crypto/rand"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/fsstore"
	"github.com/cairn-dev/cairn/session"
)

// TestCopyAllocation checks that copying a session (a fork) allocates a
// small fraction of the bytes it copies: each frame is read into a buffer
// lent again once its bytes are in the new log, and the new log is
// indexed by reading every frame into one reused buffer. When each frame
// had a buffer of its own, a fork of 320 MiB allocated 775 MiB, and the
// daemon's peak RSS during it rose with how far the collector lagged (by
// 64 MiB in a CI run of TestE2EScale).
func TestCopyAllocation(t *testing.T) {
	s, err := fsstore.Open(t.TempDir(), fsstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
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
	runtime.GC()
	var a, b runtime.MemStats
	runtime.ReadMemStats(&a)
	if _, err := s.Copy(ctx, "big", "fork", 0, nil); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&b)
	alloc := int64(b.TotalAlloc - a.TotalAlloc)
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
