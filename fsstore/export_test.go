package fsstore

import "time"

// Exported for tests.
var ScanForTest = scan

// FrameForTest frames one record of the given kind followed by a commit
// record for generation gen.
func FrameForTest(kind byte, payload []byte, gen uint64) []byte {
	var fb frameBuf
	fb.begin()
	start := len(fb.buf)
	fb.buf = append(fb.buf, make([]byte, frameHeader)...)
	fb.buf = append(fb.buf, payload...)
	fb.seal(start, kind)
	fb.recs++
	fb.commit(gen, time.Now())
	return fb.buf
}
