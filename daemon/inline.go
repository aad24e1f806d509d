package daemon

import (
	"time"

	"github.com/cairn-dev/cairn/api"
)

// inline names the methods the reader may run itself: the short commits
// and reads of an agent's turn. Handed to a worker, such a request costs a
// goroutine hand-off (the worker readied, and with it an idle thread woken
// to look for work), and the reader parks on the socket meanwhile. A
// method that can wait on something other than the store (changes,
// subscribe) or that moves a whole session (export, import, resume, fork,
// verify) is never inline: the reader reads nothing while one runs (for up
// to inlineHandoff).
var inline = map[string]bool{
	api.Hello.Name:          true,
	api.Status.Name:         true,
	api.Save.Name:           true,
	api.Summary.Name:        true,
	api.BeginRun.Name:       true,
	api.Checkpoint.Name:     true,
	api.CompleteRun.Name:    true,
	api.BeginWorkflow.Name:  true,
	api.CompleteStep.Name:   true,
	api.FinishWorkflow.Name: true,
}

// pendingInput reports whether more of the client's input is already
// here: a message the library has buffered, a frame under way, or bytes
// in the socket. Then a request is not run inline, so that what follows it
// (a pipelining client's next request) is read and started at once. A
// request that arrives while one runs inline waits for it, at most
// inlineHandoff.
func (c *wsConn) pendingInput() bool {
	if c.fc == nil {
		return true // nothing to tell by: keep the hand-off
	}
	return c.fc.msgs.Load() > c.read || c.fc.mid.Load() || socketBuffered(c.fc.Conn)
}

// inlineHandoff is how long a request runs inline before the reading moves
// to a new goroutine (wsConn.runInline). Long enough that a commit waiting
// on its fdatasync normally stays inline, short enough that a request read
// behind a slow one is barely held up. A variable for tests only.
var inlineHandoff = 2 * time.Millisecond

// The states of a request run inline.
const (
	inlineRunning int32 = iota
	inlineDone
	inlineMoved
)
