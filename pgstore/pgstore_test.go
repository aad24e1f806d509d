package pgstore_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/internal/pgtest"
	"github.com/cairn-dev/cairn/pgstore"
	"github.com/cairn-dev/cairn/session"
	"github.com/cairn-dev/cairn/session/storetest"
	"github.com/jackc/pgx/v5"
)

var ctx = context.Background()

func exec(t *testing.T, url, sql string, args ...any) {
	t.Helper()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql, args...); err != nil {
		t.Fatal(err)
	}
}

func count(t *testing.T, url, sql string, args ...any) int64 {
	t.Helper()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int64
	if err := conn.QueryRow(ctx, sql, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestCASAcrossStores has 32 writers on two Store instances (two
// connection pools, as two hosts would have) race on one session, each
// expecting the generation it last read. Every generation must be written
// exactly once, by a writer that expected the one before it, and every
// acknowledged commit must be there.
func TestCASAcrossStores(t *testing.T) {
	srv := pgtest.Start(t)
	url := newDB(t, srv)
	stores := []*pgstore.Store{openStore(t, url), openStore(t, url)}
	const writers, tries = 32, 12
	var mu sync.Mutex
	acked := map[uint64]string{}
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := stores[w%2]
			for i := range tries {
				var cur uint64
				if sum, err := s.Stat(ctx, "race"); err == nil {
					cur = sum.Generation
				} else if session.CodeOf(err) != session.CodeNotFound {
					t.Errorf("Stat: %v", err)
					return
				}
				msg := fmt.Sprintf(`{"w":%d,"i":%d,"expected":%d}`, w, i, cur)
				res, err := s.Commit(ctx, "race", &session.Change{AppendMessages: []session.Value{session.Value(msg)}}, session.CommitOptions{ExpectGeneration: session.Expect(cur)})
				switch {
				case err == nil:
					mu.Lock()
					if prev, dup := acked[res.Generation]; dup {
						t.Errorf("generation %d acknowledged twice: %s and %s", res.Generation, prev, msg)
					}
					acked[res.Generation] = msg
					mu.Unlock()
					if res.Generation != cur+1 {
						t.Errorf("commit expecting %d landed at %d", cur, res.Generation)
					}
				case session.CodeOf(err) != session.CodeConflict:
					t.Errorf("commit expecting %d: %v", cur, err)
				}
			}
		}()
	}
	wg.Wait()
	st, err := stores[0].Load(ctx, "race", 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := st.Snapshot.Generation; got != uint64(len(acked)) || len(st.Snapshot.Messages) != len(acked) {
		t.Fatalf("generation %d with %d messages; %d commits acknowledged", got, len(st.Snapshot.Messages), len(acked))
	}
	for i, m := range st.Snapshot.Messages {
		if string(m) != acked[uint64(i+1)] {
			t.Fatalf("generation %d holds %s, but %s was acknowledged for it", i+1, m, acked[uint64(i+1)])
		}
	}
	if len(acked) < 2 {
		t.Fatalf("only %d commits won: the race did not happen", len(acked))
	}
	t.Logf("%d of %d commits won", len(acked), writers*tries)
}

// TestNewerSchemaRefused: a database migrated by a newer build is refused
// with schema_unsupported, and left as it was.
func TestNewerSchemaRefused(t *testing.T) {
	srv := pgtest.Start(t)
	url := newDB(t, srv)
	openStore(t, url).Close()
	exec(t, url, "UPDATE schema_version SET version = $1", pgstore.SchemaVersion+1)
	_, err := pgstore.Open(ctx, url, pgstore.Options{})
	if session.CodeOf(err) != session.CodeSchemaUnsupported {
		t.Fatalf("Open of a newer schema: %v, want schema_unsupported", err)
	}
	if v := count(t, url, "SELECT version FROM schema_version"); v != pgstore.SchemaVersion+1 {
		t.Fatalf("schema version changed to %d", v)
	}
	// Opening an up-to-date database again migrates nothing.
	exec(t, url, "UPDATE schema_version SET version = $1", pgstore.SchemaVersion)
	openStore(t, url)
}

// TestUnreachable: a server that is not there is unavailable within the
// call's deadline, on Open and on every call of an open store.
func TestUnreachable(t *testing.T) {
	srv := pgtest.Start(t)
	url := newDB(t, srv)
	s := openStore(t, url)
	srv.Kill()
	c, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err := s.Commit(c, "x", &session.Change{}, session.CommitOptions{})
	if session.CodeOf(err) != api.CodeUnavailable {
		t.Fatalf("Commit with the server down: %v, want unavailable", err)
	}
	if _, _, err := s.Head(c, "x"); session.CodeOf(err) != api.CodeUnavailable {
		t.Fatalf("Head with the server down: %v, want unavailable", err)
	}
	if _, err := pgstore.Open(c, url, pgstore.Options{}); session.CodeOf(err) != api.CodeUnavailable {
		t.Fatalf("Open with the server down: %v, want unavailable", err)
	}
}

// TestKillPostmasterDuringCommits SIGKILLs the postmaster while writers
// commit, restarts it, and checks that every acknowledged generation is
// there, that the writers saw only unavailable, and that the same stores go
// on committing.
func TestKillPostmasterDuringCommits(t *testing.T) {
	srv := pgtest.Start(t)
	url := newDB(t, srv)
	stores := []*pgstore.Store{openStore(t, url), openStore(t, url)}
	const writers = 8
	var mu sync.Mutex
	acked := map[string]uint64{} // message -> generation
	sawUnavailable := 0
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := stores[w%2]
			id := fmt.Sprintf("s%d", w%4) // two writers per session, one per store
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				msg := fmt.Sprintf(`{"w":%d,"i":%d}`, w, i)
				c, cancel := context.WithTimeout(ctx, 10*time.Second)
				res, err := s.Commit(c, id, &session.Change{AppendMessages: []session.Value{session.Value(msg)}}, session.CommitOptions{})
				cancel()
				mu.Lock()
				switch {
				case err == nil:
					acked[msg] = res.Generation
				case session.CodeOf(err) == api.CodeUnavailable:
					sawUnavailable++
				default:
					t.Errorf("commit %s: %v (code %s), want only unavailable", msg, err, session.CodeOf(err))
				}
				mu.Unlock()
				if err != nil {
					time.Sleep(20 * time.Millisecond)
				}
			}
		}()
	}
	waitAcked := func(n int) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			mu.Lock()
			got := len(acked)
			mu.Unlock()
			if got >= n {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("only %d commits acknowledged, waiting for %d", got, n)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitAcked(50)
	srv.Kill()
	mu.Lock()
	before := len(acked)
	mu.Unlock()
	// Let the writers meet the dead server.
	time.Sleep(500 * time.Millisecond)
	srv.Restart()
	waitAcked(before + 50) // the same stores go on, no reopen
	close(stop)
	wg.Wait()
	if sawUnavailable == 0 {
		t.Fatalf("no writer saw unavailable while the server was down")
	}
	// Every acknowledged message is there, at the generation it was
	// acknowledged with, in a fresh store.
	s := openStore(t, url)
	for w := range 4 {
		id := fmt.Sprintf("s%d", w)
		st, err := s.Load(ctx, id, 0)
		if err != nil {
			t.Fatal(err)
		}
		at := map[string]int{}
		for i, m := range st.Snapshot.Messages {
			if _, dup := at[string(m)]; dup {
				t.Fatalf("%s: message %s written twice", id, m)
			}
			at[string(m)] = i
		}
		if st.Snapshot.Generation != uint64(len(st.Snapshot.Messages)) {
			t.Fatalf("%s: generation %d with %d messages", id, st.Snapshot.Generation, len(st.Snapshot.Messages))
		}
		for msg, gen := range acked {
			var v struct{ W int }
			json.Unmarshal([]byte(msg), &v)
			if v.W%4 != w {
				continue
			}
			i, ok := at[msg]
			if !ok {
				t.Fatalf("%s: acknowledged message %s (generation %d) is lost", id, msg, gen)
			}
			if uint64(i+1) != gen {
				t.Fatalf("%s: message %s acknowledged at generation %d is at %d", id, msg, gen, i+1)
			}
		}
	}
	t.Logf("%d commits acknowledged, %d before the kill; %d unavailable errors", len(acked), before, sawUnavailable)
}

// TestLargeArtifactChunked: an artifact's bytes are kept in rows of at
// most ChunkSize and come back whole.
func TestLargeArtifactChunked(t *testing.T) {
	srv := pgtest.Start(t)
	url := newDB(t, srv)
	s := openStore(t, url)
	data := make([]byte, 3*pgstore.ChunkSize+12345)
	for i := range data {
		data[i] = byte(i*31 + i>>12)
	}
	if _, err := s.Commit(ctx, "big", &session.Change{AppendArtifacts: []session.Artifact{{ID: "blob", Data: data}}}, session.CommitOptions{}); err != nil {
		t.Fatal(err)
	}
	if n := count(t, url, "SELECT count(*) FROM blobs"); n != 4 {
		t.Fatalf("%d chunk rows, want 4", n)
	}
	if n := count(t, url, "SELECT max(length(data)) FROM blobs"); n > pgstore.ChunkSize {
		t.Fatalf("a chunk row holds %d bytes", n)
	}
	p, err := s.Artifacts(ctx, "big", []string{"blob"}, true)
	if err != nil || len(p.Items) != 1 || !bytes.Equal(p.Items[0].Data, data) {
		t.Fatalf("Artifacts: %v, %d items", err, len(p.Items))
	}
	st, err := s.Load(ctx, "big", 0)
	if err != nil || !bytes.Equal(st.Snapshot.Artifacts[0].Data, data) {
		t.Fatalf("Load: %v", err)
	}
}

// TestReadsMatchMemStore runs the same commits on pgstore and on the
// in-memory store and compares every targeted read, page by page.
func TestReadsMatchMemStore(t *testing.T) {
	srv := pgtest.Start(t)
	pg := openStore(t, newDB(t, srv))
	mem := session.NewMemStore()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	trunc := int64(4)
	changes := []*session.Change{
		{Replace: storetest.FullSnapshot()},
		{AppendMessages: []session.Value{session.Value(`{"m": 4}`), session.Value(`5`)}, AppendTraces: []session.Trace{{Seq: 2, Time: t0, RunID: "r2", Type: "x"}},
			Checkpoint: &session.LoopCheckpoint{RunID: "r2", Turn: 1, State: session.Value(`{"s":1}`), CreatedAt: t0}},
		{TruncateMessages: &trunc, AppendMessages: []session.Value{session.Value(`"after truncate"`)}, AppendTraces: []session.Trace{{Seq: 3, Time: t0, RunID: "r2", Type: "y"}}},
		{PutArtifacts: []session.Artifact{{ID: "a2", Data: []byte("new bytes")}}, DeleteArtifacts: []string{"a1"},
			Checkpoint: &session.LoopCheckpoint{RunID: "r2", Turn: 2, CreatedAt: t0}},
		{AppendMessages: []session.Value{session.Value(`6`), session.Value(`7`), session.Value(`8`)}},
	}
	for i, c := range changes {
		for _, s := range []session.Store{pg, mem} {
			if _, err := s.Commit(ctx, "r", c, session.CommitOptions{}); err != nil {
				t.Fatalf("commit %d: %v", i, err)
			}
		}
	}
	same := func(what string, got, want any, gerr, werr error) {
		t.Helper()
		if session.CodeOf(gerr) != session.CodeOf(werr) {
			t.Fatalf("%s: error %v, want %v", what, gerr, werr)
		}
		g, _ := json.Marshal(got)
		w, _ := json.Marshal(want)
		if !bytes.Equal(g, w) {
			t.Fatalf("%s:\n got %s\nwant %s", what, g, w)
		}
	}
	queries := []session.Query{{}, {Tail: 2}, {Tail: 100}, {From: 1, To: 3}, {SinceGeneration: 2}, {SinceGeneration: 4}, {SinceGeneration: 9},
		{Limit: 2}, {MaxBytes: 3}, {From: 2, Limit: 1}, {From: 50}, {Tail: -1}}
	for _, q := range queries {
		gp, gerr := pg.Messages(ctx, "r", q)
		mp, merr := mem.Messages(ctx, "r", q)
		same(fmt.Sprintf("Messages %+v", q), gp, mp, gerr, merr)
		gt, gerr := pg.Traces(ctx, "r", q)
		mt, merr := mem.Traces(ctx, "r", q)
		same(fmt.Sprintf("Traces %+v", q), gt, mt, gerr, merr)
		for _, run := range []string{"r1", "r2", "none"} {
			ge, gerr := pg.RunEvents(ctx, "r", run, q)
			me, merr := mem.RunEvents(ctx, "r", run, q)
			same(fmt.Sprintf("RunEvents %s %+v", run, q), ge, me, gerr, merr)
		}
	}
	for _, ids := range [][]string{nil, {"a2"}, {"a3"}} {
		for _, data := range []bool{false, true} {
			ga, gerr := pg.Artifacts(ctx, "r", ids, data)
			ma, merr := mem.Artifacts(ctx, "r", ids, data)
			same(fmt.Sprintf("Artifacts %v %v", ids, data), ga, ma, gerr, merr)
		}
	}
	gh, gs, gerr := pg.Head(ctx, "r")
	mh, ms, merr := mem.Head(ctx, "r")
	gs.LiveBytes, ms.LiveBytes = 0, 0
	gh.Snapshot.UpdatedAt, mh.Snapshot.UpdatedAt, gs.UpdatedAt, ms.UpdatedAt = t0, t0, t0, t0
	gh.Snapshot.CreatedAt, mh.Snapshot.CreatedAt, gs.CreatedAt, ms.CreatedAt = t0, t0, t0, t0
	same("Head", gh, mh, gerr, merr)
	same("Head summary", gs, ms, gerr, merr)
	for at := uint64(1); at <= uint64(len(changes)); at++ {
		gl, gerr := pg.Load(ctx, "r", at)
		ml, merr := mem.Load(ctx, "r", at)
		if gerr != nil || merr != nil {
			t.Fatalf("Load %d: %v / %v", at, gerr, merr)
		}
		gl.Snapshot.UpdatedAt, ml.Snapshot.UpdatedAt = t0, t0
		same(fmt.Sprintf("Load %d messages", at), gl.Snapshot.Messages, ml.Snapshot.Messages, nil, nil)
		same(fmt.Sprintf("Load %d artifacts", at), gl.Snapshot.Artifacts, ml.Snapshot.Artifacts, nil, nil)
		same(fmt.Sprintf("Load %d checkpoints", at), gl.Checkpoints, ml.Checkpoints, nil, nil)
	}
	then := &session.Change{AppendMessages: []session.Value{session.Value(`"copied"`)}}
	gr, gerr := pg.Copy(ctx, "r", "r-copy", 3, then)
	mr, merr := mem.Copy(ctx, "r", "r-copy", 3, then)
	gr.BytesWritten = 0 // the memory store writes none
	same("Copy", gr, mr, gerr, merr)
	gp, gerr := pg.Messages(ctx, "r-copy", session.Query{})
	mp, merr := mem.Messages(ctx, "r-copy", session.Query{})
	same("Copy messages", gp, mp, gerr, merr)
	if _, err := pg.Copy(ctx, "r", "r-copy", 0, nil); session.CodeOf(err) != session.CodeConflict {
		t.Fatalf("Copy onto an existing session: %v", err)
	}
	if _, err := pg.Messages(ctx, "nope", session.Query{}); !errors.Is(err, session.ErrNotFound) {
		t.Fatalf("Messages of a missing session: %v", err)
	}
}
