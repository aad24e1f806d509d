package daemon

import (
	"net"
	"path/filepath"
	"testing"
)

// socketPair returns the two ends of a connected Unix stream socket.
func socketPair(t *testing.T) (server, client *net.UnixConn) {
	t.Helper()
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(t.TempDir(), "s"), Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err = net.DialUnix("unix", nil, ln.Addr().(*net.UnixAddr))
	if err != nil {
		t.Fatal(err)
	}
	server, err = ln.AcceptUnix()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { server.Close(); client.Close() })
	return server, client
}

func TestPace(t *testing.T) {
	server, client := socketPair(t)
	raw, err := server.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := pendingInput(raw); !ok {
		t.Skip("FIONREAD is not available on this platform; connections never run requests serially")
	}
	p := &pace{raw: raw}
	for i := range serialAfter - 1 {
		if p.arrived(false) {
			t.Fatalf("serial after %d requests alone", i+1)
		}
	}
	if !p.arrived(false) {
		t.Fatalf("not serial after %d requests alone", serialAfter)
	}
	// Nothing sent meanwhile: still serial.
	p.ran()
	if !p.arrived(false) {
		t.Fatal("a run with nothing sent meanwhile ended serial mode")
	}
	// A request sent while the serial one ran waits unread: overlap.
	if _, err := client.Write([]byte("next")); err != nil {
		t.Fatal(err)
	}
	p.ran()
	if p.arrived(false) {
		t.Fatal("still serial after a request was sent during a serial run")
	}
	if _, err := server.Read(make([]byte, 16)); err != nil {
		t.Fatal(err)
	}
	// One arriving while another runs resets the count too.
	for range serialAfter {
		p.arrived(false)
	}
	if p.arrived(true) || p.arrived(false) {
		t.Fatal("serial right after an overlapping arrival")
	}
	// Without the socket, never serial.
	q := &pace{}
	for range 2 * serialAfter {
		if q.arrived(false) {
			t.Fatal("serial without a socket to look into")
		}
	}
}
