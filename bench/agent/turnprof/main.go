//go:build linux

// Command turnprof splits the Go side of one embedded agent turn (what
// libcairn's cairn_call does for a checkpoint carrying two messages) into
// its parts, timed turn by turn: the JSON decode of the request, the
// engine's Checkpoint (with the workspace tracker's manifest, as libcairn
// opens it, and without), the tracker's RecordManifest alone, the JSON
// encode of the result, and the 8 KiB append+fdatasync floor. It writes a
// CPU profile of the tracked turns with -cpuprofile.
//
//	go run ./bench/agent/turnprof -turns 2000 -cpuprofile build/turn.pprof
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/fsstore"
	"github.com/cairn-dev/cairn/workspace"
)

type stack struct {
	eng *engine.Engine
	st  *fsstore.Store
	tr  *workspace.Tracker
	run string
}

// open builds the stack of libcairn's embedded mode (capi's openInstance).
func open(dir string, tracked bool) *stack {
	st, err := fsstore.Open(dir, fsstore.Options{})
	if err != nil {
		log.Fatal(err)
	}
	s := &stack{st: st}
	eopts := engine.Options{Root: dir}
	if tracked {
		tr, err := workspace.Open(dir, workspace.Options{})
		if err != nil {
			log.Fatal(err)
		}
		s.tr, eopts.Workspace = tr, tr
	}
	s.eng = engine.New(st, eopts)
	ctx := context.Background()
	save := decode[api.SaveRequest]([]byte(`{"session_id":"agent","change":{"append_messages":[{"role":"system","content":"you are an agent"}]}}`))
	if _, err := (engine.Served{Engine: s.eng}).Save(ctx, save); err != nil {
		log.Fatal(err)
	}
	r, err := s.eng.BeginRun(ctx, api.BeginRunRequest{SessionID: "agent"})
	if err != nil {
		log.Fatal(err)
	}
	s.run = r.RunID
	return s
}

func (s *stack) close() {
	_ = s.eng.Close()
	if s.tr != nil {
		_ = s.tr.Close()
	}
	_ = s.st.Close()
}

// decode is capi's decodeParams: strict, unknown fields refused.
func decode[P any](b []byte) P {
	var p P
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		log.Fatal(err)
	}
	return p
}

// request is the checkpoint request the Python binding sends for turn i
// (bench/bindings/python_turn.py's messages, compact JSON).
func request(run string, i int) []byte {
	x, y, z := strings.Repeat("x", 2000), strings.Repeat("y", 3000), strings.Repeat("z", 3000)
	return fmt.Appendf(nil, `{"run_id":%q,"turn":%d,"new_messages":[{"role":"user","content":%q,"turn":%d},`+
		`{"role":"assistant","content":[{"type":"text","text":%q},{"type":"tool_use","id":"t%d","name":"edit","input":{"path":"src/a.go","patch":%q}}]}],`+
		`"tool_calls_count":%d,"usage":{"input_tokens":%d,"output_tokens":%d,"total_tokens":%d,"cost":%g},"state":{"step":"after_tool","turn":%d}}`,
		run, i, x, i, y, i, z, i, 1000*i, 200*i, 1200*i, 0.001*float64(i), i)
}

type dist []time.Duration

func (d dist) med() float64 {
	s := slices.Clone(d)
	slices.Sort(s)
	return float64(s[len(s)/2].Nanoseconds()) / 1000
}

func (d dist) p99() float64 {
	s := slices.Clone(d)
	slices.Sort(s)
	return float64(s[min(len(s)-1, len(s)*99/100)].Nanoseconds()) / 1000
}

func main() {
	turns := flag.Int("turns", 1000, "turns per variant")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the tracked turns here")
	dir := flag.String("dir", "", "parent of the temp workspaces")
	flag.Parse()
	root, err := os.MkdirTemp(*dir, "turnprof-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(root)
	ctx := context.Background()
	mk := func(name string) string {
		d := filepath.Join(root, name)
		if err := os.Mkdir(d, 0o755); err != nil {
			log.Fatal(err)
		}
		return d
	}
	tracked, untracked := open(mk("tracked"), true), open(mk("untracked"), false)
	defer tracked.close()
	defer untracked.close()
	mani := open(mk("manifest"), true)
	defer mani.close()
	floor, err := os.OpenFile(filepath.Join(root, "floor.bin"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		log.Fatal(err)
	}
	defer floor.Close()
	block := bytes.Repeat([]byte{0x5a}, 8192)

	var dec, engT, engU, enc, man, fl dist
	reqs := make([][]byte, *turns+1)
	for i := 1; i <= *turns; i++ {
		reqs[i] = request(tracked.run, i)
	}
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			log.Fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			log.Fatal(err)
		}
		defer pprof.StopCPUProfile()
	}
	// The variants take turns, so that they share the disk's conditions.
	for i := 1; i <= *turns; i++ {
		t0 := time.Now()
		p := decode[api.CheckpointRequest](reqs[i])
		t1 := time.Now()
		res, err := tracked.eng.Checkpoint(ctx, p)
		if err != nil {
			log.Fatal(err)
		}
		t2 := time.Now()
		if _, err := json.Marshal(res); err != nil {
			log.Fatal(err)
		}
		t3 := time.Now()
		dec, engT, enc = append(dec, t1.Sub(t0)), append(engT, t2.Sub(t1)), append(enc, t3.Sub(t2))

		pu := p
		pu.RunID = untracked.run
		t0 = time.Now()
		if _, err := untracked.eng.Checkpoint(ctx, pu); err != nil {
			log.Fatal(err)
		}
		engU = append(engU, time.Since(t0))

		t0 = time.Now()
		if _, err := mani.tr.RecordManifest(ctx); err != nil {
			log.Fatal(err)
		}
		man = append(man, time.Since(t0))

		t0 = time.Now()
		if _, err := floor.Write(block); err != nil {
			log.Fatal(err)
		}
		if err := syscall.Fdatasync(int(floor.Fd())); err != nil {
			log.Fatal(err)
		}
		fl = append(fl, time.Since(t0))
	}
	fmt.Printf("%-42s %10s %10s\n", "part of a turn (Go side, embedded)", "median us", "p99 us")
	for _, r := range []struct {
		name string
		d    dist
	}{
		{"JSON decode of the request (strict)", dec},
		{"engine Checkpoint, tracked workspace", engT},
		{"engine Checkpoint, no tracker", engU},
		{"tracker RecordManifest alone (no change)", man},
		{"JSON encode of the result", enc},
		{"floor: 8 KiB append + fdatasync", fl},
	} {
		fmt.Printf("%-42s %10.1f %10.1f\n", r.name, r.d.med(), r.d.p99())
	}
}
