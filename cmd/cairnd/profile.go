package main

import (
	"os"
	"path/filepath"
	"runtime/pprof"

	"github.com/hashicorp/go-hclog"
)

// profileEnv names the environment variable that, set to a directory,
// makes cairnd profile itself for performance work: a CPU profile over its
// whole run (cpu.pprof) and, at exit, the allocation profile (allocs.pprof),
// both for `go tool pprof`. Not a flag, so that usage stays about serving.
const profileEnv = "CAIRN_PPROF_DIR"

// startProfile starts the profiles $CAIRN_PPROF_DIR asks for and returns
// what writes them out; a no-op when it is unset. A profile that cannot be
// written is logged, never fatal.
func startProfile(log hclog.Logger) (stop func()) {
	dir := os.Getenv(profileEnv)
	if dir == "" {
		return func() {}
	}
	cpu, err := os.Create(filepath.Join(dir, "cpu.pprof"))
	if err == nil {
		err = pprof.StartCPUProfile(cpu)
	}
	if err != nil {
		log.Warn("cannot profile", "dir", dir, "error", err)
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		_ = cpu.Close()
		f, err := os.Create(filepath.Join(dir, "allocs.pprof"))
		if err == nil {
			err = pprof.Lookup("allocs").WriteTo(f, 0)
			_ = f.Close()
		}
		if err != nil {
			log.Warn("cannot write the allocation profile", "dir", dir, "error", err)
		}
	}
}
