package fsstore_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/fsstore"
	"github.com/cairn-dev/cairn/internal/scratch"
	"github.com/cairn-dev/cairn/session"
)

// TestMessagesReadIntoPad: a read of messages under a scratch.Pad reads
// its spans into the pad's buffers, lent again after Reset, instead of a
// fresh buffer per read (bytes allocated are counted, not time); and what
// it returns is right read after read through the same buffers.
func TestMessagesReadIntoPad(t *testing.T) {
	bg := context.Background()
	s, err := fsstore.Open(t.TempDir(), fsstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	const turns = 40
	var msgs [turns]string
	msg := func(i int) string { return msgs[i] }
	for i := range turns {
		msgs[i] = fmt.Sprintf(`{"i":%d,"pad":%q}`, i, strings.Repeat(string(rune('a'+i%26)), 2000))
		// A commit per message, as an agent's turns: a tail spans frames.
		if _, err := s.Commit(bg, "s", &session.Change{AppendMessages: []session.Value{session.Value(msgs[i])}}, session.CommitOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var pad scratch.Pad
	ctx := scratch.With(bg, &pad)
	read := func(ctx context.Context, q session.Query, from int) {
		t.Helper()
		p, err := s.Messages(ctx, "s", q)
		if err != nil {
			t.Fatal(err)
		}
		if p.From != int64(from) || len(p.Items) == 0 {
			t.Fatalf("%+v: from %d, %d items", q, p.From, len(p.Items))
		}
		for k, v := range p.Items {
			if string(v) != msg(from+k) {
				t.Fatalf("%+v: message %d is %.40q, want %.40q", q, from+k, v, msg(from+k))
			}
		}
	}
	for _, c := range []struct {
		q    session.Query
		from int
	}{{session.Query{Tail: 20}, turns - 20}, {session.Query{From: 3, Limit: 10}, 3}, {session.Query{Tail: 5}, turns - 5}, {session.Query{Tail: 20}, turns - 20}} {
		read(ctx, c.q, c.from)
		pad.Reset()
	}
	perRead := func(ctx context.Context) uint64 {
		const reads = 20
		return allocated(func() {
			for range reads {
				read(ctx, session.Query{Tail: 20}, turns-20)
				pad.Reset()
			}
		}) / reads
	}
	fresh, lent := perRead(bg), perRead(ctx)
	if fresh < 20*2000 || lent > fresh/4 {
		t.Fatalf("a tail of 20 allocates %d bytes a read under a pad, %d without", lent, fresh)
	}
}
