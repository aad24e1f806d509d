package fsstore

import (
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
