//go:build darwin

package dirlock

import "errors"

// watch is Linux's (watch_linux.go); elsewhere Check stats every time.
type watch struct{}

func newWatch(string) (*watch, error) { return nil, errors.New("no inotify on this platform") }
func (w *watch) add(string) error     { return errors.New("no inotify on this platform") }
func (w *watch) poll() (uint64, bool) { return 0, false }
func (w *watch) bump()                {}
func (w *watch) close()               {}
