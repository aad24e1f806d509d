package pgtest_test

import (
	"context"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/internal/pgtest"
	"github.com/jackc/pgx/v5"
)

func query(t *testing.T, url, sql string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var s string
	if err := conn.QueryRow(ctx, sql).Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestServerKillRestart(t *testing.T) {
	s := pgtest.Start(t)
	for _, tc := range []struct{ setting, want string }{{"fsync", "on"}, {"synchronous_commit", "on"}, {"listen_addresses", "127.0.0.1"}} {
		if got := query(t, s.SocketURL(), "SHOW "+tc.setting); got != tc.want {
			t.Fatalf("%s = %q, want %q", tc.setting, got, tc.want)
		}
	}
	url := s.CreateDB("kr")
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "CREATE TABLE t (v int); INSERT INTO t VALUES (7)"); err != nil {
		t.Fatal(err)
	}
	s.Kill()
	if err := conn.Ping(ctx); err == nil {
		t.Fatal("ping succeeded after the postmaster was killed")
	}
	s.Restart()
	if got := query(t, url, "SELECT v::text FROM t"); got != "7" {
		t.Fatalf("after restart: %q", got)
	}
}
