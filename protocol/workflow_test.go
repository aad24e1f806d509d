package protocol_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/protocol"
	"github.com/cairn-dev/cairn/session"
)

// startDaemon builds cairnd, starts it on a fresh workspace and returns a
// client connected to it (no auto-start). The daemon is killed and reaped,
// and the client closed, at cleanup.
func startDaemon(t *testing.T) *protocol.Client {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "cairnd")
	build := exec.Command("go", "build", "-o", bin, "github.com/cairn-dev/cairn/cmd/cairnd")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building cairnd: %v\n%s", err, out)
	}
	ws := t.TempDir()
	logf, err := os.Create(filepath.Join(t.TempDir(), "cairnd.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(bin, "--workspace", ws, "--no-track-files")
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		c, err := protocol.Connect(ctx, ws, &protocol.Options{NoAutoStart: true})
		if err == nil {
			t.Cleanup(func() { _ = c.Close() })
			return c
		}
		select {
		case <-exited:
			log, _ := os.ReadFile(logf.Name())
			t.Fatalf("cairnd exited before answering; log:\n%s", log)
		case <-ctx.Done():
			t.Fatalf("cairnd did not answer: %v", err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// steps returns a spec per id, identity "v1", whose Run counts its calls in
// runs and returns {"step":id}.
func steps(runs *sync.Map, ids ...string) []protocol.Step {
	out := make([]protocol.Step, len(ids))
	for i, id := range ids {
		out[i] = protocol.Step{StepID: id, Identity: "v1", Run: func(context.Context) (session.Value, error) {
			n, _ := runs.LoadOrStore(id, new(atomic.Int32))
			n.(*atomic.Int32).Add(1)
			return session.Value(fmt.Sprintf(`{"step":%q}`, id)), nil
		}}
	}
	return out
}

func ran(runs *sync.Map) []string {
	var out []string
	runs.Range(func(k, v any) bool {
		for range v.(*atomic.Int32).Load() {
			out = append(out, k.(string))
		}
		return true
	})
	slices.Sort(out)
	return out
}

func wantResults(t *testing.T, got []session.Value, ids ...string) {
	t.Helper()
	if len(got) != len(ids) {
		t.Fatalf("%d results, want %d", len(got), len(ids))
	}
	for i, id := range ids {
		if want := fmt.Sprintf(`{"step":%q}`, id); string(got[i]) != want {
			t.Fatalf("result %d = %s, want %s", i, got[i], want)
		}
	}
}

func TestParallelResumable(t *testing.T) {
	c := startDaemon(t)

	t.Run("runs each step once, a rerun runs none", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		var runs sync.Map
		res, err := c.ParallelResumable(ctx, steps(&runs, "a", "b", "c"), "wf-once")
		if err != nil {
			t.Fatal(err)
		}
		wantResults(t, res, "a", "b", "c")
		if got := ran(&runs); !slices.Equal(got, []string{"a", "b", "c"}) {
			t.Fatalf("ran %v", got)
		}
		var again sync.Map
		res, err = c.ParallelResumable(ctx, steps(&again, "a", "b", "c"), "wf-once")
		if err != nil {
			t.Fatal(err)
		}
		wantResults(t, res, "a", "b", "c")
		if got := ran(&again); len(got) != 0 {
			t.Fatalf("rerun ran %v", got)
		}
		// Finishing the workflow starts it over.
		if err := c.FinishWorkflow(ctx, "wf-once"); err != nil {
			t.Fatal(err)
		}
		var fresh sync.Map
		if _, err := c.ParallelResumable(ctx, steps(&fresh, "a", "b"), "wf-once"); err != nil {
			t.Fatal(err)
		}
		if got := ran(&fresh); !slices.Equal(got, []string{"a", "b"}) {
			t.Fatalf("after finish ran %v", got)
		}
	})

	t.Run("a failure lets the others finish and be recorded", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		var runs sync.Map
		boom := errors.New("boom")
		specs := steps(&runs, "a", "b", "c", "d")
		specs[1].Run = func(context.Context) (session.Value, error) { return nil, boom }
		res, err := c.ParallelResumable(ctx, specs, "wf-fail")
		var se *protocol.StepError
		if !errors.As(err, &se) || se.StepID != "b" || !errors.Is(err, boom) || res != nil {
			t.Fatalf("result %v, error %v; want b's StepError and no results", res, err)
		}
		if got := ran(&runs); !slices.Equal(got, []string{"a", "c", "d"}) {
			t.Fatalf("ran %v", got)
		}
		// The rerun runs only the step that failed.
		var again sync.Map
		res, err = c.ParallelResumable(ctx, steps(&again, "a", "b", "c", "d"), "wf-fail")
		if err != nil {
			t.Fatal(err)
		}
		wantResults(t, res, "a", "b", "c", "d")
		if got := ran(&again); !slices.Equal(got, []string{"b"}) {
			t.Fatalf("rerun ran %v", got)
		}
	})

	t.Run("a changed identity fails before anything runs", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		var runs sync.Map
		if _, err := c.ParallelResumable(ctx, steps(&runs, "a"), "wf-ident"); err != nil {
			t.Fatal(err)
		}
		var again sync.Map
		specs := steps(&again, "a", "b")
		specs[0].Identity = "v2"
		_, err := c.ParallelResumable(ctx, specs, "wf-ident")
		if !errors.Is(err, session.ErrStepIdentityChanged) {
			t.Fatalf("error %v, want step_identity_changed", err)
		}
		if got := ran(&again); len(got) != 0 {
			t.Fatalf("ran %v after an identity change", got)
		}
	})

	t.Run("steps run concurrently, bounded by MaxWorkers", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		// Each step waits until all four are running: this only returns
		// when they run at once (else ctx ends and the steps fail).
		var arrived sync.WaitGroup
		arrived.Add(4)
		all := make(chan struct{})
		go func() { arrived.Wait(); close(all) }()
		var runs sync.Map
		specs := steps(&runs, "a", "b", "c", "d")
		for i := range specs {
			inner := specs[i].Run
			specs[i].Run = func(ctx context.Context) (session.Value, error) {
				arrived.Done()
				select {
				case <-all:
					return inner(ctx)
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
		}
		res, err := c.ParallelResumable(ctx, specs, "wf-conc")
		if err != nil {
			t.Fatal(err)
		}
		wantResults(t, res, "a", "b", "c", "d")

		var cur, peak atomic.Int32
		specs = steps(&sync.Map{}, "a", "b", "c", "d")
		for i := range specs {
			inner := specs[i].Run
			specs[i].Run = func(ctx context.Context) (session.Value, error) {
				n := cur.Add(1)
				defer cur.Add(-1)
				for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
				}
				return inner(ctx)
			}
		}
		if _, err := c.ParallelResumable(ctx, specs, "wf-one", protocol.MaxWorkers(1)); err != nil {
			t.Fatal(err)
		}
		if peak.Load() != 1 {
			t.Fatalf("MaxWorkers(1) ran %d steps at once", peak.Load())
		}
	})

	t.Run("InSession owns the workflow", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		for _, sid := range []string{"s1", "s2"} {
			if _, err := c.Save(ctx, api.SaveRequest{SessionID: sid, Change: &session.Change{AppendMessages: []session.Value{session.Value(`{}`)}}}); err != nil {
				t.Fatal(err)
			}
		}
		var runs sync.Map
		if _, err := c.ParallelResumable(ctx, steps(&runs, "a"), "wf-owned", protocol.InSession("s1")); err != nil {
			t.Fatal(err)
		}
		var other sync.Map
		_, err := c.ParallelResumable(ctx, steps(&other, "a", "b"), "wf-owned", protocol.InSession("s2"))
		if !errors.Is(err, session.ErrNotOwner) || len(ran(&other)) != 0 {
			t.Fatalf("error %v, ran %v; want not_owner and nothing run", err, ran(&other))
		}
		// Deleting the owner deletes the workflow: everything runs again.
		if err := c.Delete(ctx, "s1"); err != nil {
			t.Fatal(err)
		}
		var again sync.Map
		if _, err := c.ParallelResumable(ctx, steps(&again, "a"), "wf-owned"); err != nil {
			t.Fatal(err)
		}
		if got := ran(&again); !slices.Equal(got, []string{"a"}) {
			t.Fatalf("after deleting the owner ran %v", got)
		}
	})

	t.Run("a panic lets the others finish, then is raised", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		var runs sync.Map
		specs := steps(&runs, "a", "b", "c")
		specs[0].Run = func(context.Context) (session.Value, error) { panic("step a") }
		func() {
			defer func() {
				if p := recover(); p != "step a" {
					t.Fatalf("recovered %v, want the step's panic", p)
				}
			}()
			_, _ = c.ParallelResumable(ctx, specs, "wf-panic")
			t.Fatal("ParallelResumable returned instead of panicking")
		}()
		var again sync.Map
		if _, err := c.ParallelResumable(ctx, steps(&again, "a", "b", "c"), "wf-panic"); err != nil {
			t.Fatal(err)
		}
		if got := ran(&again); !slices.Equal(got, []string{"a"}) {
			t.Fatalf("rerun after the panic ran %v, want only a", got)
		}
	})

	t.Run("steps not started when ctx ends do not run", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var runs sync.Map
		specs := steps(&runs, "a", "b", "c")
		specs[0].Run = func(context.Context) (session.Value, error) {
			cancel()
			return session.Value(`1`), nil
		}
		_, err := c.ParallelResumable(ctx, specs, "wf-ctx", protocol.MaxWorkers(1))
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("error %v, want context.Canceled", err)
		}
		if got := ran(&runs); len(got) != 0 {
			t.Fatalf("ran %v after ctx ended", got)
		}
	})

	t.Run("a step without Run is invalid_argument", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_, err := c.ParallelResumable(ctx, []protocol.Step{{StepID: "a", Identity: "v1"}}, "wf-bad")
		if !errors.Is(err, session.ErrInvalidArgument) {
			t.Fatalf("error %v, want invalid_argument", err)
		}
	})
}
