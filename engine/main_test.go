package engine_test

import (
	"flag"
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// The crash test re-executes this binary as the agent process it kills.
	if os.Getenv(crashChildEnv) != "" {
		os.Exit(runCrashChild())
	}
	flag.Parse()
	// rapid writes failure files under testdata/ by default; tests must
	// not write into the working tree (the seed it prints reproduces).
	if f := flag.Lookup("rapid.nofailfile"); f != nil && !isFlagSet("rapid.nofailfile") {
		_ = f.Value.Set("true")
	}
	goleak.VerifyTestMain(m)
}

func isFlagSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) {
		if f.Name == name {
			set = true
		}
	})
	return set
}
