package fsstore

import (
	"sync"
	"time"

	"github.com/cairn-dev/cairn/internal/recordlog"
)

// Exported for tests.
var ScanForTest = scan

// FileNameForTest maps an id to its log's file name.
var FileNameForTest = fileName

// FrameForTest frames one record of the given kind followed by a commit
// record for generation gen.
func FrameForTest(kind byte, payload []byte, gen uint64) []byte {
	var fb frameBuf
	fb.begin()
	fb.buf = recordlog.Append(fb.buf, kind, payload)
	fb.recs++
	fb.commit(gen, time.Now())
	return fb.buf
}

// CommitsForTest returns, for each complete commit of a session or
// workflow log, where it starts, where its commit record starts, and where
// it ends.
func CommitsForTest(data []byte) (spans [][3]int64) {
	groups, _, _ := scan(data)
	start := int64(len(logMagic))
	for _, g := range groups {
		recSize := int64(0)
		recordlog.Scan(data[:g.end], start, func(r recordlog.Record) bool {
			recSize = r.Size
			return true
		})
		spans = append(spans, [3]int64{start, g.end - recSize, g.end})
		start = g.end
	}
	return spans
}

// NewerCommitForTest frames one record of kind holding v (CBOR) and a
// commit record of schema version schema for generation gen: what a newer
// cairn might append.
func NewerCommitForTest(schema int, kind byte, v any, gen uint64) []byte {
	var fb frameBuf
	fb.begin()
	fb.add(kind, v)
	rec := commitRec{Schema: schema, Generation: gen, Time: time.Now().UTC(), Records: fb.recs, Bytes: int64(len(fb.buf) - fb.mark)}
	fb.add(kindCommit, rec)
	return fb.buf
}

// Record kinds, for tests that write logs by hand.
const (
	KindCheckpointForTest = kindCheckpoint
	KindResetForTest      = kindReset
	JournalKindStart      = jkStart
	JournalKindCommit     = jkCommit
	JournalKindPad        = jkPad
	LogMagicForTest       = logMagic
)

// ResetForTest is the reset record that opens a session's log.
func ResetForTest(id string) any { return resetRec{SessionID: id, CreatedAt: time.Now().UTC()} }

// LockWatching is the store's writer lock's Watching: nil when its checks
// (and the log's, checkLogFile) may skip their stats while nothing changed.
func LockWatching(s *Store) error { return s.lock.Watching() }

// HoldJournalGrowth makes every journal's background growth wait until
// the returned release is called (the test's cleanup calls it too).
func HoldJournalGrowth(t interface{ Cleanup(func()) }) (release func()) {
	ch := make(chan struct{})
	var once sync.Once
	release = func() { once.Do(func() { close(ch) }) }
	testHookGrow = func() { <-ch }
	t.Cleanup(func() { release(); testHookGrow = nil })
	return release
}

// SetJournalPadding turns the pad frames that end each journal flush on a
// block boundary on or off (a benchmark's baseline); on is the default.
func SetJournalPadding(on bool) { padFlushes = on }

// LogSize is the committed size of session id's log (0 when it has none).
func LogSize(s *Store, id string) int64 {
	s.mu.Lock()
	sf := s.sessions[id]
	s.mu.Unlock()
	if sf == nil {
		return 0
	}
	sf.mu.Lock()
	defer sf.mu.Unlock()
	return sf.size
}
