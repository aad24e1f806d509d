package daemon_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/internal/pgtest"
	"github.com/cairn-dev/cairn/session"
)

// TestPostgresMaxSessionBytes: cairnd --max-session-bytes on a PostgreSQL
// store refuses a save past the limit with too_large, as on the file
// store, and takes a truncation that makes room again.
func TestPostgresMaxSessionBytes(t *testing.T) {
	srv := pgtest.Start(t)
	url := srv.CreateDB("limit")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	d := startCairnd(t, t.TempDir(), "--store", url, "--max-session-bytes", "8000")
	c := d.dial(t)
	defer c.Close()
	msg := session.Value(`"` + strings.Repeat("m", 1000) + `"`)
	var err error
	n := 0
	for ; n < 30 && err == nil; n++ {
		_, err = c.Save(ctx, api.SaveRequest{SessionID: "s", Change: &session.Change{AppendMessages: []session.Value{msg}}})
	}
	wantCode(t, "a save past --max-session-bytes", err, session.CodeTooLarge)
	cut := int64(1)
	if _, err := c.Save(ctx, api.SaveRequest{SessionID: "s", Change: &session.Change{TruncateMessages: &cut}}); err != nil {
		t.Fatalf("a truncation at the limit: %v", err)
	}
	if _, err := c.Save(ctx, api.SaveRequest{SessionID: "s", Change: &session.Change{AppendMessages: []session.Value{msg}}}); err != nil {
		t.Fatalf("a save once the truncation made room: %v", err)
	}
}
