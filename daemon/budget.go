package daemon

import (
	"time"

	"github.com/coder/websocket"
)

// Defaults of the limits a Config may leave at zero.
const (
	// DefaultAnswerBudget is the default Config.AnswerBudget: 256 MiB of
	// answers queued or being written, across all connections.
	DefaultAnswerBudget int64 = 256 << 20
	// DefaultFrameTimeout is the default Config.FrameTimeout.
	DefaultFrameTimeout = 30 * time.Second
)

// The close statuses the daemon sends when it closes a connection for a
// limit (PROTOCOL.md, Limits). Both are 1008 (policy violation); the
// reason tells them apart.
const (
	// CloseAnswerBudget closes a connection the answer budget shed.
	CloseAnswerBudget = websocket.StatusPolicyViolation
	// ReasonAnswerBudget is its reason.
	ReasonAnswerBudget = "cairnd: answer budget exhausted; read your answers"
	// CloseFrameTimeout closes a connection on which a frame stalled.
	CloseFrameTimeout = websocket.StatusPolicyViolation
	// ReasonFrameTimeout is its reason.
	ReasonFrameTimeout = "cairnd: frame read deadline exceeded"
)

// charge counts n bytes of an answer for c against Config.AnswerBudget
// and reports whether c may queue it. When the bytes do not fit, it sheds
// the connection holding the most unsent bytes, counting c with the n
// bytes (on a tie, c), and tries again, until they fit or c itself is
// shed. Shedding drops the victim's queued answers at once; the answer it
// is writing, if any, still counts until its write ends (at most
// Config.WriteTimeout), so the bytes charged never exceed the budget.
func (s *Server) charge(c *wsConn, n int64) bool {
	s.budgetMu.Lock()
	defer s.budgetMu.Unlock()
	for !c.shedding && s.unsent+n > s.cfg.AnswerBudget {
		s.shedLocked(s.largestLocked(c, n), n)
	}
	if c.shedding {
		return false
	}
	s.unsent += n
	c.unsent += n
	return true
}

// release returns n bytes of c's answers to the budget.
func (s *Server) release(c *wsConn, n int64) {
	s.budgetMu.Lock()
	defer s.budgetMu.Unlock()
	s.unsent -= n
	c.unsent -= n
}

// largestLocked returns the connection not yet shed that holds the most
// unsent bytes, counting c with n more.
func (s *Server) largestLocked(c *wsConn, n int64) *wsConn {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, most := c, c.unsent+n
	for o := range s.conns {
		if !o.shedding && o.unsent > most {
			v, most = o, o.unsent
		}
	}
	return v
}

// shedLocked sheds v: it drops v's queued answers, and ends v's reader,
// whose serve then closes v with CloseAnswerBudget (wsConn.closeWith).
// answer is the size of the answer that did not fit, for the log.
func (s *Server) shedLocked(v *wsConn, answer int64) {
	v.log.Warn("closing connection: answer budget exhausted",
		"conn_unsent_bytes", v.unsent, "unsent_bytes", s.unsent, "answer_bytes", answer, "answer_budget", s.cfg.AnswerBudget)
	v.shedding = true
	close(v.shed)
	for drained := false; !drained; {
		select {
		case a := <-v.answers:
			s.unsent -= int64(len(a.msg))
			v.unsent -= int64(len(a.msg))
			v.end(a)
		default:
			drained = true
		}
	}
	if v.fc != nil {
		v.fc.shutReads()
	}
}
