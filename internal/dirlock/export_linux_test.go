//go:build linux

package dirlock

import "time"

// SetRefresh sets how often a watch's epoch moves on by itself and returns
// a function that puts the old period back.
func SetRefresh(d time.Duration) (restore func()) {
	old := refresh
	refresh = d
	return func() { refresh = old }
}
