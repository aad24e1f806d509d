package daemon

import (
	"testing"
	"time"
)

// SetInlineHandoff sets how long a request runs inline before the reading
// moves on, for the test's duration. Tests using it must not run in
// parallel.
func SetInlineHandoff(t *testing.T, d time.Duration) {
	old := inlineHandoff
	inlineHandoff = d
	t.Cleanup(func() { inlineHandoff = old })
}
