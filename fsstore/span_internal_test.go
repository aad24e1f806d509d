package fsstore

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cairn-dev/cairn/session"
)

// countingReader counts the reads made through it.
type countingReader struct {
	r     io.ReaderAt
	reads atomic.Int64
}

func (c *countingReader) ReadAt(p []byte, off int64) (int, error) {
	c.reads.Add(1)
	return c.r.ReadAt(p, off)
}

// agentLog writes turns commits of two messages and a loop checkpoint each
// (an agent's lockstep turns, a checkpoint record between two message
// frames) and returns the store, still open, and the session's messages.
func agentLog(t *testing.T, turns int) (*Store, []session.Value) {
	t.Helper()
	s, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ctx := context.Background()
	var want []session.Value
	for i := 0; i < turns; i++ {
		msgs := []session.Value{
			session.Value(fmt.Sprintf(`{"role":"user","turn":%d,"pad":%q}`, i, strings.Repeat("u", 300))),
			session.Value(fmt.Sprintf(`{"role":"assistant","turn":%d,"pad":%q}`, i, strings.Repeat("a", 900))),
		}
		c := session.Change{
			AppendMessages: msgs,
			UpsertRuns:     []session.Run{{RunID: "r1", Status: session.RunRunning}},
			Checkpoint:     &session.LoopCheckpoint{RunID: "r1", Turn: int64(i + 1), State: session.Value(`{"step":"after_tool"}`)},
		}
		if _, err := s.Commit(ctx, "agent", &c, session.CommitOptions{}); err != nil {
			t.Fatal(err)
		}
		want = append(want, msgs...)
	}
	return s, want
}

// TestElemsReadsSpans checks that a page of messages whose frames lie close
// together in the log is read in a few reads, not one per frame, and holds
// exactly the messages committed.
func TestElemsReadsSpans(t *testing.T) {
	const turns = 200
	s, want := agentLog(t, turns)
	sf, fr, err := s.reading("agent")
	if err != nil {
		t.Fatal(err)
	}
	defer sf.mu.Unlock()
	for _, tc := range []struct {
		name     string
		from     int
		maxReads int64
	}{
		{"all", 0, 1},
		{"tail 20", len(want) - 20, 1},
		{"last", len(want) - 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cr := &countingReader{r: fr.r}
			got := make([]string, 0, len(want))
			err := frameReader{r: cr, path: fr.path}.elems(sf.t.msgs[tc.from:], true, func(_ int, raw []byte) error {
				got = append(got, string(raw))
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(want)-tc.from {
				t.Fatalf("read %d messages, want %d", len(got), len(want)-tc.from)
			}
			for i, m := range got {
				if m != string(want[tc.from+i]) {
					t.Fatalf("message %d: got %s, want %s", tc.from+i, m, want[tc.from+i])
				}
			}
			if n := cr.reads.Load(); n > tc.maxReads {
				t.Fatalf("%d reads for %d frames, want at most %d", n, (len(want)-tc.from+1)/2, tc.maxReads)
			}
		})
	}
}

// TestSpanFindsBitRot checks that every frame read in a span is still
// checked on its own: a bit flipped in one message frame among many is
// reported corrupt.
func TestSpanFindsBitRot(t *testing.T) {
	s, want := agentLog(t, 50)
	sf, err := s.lockSession("agent")
	if err != nil {
		t.Fatal(err)
	}
	it := sf.t.msgs[len(want)/2]
	path := sf.path
	sf.mu.Unlock()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 1)
	at := it.off() + int64(it.fsz) - 2 // inside the frame's payload
	if _, err := f.ReadAt(b, at); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x40
	if _, err := f.WriteAt(b, at); err != nil {
		t.Fatal(err)
	}
	f.Close()
	_, err = s.Messages(context.Background(), "agent", session.Query{})
	if session.CodeOf(err) != session.CodeCorrupt {
		t.Fatalf("messages over a flipped bit: %v, want code corrupt", err)
	}
	if p, err := s.Messages(context.Background(), "agent", session.Query{Tail: 4}); err != nil || len(p.Items) != 4 {
		t.Fatalf("the tail past the damage: %v %v", p, err)
	}
}
