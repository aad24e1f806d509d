package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/internal/pgtest"
	"github.com/cairn-dev/cairn/pgstore"
	"github.com/jackc/pgx/v5"
)

// rawListener is a connection of its own that LISTENs on pgstore.Channel,
// to count the wake-ups themselves rather than the events they announce.
func rawListener(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	if _, err := conn.Exec(ctx, "LISTEN "+pgstore.Channel); err != nil {
		t.Fatal(err)
	}
	return conn
}

// wakeUps counts the notifications conn gets: it waits up to first for
// the first, then takes what follows within quiet of the last.
func wakeUps(t *testing.T, conn *pgx.Conn, first, quiet time.Duration) int {
	t.Helper()
	n := 0
	wait := first
	for {
		wctx, cancel := context.WithTimeout(ctx, wait)
		_, err := conn.WaitForNotification(wctx)
		cancel()
		if err != nil {
			if wctx.Err() == nil {
				t.Fatalf("waiting for a notification: %v", err)
			}
			return n
		}
		n++
		wait = quiet
	}
}

// TestWakeUpsCoalesced commits ten times in a row, each commit with its
// events: one wake-up (two at most, if the commits outlast the linger)
// announces them all, and the listening store still gets every event.
func TestWakeUpsCoalesced(t *testing.T) {
	defer pgstore.SetWakeLinger(2 * time.Second)()
	srv := pgtest.Start(t)
	url := newDB(t, srv)
	a, b := openStore(t, url), openStore(t, url)
	raw := rawListener(t, url)
	got := listen(t, b)
	const commits = 10
	for i := 0; i < commits; i++ {
		commitNotify(t, a, "s", "p")
	}
	n := wakeUps(t, raw, 60*time.Second, 3*time.Second)
	t.Logf("%d commits, %d wake-ups", commits, n)
	if n < 1 || n > 2 {
		t.Fatalf("%d commits sent %d wake-ups, want 1 or 2", commits, n)
	}
	got.waitFor(t, commits)
}

// TestCloseSendsTheWakeUpInHand closes a store while its wake-up lingers:
// the wake-up goes out at Close, not after the linger, and not never.
func TestCloseSendsTheWakeUpInHand(t *testing.T) {
	defer pgstore.SetWakeLinger(time.Hour)()
	srv := pgtest.Start(t)
	url := newDB(t, srv)
	a, err := pgstore.Open(ctx, url, pgstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	raw := rawListener(t, url)
	commitNotify(t, a, "s", "p")
	a.Close()
	if n := wakeUps(t, raw, 30*time.Second, time.Second); n != 1 {
		t.Fatalf("Close sent %d wake-ups, want the one in hand", n)
	}
}
