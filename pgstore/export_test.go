package pgstore

import "time"

// SetWakeLinger sets wakeLinger until the returned func puts it back.
func SetWakeLinger(d time.Duration) (restore func()) {
	old := wakeLinger
	wakeLinger = d
	return func() { wakeLinger = old }
}
