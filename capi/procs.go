package main

import (
	"os"
	"runtime"
	"sync"
)

// procs chooses how many Ps the Go runtime inside the host process uses.
// A process whose handles are all daemon-mode clients runs little Go code
// per call (encode the request, hand it to the socket, decode the answer)
// on the caller's thread and one reader goroutine; with a P per core, each
// answer handed from the reader to the waiting caller also wakes a
// spinning M that looks for work on the idle P and finds none. With one P
// that thread wake-up is gone: measured through Python, the client's CPU
// per turn drops at 1 and at 32 agent processes (docs/PERFORMANCE.md,
// "The client's Go runtime"). An embedded handle runs the engine in the
// process, which may use every core: opening one puts the default back.
// A GOMAXPROCS environment variable is the host's choice and is left alone.
var procs struct {
	sync.Mutex
	embedded int  // open embedded handles
	lowered  bool // GOMAXPROCS was set to clientProcs
}

// clientProcs is the number of Ps while only daemon-mode handles are open.
const clientProcs = 1

// procsHostSet reports whether the host chose GOMAXPROCS itself.
var procsHostSet = os.Getenv("GOMAXPROCS") != ""

// procsClientOpened lowers the Ps when no embedded handle is open.
func procsClientOpened() {
	procs.Lock()
	defer procs.Unlock()
	if procsHostSet || procs.lowered || procs.embedded > 0 {
		return
	}
	runtime.GOMAXPROCS(clientProcs)
	procs.lowered = true
}

// procsEmbeddedOpening puts the default Ps back before an embedded handle
// opens (its engine may use every core).
func procsEmbeddedOpening() {
	procs.Lock()
	defer procs.Unlock()
	procs.embedded++
	if procs.lowered {
		runtime.SetDefaultGOMAXPROCS()
		procs.lowered = false
	}
}

// procsEmbeddedClosed counts an embedded handle closed (or failed to open).
// The Ps stay as they are until the next daemon-mode open.
func procsEmbeddedClosed() {
	procs.Lock()
	defer procs.Unlock()
	procs.embedded--
}
