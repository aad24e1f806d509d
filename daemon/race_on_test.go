//go:build race

package daemon_test

// raceEnabled: under the race detector sync.Pool drops a quarter of what
// it is given back, so allocation counts are not what they are otherwise.
// Tests that `make test-norace` runs whole run smaller under it, or skip.
const raceEnabled = true
