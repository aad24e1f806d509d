package main_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/cairn-dev/cairn/internal/pgtest"
	"github.com/cairn-dev/cairn/pgstore"
	"github.com/cairn-dev/cairn/session"
	"github.com/jackc/pgx/v5"
)

// TestCLIVerifyPostgres: cairn verify on a daemon whose store is
// PostgreSQL (CAIRN_STORE) says what it checked, reports a corrupted
// chunk against its session and table, exits 1, and does not suggest
// cairn repair, which PostgreSQL refuses.
func TestCLIVerifyPostgres(t *testing.T) {
	srv := pgtest.Start(t)
	url := srv.CreateDB("cliverify")
	ctx := context.Background()
	st, err := pgstore.Open(ctx, url, pgstore.Options{CollectEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	blob := bytes.Repeat([]byte("b"), pgstore.ChunkSize+10)
	if _, err := st.Commit(ctx, "pgs", &session.Change{AppendArtifacts: []session.Artifact{{ID: "art", Data: blob}}}, session.CommitOptions{}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	ws := newWorkspace(t)
	env := []string{"CAIRN_STORE=" + url}
	t.Cleanup(func() { cliEnv(t, ws, "", env, "daemon", "stop") })
	if out, errs, code := cliEnv(t, ws, "", env, "verify"); code != 0 || !strings.Contains(out, "checked 1 session log(s)") {
		t.Fatalf("verify of a healthy database: exit %d\n%s%s", code, out, errs)
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "UPDATE blobs SET data = set_byte(data, 0, 0) WHERE n = 1"); err != nil {
		t.Fatal(err)
	}
	out, errs, code := cliEnv(t, ws, "", env, "verify")
	if code != 1 || !lineHas(out, "session", "pgs", "corrupt") || !strings.Contains(out, "postgres:blobs") ||
		!strings.Contains(out, `artifact "art"`) || strings.Contains(out, "cairn repair") {
		t.Fatalf("verify of a corrupted chunk: exit %d\n%s%s", code, out, errs)
	}
	t.Logf("cairn verify:\n%s", out)
}
