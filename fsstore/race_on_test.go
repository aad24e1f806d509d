//go:build race

package fsstore_test

// raceEnabled: under the race detector sync.Pool drops a quarter of what
// it is given back, so a commit's pooled buffers are allocated more often.
// Tests that `make test-norace` runs whole run smaller under it, or skip.
const raceEnabled = true
