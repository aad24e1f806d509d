package pgstore_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/internal/pgtest"
	"github.com/cairn-dev/cairn/pgstore"
	"github.com/cairn-dev/cairn/session"
	"github.com/jackc/pgx/v5"
)

// verifyBlobSize spans three chunks, so a chunk in the middle can be lost
// or damaged.
const verifyBlobSize = 2*pgstore.ChunkSize + 7

// seedVerify writes two sessions ("s1" with messages, traces and a
// three-chunk artifact over three generations; "s2" with one message) and
// a workflow of s1 with one step.
func seedVerify(t *testing.T, s *pgstore.Store) {
	t.Helper()
	blob := bytes.Repeat([]byte("0123456789abcdef"), verifyBlobSize/16+1)[:verifyBlobSize]
	changes := []*session.Change{
		{AppendMessages: []session.Value{session.Value(`"one"`), session.Value(`"two"`)}},
		{AppendMessages: []session.Value{session.Value(`"three"`)},
			AppendTraces: []session.Trace{{Type: "tool", Time: time.Now(), Data: session.Value(`{"n":1}`)}, {Type: "tool", Time: time.Now()}}},
		{AppendArtifacts: []session.Artifact{{ID: "big", Data: blob}}},
	}
	for _, c := range changes {
		if _, err := s.Commit(ctx, "s1", c, session.CommitOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Commit(ctx, "s2", &session.Change{AppendMessages: []session.Value{session.Value(`"x"`)}}, session.CommitOptions{}); err != nil {
		t.Fatal(err)
	}
	st := session.StepRecord{StepID: "a", Identity: "i-a", Result: session.Value(`1`), CompletedAt: time.Now()}
	if err := s.SaveStep(ctx, "w1", "s1", st); err != nil {
		t.Fatal(err)
	}
}

// digest is a hash of every row of the tables Verify reads, to show it
// changes nothing.
func digest(t *testing.T, url string) string {
	t.Helper()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var out []string
	for _, table := range []string{"sessions", "commits", "messages", "traces", "blobs", "blob_refs", "workflows", "checkpoints", "leases"} {
		var d string
		if err := conn.QueryRow(ctx, "SELECT coalesce(md5(string_agg(t::text, ',' ORDER BY t::text)), '') FROM "+table+" t").Scan(&d); err != nil {
			t.Fatal(err)
		}
		out = append(out, table+":"+d)
	}
	return strings.Join(out, " ")
}

// TestVerifyHealthy: a healthy database verifies ok, with every session
// and workflow counted and every byte of the rows read.
func TestVerifyHealthy(t *testing.T) {
	srv := pgtest.Start(t)
	url := newDB(t, srv)
	s := openQuiet(t, url)
	seedVerify(t, s)
	before := digest(t, url)
	rep, err := s.Verify(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK || len(rep.Problems) != 0 || rep.Sessions != 2 || rep.Workflows != 1 || rep.Bytes < verifyBlobSize {
		t.Fatalf("Verify: %+v; want ok, 2 sessions, 1 workflow, at least %d bytes", rep, verifyBlobSize)
	}
	if after := digest(t, url); after != before {
		t.Fatalf("Verify changed the database:\n%s\n%s", before, after)
	}
	// An empty database is ok too.
	rep, err = openQuiet(t, newDB(t, srv)).Verify(ctx)
	if err != nil || !rep.OK || rep.Sessions != 0 || rep.Workflows != 0 {
		t.Fatalf("empty database: %+v, %v", rep, err)
	}
}

// TestVerifyDamage: each kind of damage, made with raw SQL, is reported
// against the session or workflow it is in, in the table it is in, with a
// detail that says what is wrong, and Verify changes nothing.
func TestVerifyDamage(t *testing.T) {
	srv := pgtest.Start(t)
	for _, tc := range []struct {
		name, sql  string
		kind, id   string
		path, want string
	}{
		{"message row deleted", "DELETE FROM messages WHERE session_id = 's1' AND idx = 1",
			"session", "s1", "messages", "2 messages rows at positions 0..2; the head counts 3"},
		{"trace row deleted", "DELETE FROM traces WHERE session_id = 's1' AND idx = 0",
			"session", "s1", "traces", "1 traces rows at positions 1..1; the head counts 2"},
		{"blob chunk corrupt", "UPDATE blobs SET data = set_byte(data, 10, (get_byte(data, 10) + 1) % 256) WHERE n = 1",
			"session", "s1", "blobs", "bytes hash to"},
		{"blob chunk missing", "DELETE FROM blobs WHERE n = 1",
			"session", "s1", "blobs", "chunk 1 is missing"},
		{"blob chunk cut short", "UPDATE blobs SET data = substring(data from 1 for 5) WHERE n = 2",
			"session", "s1", "blobs", "its chunks hold"},
		{"blob gone", "DELETE FROM blobs",
			"session", "s1", "blobs", "not in the database"},
		{"blob reference gone", "DELETE FROM blob_refs",
			"session", "s1", "blob_refs", "no blob_refs row"},
		{"commit generation changed", "UPDATE commits SET generation = 7 WHERE session_id = 's1' AND generation = 2",
			"session", "s1", "commits", "generation 3 follows 1"},
		{"session generation changed", "UPDATE sessions SET generation = 5 WHERE id = 's2'",
			"session", "s2", "commits", "the last commit row is generation 1, the session row says 5"},
		{"commit row undecodable", "UPDATE commits SET changes = '\\xff' WHERE session_id = 's2'",
			"session", "s2", "commits", "generation 1 does not decode"},
		{"byte accounting broken", "UPDATE sessions SET data_bytes = data_bytes + 1 WHERE id = 's2'",
			"session", "s2", "sessions", "data_bytes is"},
		{"head undecodable", "UPDATE sessions SET head = '\\xff' WHERE id = 's2'",
			"session", "s2", "sessions", "the head does not decode"},
		{"workflow undecodable", "UPDATE workflows SET data = '\\xff'",
			"workflow", "w1", "workflows", "does not decode"},
		{"workflow owner changed", "UPDATE workflows SET session_id = 's2'",
			"workflow", "w1", "workflows", `its row names session "s1"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url := newDB(t, srv)
			s := openQuiet(t, url)
			seedVerify(t, s)
			exec(t, url, tc.sql)
			before := digest(t, url)
			rep, err := s.Verify(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if rep.OK || rep.Sessions != 2 || rep.Workflows != 1 {
				t.Fatalf("Verify: %+v; want not ok, 2 sessions, 1 workflow", rep)
			}
			found := false
			for _, p := range rep.Problems {
				if p.Kind == tc.kind && p.ID == tc.id && p.Path == pgstore.TablePath+tc.path && strings.Contains(p.Message, tc.want) && p.State != "" {
					found = true
				}
			}
			if !found {
				t.Fatalf("no %s problem on %s %q containing %q in %+v", tc.path, tc.kind, tc.id, tc.want, rep.Problems)
			}
			if after := digest(t, url); after != before {
				t.Fatalf("Verify changed the database:\n%s\n%s", before, after)
			}
		})
	}
}

// TestRepairRefused: repair is the file store's salvage; on PostgreSQL it
// is refused with invalid_argument and changes nothing.
func TestRepairRefused(t *testing.T) {
	srv := pgtest.Start(t)
	url := newDB(t, srv)
	s := openQuiet(t, url)
	seedVerify(t, s)
	before := digest(t, url)
	_, err := s.Repair(ctx, session.RepairRequest{SessionID: "s1", Apply: true})
	if session.CodeOf(err) != session.CodeInvalidArgument || !strings.Contains(err.Error(), "file store") {
		t.Fatalf("Repair: %v; want invalid_argument naming the file store", err)
	}
	if after := digest(t, url); after != before {
		t.Fatal("Repair changed the database")
	}
}
