package protocol_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestClientDependsOnContractOnly fails when the client (package protocol)
// links the engine, a store, the workspace tracker, process probing, the
// handoff renderer or fsnotify: a program that only talks to cairnd needs
// package api and the wire, nothing else.
func TestClientDependsOnContractOnly(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/cairn-dev/cairn/protocol").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	forbidden := []string{
		"github.com/cairn-dev/cairn/engine",
		"github.com/cairn-dev/cairn/workspace",
		"github.com/cairn-dev/cairn/fsstore",
		"github.com/cairn-dev/cairn/procs",
		"github.com/cairn-dev/cairn/handoff",
		"github.com/fsnotify/fsnotify",
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list -deps printed too little to be a dependency list: %q", out)
	}
	for _, d := range deps {
		for _, f := range forbidden {
			if d == f || strings.HasPrefix(d, f+"/") {
				t.Errorf("protocol depends on %s", d)
			}
		}
	}
}
