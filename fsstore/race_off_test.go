//go:build !race

package fsstore_test

const raceEnabled = false
