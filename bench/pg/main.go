// Command pg measures the PostgreSQL store on one real server (from the
// machine's binaries, fsync and synchronous_commit on), in one run:
//
//   - the floor: a raw single-row INSERT, autocommitted, of a message-sized
//     row, from 1 and from 32 clients;
//   - pgstore's commit of one appended message, called in process (1
//     client), and through two cairnd processes serving the same database
//     (1 client, and 32 clients split over the two daemons);
//   - the tail read (the last 20 messages) through a daemon at 100, 10,000
//     and 100,000 messages.
//
// It prints a Markdown table of medians, p99s and throughputs.
package main

import (
	"context"
	"encoding/base64"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/fxamacker/cbor/v2"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/internal/pgtest"
	"github.com/cairn-dev/cairn/pgstore"
	"github.com/cairn-dev/cairn/protocol"
	"github.com/cairn-dev/cairn/session"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

var ctx = context.Background()

func main() {
	n := flag.Int("n", 1000, "commits per latency sample set")
	per := flag.Int("per-client", 100, "commits per client in the 32-client runs")
	cairnd := flag.String("cairnd", "build/cairnd", "the cairnd to start")
	noTrack := flag.Bool("no-track-files", false, "start the daemons with --no-track-files")
	onlySave := flag.Bool("only-save", false, "measure only the 1-client save through cairnd (to profile or trace the daemon)")
	baseline := flag.String("baseline", "", "another cairnd to measure the 1-client save with too, interleaved in the same run (A/B)")
	flag.Parse()
	owner := &pgtest.Program{}
	defer owner.Close()
	cleanup = owner.Close
	srv := pgtest.Start(owner)
	url := srv.CreateDB("bench")
	msg := []byte(`{"role":"assistant","content":"` + strings.Repeat("x", 180) + `"}`)

	pool, err := pgxpool.New(ctx, url+"&pool_max_conns=40")
	check(err)
	defer pool.Close()
	_, err = pool.Exec(ctx, "CREATE TABLE floor (id bigserial PRIMARY KEY, session text NOT NULL, data bytea NOT NULL)")
	check(err)
	var rows []string
	add := func(name string, lat []time.Duration, wall time.Duration) {
		rows = append(rows, row(name, lat, wall))
	}

	insert := func(c int) error {
		_, err := pool.Exec(ctx, "INSERT INTO floor (session, data) VALUES ($1, $2)", fmt.Sprint("s", c), msg)
		return err
	}
	lat, wall := run(1, *n, insert)
	add("raw INSERT + COMMIT (floor), 1 client", lat, wall)

	// The rows any compare-and-swap commit of a message writes, without
	// pgstore: the session row moved from one generation to the next (the
	// guard aborts when it does not), the message and a commit row, in one
	// pipelined transaction: one round trip, as pgstore's commit is.
	_, err = pool.Exec(ctx, `CREATE TABLE cas_sessions (id text PRIMARY KEY, generation bigint NOT NULL);
		CREATE TABLE cas_messages (session text, idx bigint, data bytea NOT NULL, PRIMARY KEY (session, idx));
		CREATE TABLE cas_commits (session text, generation bigint, changes bytea NOT NULL, PRIMARY KEY (session, generation));
		INSERT INTO cas_sessions VALUES ('s', 0)`)
	check(err)
	var casGen int64
	casCommit := func(int) error {
		b := &pgx.Batch{}
		b.Queue("BEGIN")
		b.Queue("WITH u AS (UPDATE cas_sessions SET generation = $1 WHERE id = 's' AND generation = $2 RETURNING 1) SELECT 1 / count(*) FROM u", casGen+1, casGen)
		b.Queue("INSERT INTO cas_messages VALUES ('s', $1, $2)", casGen, msg)
		b.Queue("INSERT INTO cas_commits VALUES ('s', $1, $2)", casGen+1, msg)
		b.Queue("COMMIT")
		err := pool.SendBatch(ctx, b).Close()
		casGen++
		return err
	}
	lat, wall = run(1, *n, casCommit)
	add("the rows of a CAS commit (session row, message, commit row), one pipelined transaction, 1 client", lat, wall)

	st, err := pgstore.Open(ctx, url, pgstore.Options{})
	check(err)
	commit := func(c int) error {
		_, err := st.Commit(ctx, fmt.Sprint("direct", c), &session.Change{AppendMessages: []session.Value{msg}}, session.CommitOptions{})
		return err
	}
	lat, wall = run(1, *n, commit)
	add("pgstore.Commit in process, 1 client", lat, wall)
	// What cairnd's commit adds inside the transaction: its events, as a
	// row of the events table and a pg_notify (see pgstore.Notifier).
	notified := func(c int) error {
		sid := fmt.Sprint("events", c)
		_, err := st.Commit(ctx, sid, &session.Change{AppendMessages: []session.Value{msg}}, session.CommitOptions{Notify: func(gen uint64) string {
			// Encoded as the engine encodes a commit's events, so that the
			// daemons listening on this database can decode them.
			b, err := cbor.Marshal([]api.Event{{Type: "session.committed", Data: map[string]any{"session_id": sid, "generation": gen}}})
			check(err)
			return base64.StdEncoding.EncodeToString(b)
		}})
		return err
	}
	lat, wall = run(1, *n, notified)
	add("pgstore.Commit in process with its events, 1 client", lat, wall)

	// Two daemons (two workspaces) on the database.
	var socks [2]string
	var pids [2]int
	for i := range socks {
		socks[i], pids[i] = startDaemon(owner, *cairnd, url, *noTrack)
	}
	dial := func(i int) *protocol.Client {
		c, err := protocol.Dial(ctx, socks[i%2], nil)
		check(err)
		return c
	}
	c0 := dial(0)
	save := func(c *protocol.Client, sid string) error {
		_, err := c.Save(ctx, api.SaveRequest{SessionID: sid, Change: &session.Change{AppendMessages: []session.Value{msg}}})
		return err
	}
	if *baseline != "" {
		// A/B: the baseline daemon on the same database, rounds
		// interleaved so that load on the machine falls on both alike.
		// A database of its own: the baseline may be a build with an
		// older schema, which a newer one's database refuses.
		sockB, pidB := startDaemon(owner, *baseline, srv.CreateDB("baseline"), *noTrack)
		cb, err := protocol.Dial(ctx, sockB, nil)
		check(err)
		var la, lb []time.Duration
		var wa, wb, ca, cb2 time.Duration
		for range 10 {
			c := cpu(pids[0])
			l, w := run(1, *n/10, func(int) error { return save(c0, "d1") })
			la, wa, ca = append(la, l...), wa+w, ca+cpu(pids[0])-c
			c = cpu(pidB)
			l, w = run(1, *n/10, func(int) error { return save(cb, "b1") })
			lb, wb, cb2 = append(lb, l...), wb+w, cb2+cpu(pidB)-c
		}
		add(fmt.Sprintf("save through cairnd, 1 client (cairnd CPU %.0f µs/save)", float64(ca.Microseconds())/float64(len(la))), la, wa)
		add(fmt.Sprintf("save through the baseline cairnd, 1 client (cairnd CPU %.0f µs/save)", float64(cb2.Microseconds())/float64(len(lb))), lb, wb)
	} else {
		lat, wall = run(1, *n, func(int) error { return save(c0, "d1") })
		add("save through cairnd, 1 client", lat, wall)
	}
	if *onlySave {
		print(rows)
		return
	}

	clients := make([]*protocol.Client, 32)
	for i := range clients {
		clients[i] = dial(i)
	}
	lat, wall = run(32, *per, func(i int) error { return insert(i) })
	add("raw INSERT + COMMIT (floor), 32 clients", lat, wall)
	lat, wall = run(32, *per, commit)
	add("pgstore.Commit in process, 32 clients (own sessions)", lat, wall)
	lat, wall = run(32, *per, notified)
	add("pgstore.Commit in process with its events, 32 clients (own sessions)", lat, wall)
	lat, wall = run(32, *per, func(i int) error { return save(clients[i], fmt.Sprint("d32-", i)) })
	add("save through two cairnd, 32 clients (own sessions)", lat, wall)

	// Tail reads as the session grows, in batches of 1,000 messages.
	var tails []string
	grown := 0
	batch := make([]session.Value, 1000)
	for i := range batch {
		batch[i] = msg
	}
	for _, size := range []int{100, 10000, 100000} {
		for grown < size {
			k := min(len(batch), size-grown)
			_, err := c0.Save(ctx, api.SaveRequest{SessionID: "tail", Change: &session.Change{AppendMessages: batch[:k]}})
			check(err)
			grown += k
		}
		lat, wall = run(1, 300, func(int) error {
			r, err := c0.Messages(ctx, api.MessagesRequest{SessionID: "tail", Tail: 20})
			if err == nil && len(r.Messages) != 20 {
				err = fmt.Errorf("tail read %d messages", len(r.Messages))
			}
			return err
		})
		tails = append(tails, row(fmt.Sprintf("tail read (20) through cairnd at %d messages", size), lat, wall))
	}
	print(append(rows, tails...))
}

func print(rows []string) {
	fmt.Println("| operation | median | p99 | throughput |")
	fmt.Println("|---|---|---|---|")
	for _, r := range rows {
		fmt.Println(r)
	}
}

// run has clients goroutines each do each operations, and returns every
// operation's latency and the wall time.
func run(clients, each int, op func(client int) error) ([]time.Duration, time.Duration) {
	var mu sync.Mutex
	var all []time.Duration
	var wg sync.WaitGroup
	start := time.Now()
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lat := make([]time.Duration, 0, each)
			for range each {
				t := time.Now()
				check(op(c))
				lat = append(lat, time.Since(t))
			}
			mu.Lock()
			all = append(all, lat...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	return all, time.Since(start)
}

func row(name string, lat []time.Duration, wall time.Duration) string {
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	q := func(p float64) time.Duration { return lat[min(len(lat)-1, int(p*float64(len(lat))))] }
	return fmt.Sprintf("| %s | %s | %s | %.0f/s |", name, us(q(0.5)), us(q(0.99)), float64(len(lat))/wall.Seconds())
}

func us(d time.Duration) string { return fmt.Sprintf("%.0f µs", float64(d.Microseconds())) }

// cpu returns the CPU time process pid has used (user and system), from
// /proc, in clock ticks of 10 ms.
func cpu(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	check(err)
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	var u, s int64
	fmt.Sscan(f[11], &u)
	fmt.Sscan(f[12], &s)
	return time.Duration(u+s) * 10 * time.Millisecond
}

func startDaemon(owner *pgtest.Program, cairnd, url string, noTrack bool) (string, int) {
	ws, err := os.MkdirTemp("", "cairn-pgbench-")
	check(err)
	args := []string{"--workspace", ws, "--store", url, "--log-level", "warn"}
	if noTrack {
		args = append(args, "--no-track-files")
	}
	cmd := exec.Command(cairnd, args...)
	cmd.Stderr = os.Stderr
	check(cmd.Start())
	owner.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		os.RemoveAll(ws)
	})
	sock, err := protocol.SocketPath(ws)
	check(err)
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := protocol.Dial(ctx, sock, nil)
		if err == nil {
			c.Close()
			return sock, cmd.Process.Pid
		}
		if time.Now().After(deadline) {
			check(fmt.Errorf("cairnd on %s did not answer: %w", filepath.Base(ws), err))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// cleanup stops the server and the daemons when check exits.
var cleanup func()

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench/pg:", err)
		if cleanup != nil {
			cleanup()
		}
		os.Exit(1)
	}
}
