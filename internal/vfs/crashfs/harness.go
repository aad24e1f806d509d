package crashfs

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// World describes a store's observable content, key by key (a session's
// state, a workflow, ...), as its test chooses to encode it.
type World map[string]string

// Recorder cuts the power at every sync point of a workload and checks
// each image: reopened, the store must hold exactly the world as it was
// acknowledged before the operation in flight, or the world that operation
// was going to acknowledge — every acknowledged byte there, nothing
// unacknowledged half-visible. Use NewRecorder, then run each operation of
// the workload through Op.
type Recorder struct {
	fs  *FS
	dir string
	rng *rand.Rand
	// RandomCuts is how many Random-mode images are cut at each sync
	// point, besides the SyncedOnly one.
	RandomCuts int
	// StopAtFirst stops cutting once a check has failed.
	StopAtFirst bool
	read        func(img string) (World, error)
	live        func() (World, error)
	cur         World
	ops         []*pendingOp
	cuts        []cut
	n           int
	failures    []string
	Cuts        int // images checked
	// OnCut, when set, is called at each sync point where images are
	// cut, with the site and the operation in flight.
	OnCut func(site, op string)
}

type pendingOp struct {
	name  string
	after World
}

type cut struct {
	dir, site string
	mode      Mode
	before    World
	op        *pendingOp
}

// NewRecorder records power cuts of fsys into images under dir (which it
// fills and empties). read reopens an image and describes it; live
// describes the live store once an operation is acknowledged. The world
// starts empty.
func NewRecorder(fsys *FS, dir string, seed uint64, read func(img string) (World, error), live func() (World, error)) *Recorder {
	r := &Recorder{fs: fsys, dir: dir, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), read: read, live: live, cur: World{}}
	fsys.OnSync(func(site string) { r.cutNow(site) })
	return r
}

// Cur returns the acknowledged world.
func (r *Recorder) Cur() World { return maps.Clone(r.cur) }

// SetCur sets the acknowledged world, for a workload that starts from a
// store with content.
func (r *Recorder) SetCur(w World) { r.cur = maps.Clone(w) }

// Failures returns what the checks found, in order.
func (r *Recorder) Failures() []string { return r.failures }

func (r *Recorder) cutNow(site string) {
	if len(r.ops) == 0 {
		return
	}
	if r.OnCut != nil {
		r.OnCut(site, r.ops[len(r.ops)-1].name)
	}
	if r.StopAtFirst && len(r.failures) > 0 {
		return
	}
	for i := 0; i <= r.RandomCuts; i++ {
		mode := SyncedOnly
		if i > 0 {
			mode = Random
		}
		r.n++
		dst := filepath.Join(r.dir, fmt.Sprintf("cut%06d", r.n))
		if err := r.fs.Cut(dst, mode, r.rng); err != nil {
			r.failures = append(r.failures, fmt.Sprintf("cut at %s: %v", site, err))
			return
		}
		r.cuts = append(r.cuts, cut{dir: dst, site: site, mode: mode, before: maps.Clone(r.cur), op: r.ops[len(r.ops)-1]})
	}
}

// Op runs fn, one operation of the workload (operations may nest: an
// operation run from a fault hook inside another), cutting the power at
// every sync point inside it. When fn succeeds the live world becomes the
// acknowledged one. The images cut inside are then checked. Op returns
// fn's error.
func (r *Recorder) Op(name string, fn func() error) error {
	op := &pendingOp{name: name}
	r.ops = append(r.ops, op)
	err := fn()
	if err == nil {
		w, lerr := r.live()
		if lerr != nil {
			err = fmt.Errorf("describe the live store after %s: %w", name, lerr)
		} else {
			op.after, r.cur = w, w
		}
	}
	r.ops = r.ops[:len(r.ops)-1]
	r.checkCuts(op)
	return err
}

// Final cuts the power once more after the whole workload, in every mode,
// and checks the images against the acknowledged world.
func (r *Recorder) Final() {
	op := &pendingOp{name: "end of workload", after: r.cur}
	r.ops = append(r.ops, op)
	r.cutNow("(end)")
	r.ops = r.ops[:len(r.ops)-1]
	r.checkCuts(op)
}

// checkCuts checks and removes the images cut during op.
func (r *Recorder) checkCuts(op *pendingOp) {
	keep := r.cuts[:0]
	var mine []cut
	for _, c := range r.cuts {
		if c.op == op {
			mine = append(mine, c)
		} else {
			keep = append(keep, c)
		}
	}
	r.cuts = keep
	for _, c := range mine {
		if !(r.StopAtFirst && len(r.failures) > 0) {
			r.Cuts++
			if msg := r.check(c); msg != "" {
				mode := map[Mode]string{SyncedOnly: "synced-only", Random: "random"}[c.mode]
				r.failures = append(r.failures, fmt.Sprintf("%s cut before sync at %s, during %q: %s", mode, c.site, op.name, msg))
			}
		}
		_ = os.RemoveAll(c.dir)
	}
}

func (r *Recorder) check(c cut) string {
	got, err := r.read(c.dir)
	if err != nil {
		return "reopen: " + err.Error()
	}
	if maps.Equal(got, c.before) || (c.op.after != nil && maps.Equal(got, c.op.after)) {
		return ""
	}
	want := c.op.after
	what := "the world the operation acknowledged"
	if want == nil {
		want, what = c.before, "the world before the operation (which failed)"
	}
	return fmt.Sprintf("image is neither the world before the operation nor %s: %s", what, Diff(c.before, got))
}

// Diff names the keys where got differs from want.
func Diff(want, got World) string {
	keys := slices.Sorted(maps.Keys(maps.Clone(mergeKeys(want, got))))
	var out []string
	for _, k := range keys {
		w, wok := want[k]
		g, gok := got[k]
		switch {
		case !gok:
			out = append(out, k+" missing")
		case !wok:
			out = append(out, k+" unexpected")
		case w != g:
			out = append(out, fmt.Sprintf("%s differs (%d bytes, want %d)", k, len(g), len(w)))
		}
	}
	return "versus the world before: " + strings.Join(out, "; ")
}

func mergeKeys(a, b World) map[string]bool {
	m := map[string]bool{}
	for k := range a {
		m[k] = true
	}
	for k := range b {
		m[k] = true
	}
	return m
}

// Workload runs a power-cut workload with the sync site disabled turned
// into a no-op ("" for none), randomCuts random images per sync besides
// the synced-only one, stopping at the first failed check when
// stopAtFirst; it returns the sync sites reached, the failed checks and
// how many images it checked.
type Workload func(t *testing.T, disabled string, randomCuts int, stopAtFirst bool) (sites, failures []string, cuts int)

// Check runs the workload with every sync in place, three random images
// per sync besides the synced-only one, fails t for each failed check and
// returns the sync sites reached.
func Check(t *testing.T, run Workload) []string {
	t.Helper()
	sites, failures, cuts := run(t, "", 3, false)
	for _, f := range failures {
		t.Error(f)
	}
	t.Logf("%d images checked at %d sync sites", cuts, len(sites))
	return sites
}

// Mutate is the mutation test of a workload: it must pass with every sync
// in place, and with each sync site it reaches disabled in turn, some
// power cut must lose or half-show something, so every sync is one the
// checks need.
func Mutate(t *testing.T, run Workload) { MutateOnly(t, run, nil) }

// MutateOnly is Mutate over the sites keep accepts (all when keep is
// nil), for a workload some of whose syncs another workload requires; it
// returns how many it disabled.
func MutateOnly(t *testing.T, run Workload, keep func(site string) bool) int {
	t.Helper()
	sites, failures, _ := run(t, "", 0, true)
	if len(failures) > 0 {
		t.Fatalf("the workload fails with every sync in place: %s", failures[0])
	}
	n := 0
	for _, site := range sites {
		if site == testCode || strings.HasPrefix(site, PresyncSite) {
			// A presync makes durable only what no check may need
			// (vfs.File.Presync); the cuts at it are still checked.
			continue
		}
		if keep != nil && !keep(site) {
			continue
		}
		n++
		t.Run(site, func(t *testing.T) {
			_, failures, cuts := run(t, site, 1, true)
			if len(failures) == 0 {
				t.Errorf("with this sync removed, none of %d power cuts loses or half-shows anything: no check needs it", cuts)
				return
			}
			t.Logf("caught: %s", failures[0])
		})
	}
	return n
}
