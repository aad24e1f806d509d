//go:build !linux

package workspace

import "github.com/fsnotify/fsnotify"

// fsnotifyNotifier adapts an fsnotify.Watcher. It cannot see events that
// fsnotify's reader holds between reading and sending them, so it never
// reports itself settled: Sync always uses a cookie.
type fsnotifyNotifier struct{ w *fsnotify.Watcher }

// cookieOp is the event of a Sync cookie that releases its Sync: fsnotify
// backends other than inotify may not report an unlink promptly.
const cookieOp = fsnotify.Create

func newNotifier(buffer int) (notifier, error) {
	w, err := fsnotify.NewBufferedWatcher(uint(buffer))
	if err != nil {
		return nil, err
	}
	return fsnotifyNotifier{w}, nil
}

func (n fsnotifyNotifier) Add(path string) error          { return n.w.Add(path) }
func (n fsnotifyNotifier) AddCookieDir(path string) error { return n.w.Add(path) }
func (n fsnotifyNotifier) Remove(path string) error       { return n.w.Remove(path) }
func (n fsnotifyNotifier) Close() error                   { return n.w.Close() }
func (n fsnotifyNotifier) Events() <-chan fsnotify.Event  { return n.w.Events }
func (n fsnotifyNotifier) Errors() <-chan error           { return n.w.Errors }
func (n fsnotifyNotifier) settled(uint64) bool            { return false }
