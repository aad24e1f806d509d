package daemon

import (
	"bytes"
	"errors"
	"net"
	"os"
	"time"

	"github.com/hashicorp/go-hclog"
)

// errPeerRefused is returned by checkPeer for a peer of another uid.
var errPeerRefused = errors.New("daemon: peer uid differs from the daemon's")

// refusal is written to a refused peer before the connection is closed.
const refusal = "HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\nConnection: close\r\nContent-Length: 52\r\n\r\ncairnd: only the daemon's own user may connect here\n"

// peerListener checks every accepted connection's peer credentials and
// closes the ones from another uid (see checkPeer, per platform).
type peerListener struct {
	net.Listener
	log hclog.Logger
}

// refuse answers a refused peer with a 403 and closes the connection. It
// reads (and discards) what the peer sent for up to refuseDrain first, so
// the peer is not still writing its request when the connection closes
// (which would make it see a broken pipe instead of the 403). This stalls
// the accept loop for at most refuseDrain per refused connection; only a
// peer that can reach the 0600 socket can cause that.
func refuse(c *net.UnixConn) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(refuseDrain))
	buf := make([]byte, 4096)
	for {
		n, err := c.Read(buf)
		if err != nil || bytes.Contains(buf[:n], []byte("\r\n\r\n")) {
			break
		}
	}
	_, _ = c.Write([]byte(refusal))
	_ = c.CloseWrite()
}

// refuseDrain bounds the time spent on a refused connection.
const refuseDrain = 100 * time.Millisecond

// Accept returns the next connection whose peer passed the check.
func (l *peerListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		uc, ok := c.(*net.UnixConn)
		if !ok {
			return c, nil
		}
		uid, err := checkPeer(uc, os.Getuid())
		if err == nil {
			return c, nil
		}
		l.log.Warn("refused connection", "peer_uid", uid, "reason", err)
		refuse(uc)
	}
}
