package daemon_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/internal/pgtest"
	"github.com/cairn-dev/cairn/pgstore"
	"github.com/cairn-dev/cairn/session"
	"github.com/jackc/pgx/v5"
)

// TestPostgresVerify: verify through cairnd on a PostgreSQL store checks
// the database: ok while it is healthy, and a damaged chunk of an
// artifact's bytes is reported against its session; repair is refused
// with invalid_argument.
func TestPostgresVerify(t *testing.T) {
	srv := pgtest.Start(t)
	url := srv.CreateDB("verify")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	d := startCairnd(t, t.TempDir(), "--store", url)
	c := d.dial(t)
	defer c.Close()
	blob := bytes.Repeat([]byte("chunk"), (2*pgstore.ChunkSize)/5+3)
	for _, ch := range []*session.Change{
		{AppendMessages: []session.Value{session.Value(`"hello"`)}},
		{AppendArtifacts: []session.Artifact{{ID: "big", Data: blob}}},
	} {
		if _, err := c.Save(ctx, api.SaveRequest{SessionID: "s", Change: ch}); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := c.Verify(ctx, session.VerifyRequest{})
	if err != nil || !rep.OK || rep.Sessions != 1 || rep.Bytes < int64(len(blob)) {
		t.Fatalf("verify of a healthy database: %+v, %v; want ok, 1 session, at least %d bytes", rep, err, len(blob))
	}

	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if ct, err := conn.Exec(ctx, "UPDATE blobs SET data = set_byte(data, 3, get_byte(data, 3) # 1) WHERE n = 1"); err != nil || ct.RowsAffected() != 1 {
		t.Fatalf("corrupting a chunk: %v, %v", ct, err)
	}
	rep, err = c.Verify(ctx, session.VerifyRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.OK || len(rep.Problems) != 1 {
		t.Fatalf("verify after a chunk was corrupted: %+v; want one problem", rep)
	}
	if p := rep.Problems[0]; p.Kind != "session" || p.ID != "s" || p.Path != "postgres:blobs" || p.State != "corrupt" ||
		!strings.Contains(p.Message, `artifact "big"`) || !strings.Contains(p.Message, "hash to") {
		t.Fatalf("problem: %+v", p)
	}
	_, err = c.Repair(ctx, session.RepairRequest{SessionID: "s", Apply: true})
	wantCode(t, "repair on PostgreSQL", err, session.CodeInvalidArgument)
}
