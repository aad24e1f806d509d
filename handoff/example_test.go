package handoff_test

import (
	"fmt"

	"github.com/cairn-dev/cairn/handoff"
	"github.com/cairn-dev/cairn/session"
)

// ExampleCheck lists what a handoff lacks, as `cairn handoff ID --check`
// does.
func ExampleCheck() {
	s := &session.Snapshot{
		SessionID: "demo",
		Handoff: &session.Handoff{
			Done:     []string{"Added the /healthz endpoint."},
			Risks:    []string{"none"},
			NextStep: &session.NextStep{Task: "Wire /healthz into the deploy probe."},
		},
	}
	for _, m := range handoff.Check(s) {
		fmt.Println(m.Key)
	}
	// Output:
	// verification
	// restart_path
	// reviewed_version
	// next_step
}
