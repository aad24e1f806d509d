package fsstore_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"go.uber.org/goleak"

	"github.com/cairn-dev/cairn/fsstore"
	"github.com/cairn-dev/cairn/session"
)

// The test binary doubles as the child process of the crash tests: with
// CAIRN_FSSTORE_CHILD set it runs that role instead of the tests.
func TestMain(m *testing.M) {
	if role := os.Getenv("CAIRN_FSSTORE_CHILD"); role != "" {
		if err := runChild(role, os.Getenv("CAIRN_FSSTORE_DIR")); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(3)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

var bg = context.Background()

// message returns the deterministic content of message number i (1-based):
// JSON text whose size varies from a few bytes to about 3 KB.
func message(i int) session.Value {
	n := (i * 7919) % 3000
	b := make([]byte, 0, n+32)
	b = append(b, `{"i":`...)
	b = strconv.AppendInt(b, int64(i), 10)
	b = append(b, `,"pad":"`...)
	for j := 0; j < n; j++ {
		b = append(b, 'a'+byte((i+j)%26))
	}
	b = append(b, `"}`...)
	return b
}

// handoffFor returns a handoff record replaced by every commit of the kill
// test, so superseded records pile up and compaction runs during the kills.
func handoffFor(i int) *session.Handoff {
	return &session.Handoff{Done: []string{fmt.Sprint(i), strings.Repeat("h", 4000)}}
}

func runChild(role, dir string) error {
	switch role {
	case "commit-loop":
		return childCommitLoop(dir)
	case "journal-loop":
		return childJournalLoop(dir)
	case "hold-lock":
		s, err := fsstore.Open(dir, fsstore.Options{})
		if err != nil {
			return err
		}
		fmt.Println("locked")
		_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
		return s.Close()
	case "fault-stop":
		return childFaultStop(dir, os.Getenv("CAIRN_FSSTORE_POINT"))
	case "prealloc-stop":
		nth, _ := strconv.Atoi(os.Getenv("CAIRN_FSSTORE_NTH"))
		return childPreallocStop(dir, os.Getenv("CAIRN_FSSTORE_POINT"), nth)
	}
	return fmt.Errorf("unknown role %q", role)
}

// childCommitLoop appends one message per commit to session "k", upserting
// a run record each time (so compaction runs in the background) and
// checkpointing every third commit, and prints each acknowledged generation.
func childCommitLoop(dir string) error {
	s, err := fsstore.Open(dir, fsstore.Options{CompactMinBytes: 2048})
	if err != nil {
		return err
	}
	var gen uint64
	if sum, err := s.Stat(bg, "k"); err == nil {
		gen = sum.Generation
	}
	out := bufio.NewWriter(os.Stdout)
	fmt.Fprintf(out, "ready %d\n", gen)
	out.Flush()
	return commitLoop(s, "k", gen, func(gen uint64) {
		fmt.Fprintf(out, "ack %d %d\n", gen, s.Stats().Compactions)
		out.Flush()
	})
}

// childJournalLoop runs commitLoop on journalSessions sessions at once,
// with a workspace journal that wraps every hundred commits or so (frames
// of a log compaction replaced linger in it until then),
// and prints each acknowledged generation as "ack <session> <gen>
// <journaled> <compactions>".
func childJournalLoop(dir string) error {
	s, err := fsstore.Open(dir, fsstore.Options{CompactMinBytes: 2048, JournalBytes: 512 << 10})
	if err != nil {
		return err
	}
	var mu sync.Mutex
	out := bufio.NewWriter(os.Stdout)
	fmt.Fprintln(out, "ready")
	out.Flush()
	errs := make(chan error, journalSessions)
	for i := range journalSessions {
		id := fmt.Sprint("g", i)
		var gen uint64
		if sum, err := s.Stat(bg, id); err == nil {
			gen = sum.Generation
		}
		go func() {
			errs <- commitLoop(s, id, gen, func(gen uint64) {
				st := s.Stats()
				mu.Lock()
				fmt.Fprintf(out, "ack %s %d %d %d\n", id, gen, st.Journaled, st.Compactions)
				out.Flush()
				mu.Unlock()
			})
		}()
	}
	return <-errs
}

// journalSessions is how many sessions childJournalLoop commits to at once.
const journalSessions = 4

// commitLoop commits to session id of s from generation gen on, for ever,
// and calls acked with each acknowledged generation.
func commitLoop(s *fsstore.Store, id string, gen uint64, acked func(gen uint64)) error {
	for {
		next := int(gen) + 1
		c := &session.Change{
			AppendMessages: []session.Value{message(next)},
			UpsertRuns:     []session.Run{{RunID: "run", Status: session.RunRunning, ToolCallsCount: int64(next)}},
			Handoff:        handoffFor(next),
		}
		if next%3 == 0 {
			c.Checkpoint = &session.LoopCheckpoint{RunID: "run", Turn: int64(next), ToolCallsCount: int64(next), State: json.RawMessage(strconv.Itoa(next))}
		}
		res, err := s.Commit(bg, id, c, session.CommitOptions{ExpectGeneration: session.Expect(gen)})
		if err != nil {
			return err
		}
		gen = res.Generation
		acked(gen)
	}
}

// childFaultStop prepares nothing: the parent did. It arms a hook that kills
// this process at point, then runs the operation that reaches it.
func childFaultStop(dir, point string) error {
	s, err := fsstore.Open(dir, fsstore.Options{Fault: func(p string) error {
		if p == point {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {}
		}
		return nil
	}})
	if err != nil {
		return err
	}
	switch point[:len("co")] {
	case "cr": // create.*: the first commit of a new session
		_, err = s.Commit(bg, "new", &session.Change{AppendMessages: []session.Value{message(1)}}, session.CommitOptions{})
	default:
		if point[:len("comp")] == "comp" {
			err = s.Compact(bg, "s")
		} else {
			_, err = s.Commit(bg, "s", &session.Change{AppendMessages: []session.Value{message(99)}}, session.CommitOptions{})
		}
	}
	if err != nil {
		return err
	}
	return fmt.Errorf("fault point %s was never reached", point)
}

// startChild starts the test binary in a child role.
func startChild(t *testing.T, role, dir string, env ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), append([]string{"CAIRN_FSSTORE_CHILD=" + role, "CAIRN_FSSTORE_DIR=" + dir}, env...)...)
	cmd.Stderr = os.Stderr
	return cmd
}
