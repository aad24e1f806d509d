package cli

import (
	"errors"
	"time"

	"github.com/cairn-dev/cairn/protocol"
)

// answerWait bounds how long a command waits for a running daemon to take
// its connection (the WebSocket upgrade and hello). A live cairnd answers
// in milliseconds; one that does not is stopped, stuck on its disk, or
// overloaded, and waiting longer would only hang the command with it.
const answerWait = 5 * time.Second

// withHolder completes err when it is a handshake that a daemon did not
// answer (protocol.NoAnswerError) and protocol could not tell which daemon
// (a Dial by socket knows no workspace): the cairnd holding ws, and its
// state. It returns err.
func withHolder(err error, ws string) error {
	var na *protocol.NoAnswerError
	if ws != "" && errors.As(err, &na) && na.Method == "" && na.PID == 0 {
		na.FindHolder(ws)
	}
	return err
}
