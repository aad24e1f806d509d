package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cairn-dev/cairn/internal/proc"
	"github.com/cairn-dev/cairn/protocol"
)

// answerWait bounds how long a command waits for a running daemon to take
// its connection (the WebSocket upgrade and hello). A live cairnd answers
// in milliseconds; one that does not is stopped, stuck on its disk, or
// overloaded, and waiting longer would only hang the command with it.
const answerWait = 5 * time.Second

// notAnsweringError is a running daemon that did not take a connection
// within answerWait: what state it is in, and what to do about it.
type notAnsweringError struct {
	pid       int // 0: unknown (--socket, or no cairnd holds the lock)
	where     string
	state     byte // proc.State's letter; 0: unknown
	err       error
	afterWait time.Duration
}

func (e *notAnsweringError) Error() string {
	if e.pid <= 0 {
		return fmt.Sprintf("cairnd at %s did not answer within %v", e.where, e.afterWait)
	}
	head := fmt.Sprintf("cairnd (pid %d) serves %s but did not answer within %v: ", e.pid, e.where, e.afterWait)
	switch e.state {
	case 'T':
		return head + fmt.Sprintf("it is stopped (SIGSTOP, or a shell's ^Z); `kill -CONT %d` resumes it, `cairn daemon stop` ends it", e.pid)
	case 't':
		return head + "it is stopped by a debugger; resume it there, or `cairn daemon stop` ends it once it runs"
	case 'D':
		return head + "it is waiting on the disk (uninterruptible sleep); calls wait with it until the disk answers"
	case 0:
		return head + "its state cannot be read; `cairn daemon stop` ends it"
	}
	return head + fmt.Sprintf("it is running (state %c) but did not take the connection; `cairn daemon stop` ends it", e.state)
}

func (e *notAnsweringError) Unwrap() error { return e.err }

// noAnswer turns err, the failure of a dial or a connect bounded by
// answerWait, into a notAnsweringError when that bound (and not the
// command's own context) ended it; otherwise it returns err.
func (e *env) noAnswer(err error, ws, where string) error {
	if err == nil || e.ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	na := &notAnsweringError{where: where, err: err, afterWait: answerWait}
	if ws != "" {
		na.where = ws
		if na.pid = protocol.DaemonPID(ws); na.pid > 0 {
			na.state = proc.State(na.pid)
		}
	}
	return na
}
