package daemon_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/daemon"
	"github.com/cairn-dev/cairn/internal/testkit"
)

// TestInlineHandoffUnderLoad: with the hand-off after a microsecond, so
// that requests run inline keep racing the reading's move to a new
// goroutine, 16 clients each stream saves to a session of their own; every
// save is answered, in order, and the server stays up.
func TestInlineHandoffUnderLoad(t *testing.T) {
	daemon.SetInlineHandoff(t, time.Microsecond)
	ip := startInproc(t, daemon.Config{})
	const clients, saves = 16, 150
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for k := 0; k < clients; k++ {
		c := ip.dial(t)
		wg.Add(1)
		go func(k int) {
			defer wg.Done()
			sid := fmt.Sprintf("s%d", k)
			for i := 1; i <= saves; i++ {
				res, err := c.Save(ctx, msg(sid))
				if err != nil {
					errs <- fmt.Errorf("client %d save %d: %w", k, i, err)
					return
				}
				if res.Generation != uint64(i) {
					errs <- fmt.Errorf("client %d save %d: generation %d", k, i, res.Generation)
					return
				}
			}
		}(k)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestShortRequestsRunOnTheReader: saves made one at a time on a
// connection run on the goroutine that read them (runInline, called by
// readLoop), not on a worker; a save read behind one that is still running
// runs on a worker, and a save made after one that was slow runs on the
// goroutine that took over the reading.
func TestShortRequestsRunOnTheReader(t *testing.T) {
	ip := startInproc(t, daemon.Config{})
	c := ip.dial(t)
	ctx := testkit.Context(t)
	const saves = 20
	for i := range saves {
		if _, err := c.Save(ctx, msg("stack")); err != nil {
			t.Fatalf("save %d: %v", i, err)
		}
		st := <-ip.be.stacks
		if !strings.Contains(st, "daemon.(*wsConn).runInline") || !strings.Contains(st, "daemon.(*wsConn).readLoop") {
			t.Fatalf("save %d did not run on the reader:\n%s", i, st)
		}
	}

	// A save that blocks moves the reading on; the next is read and run
	// while it blocks, and runs inline on the new reader.
	blocked := make(chan error, 1)
	go func() { _, err := c.Save(ctx, msg("block")); blocked <- err }()
	<-ip.be.blocked
	if _, err := c.Save(ctx, msg("stack")); err != nil {
		t.Fatal(err)
	}
	if st := <-ip.be.stacks; !strings.Contains(st, "daemon.(*wsConn).continueReading") {
		t.Fatalf("the save after a slow one did not run on the new reader:\n%s", st)
	}
	close(ip.be.release)
	if err := <-blocked; err != nil {
		t.Fatal(err)
	}

	// Two saves sent with the upgrade request: the first, read with the
	// second behind it, goes to a worker; the second, with nothing behind
	// it, runs inline.
	var early []byte
	for id := range uint64(2) {
		early = append(early, clientFrame(mustReq(id+1, api.Save.Name, msg("stack")))...)
	}
	rawUpgrade(t, ip.sock, early)
	var onWorker, onReader int
	for range 2 {
		st := <-ip.be.stacks
		switch {
		case strings.Contains(st, "daemon.(*wsConn).worker"):
			onWorker++
		case strings.Contains(st, "daemon.(*wsConn).runInline"):
			onReader++
		}
	}
	if onWorker != 1 || onReader != 1 {
		t.Fatalf("two saves read together: %d ran on a worker and %d inline, want 1 and 1", onWorker, onReader)
	}
}

// clientFrame is payload in one masked binary frame, as a client sends it
// (the mask key zero, so the payload goes as it is).
func clientFrame(payload []byte) []byte {
	b := []byte{0x82}
	switch n := len(payload); {
	case n < 126:
		b = append(b, 0x80|byte(n))
	case n <= math.MaxUint16:
		b = append(b, 0x80|126)
		b = binary.BigEndian.AppendUint16(b, uint16(n))
	default:
		b = append(b, 0x80|127)
		b = binary.BigEndian.AppendUint64(b, uint64(n))
	}
	b = append(b, 0, 0, 0, 0)
	return append(b, payload...)
}
