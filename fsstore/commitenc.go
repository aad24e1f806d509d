package fsstore

import (
	"github.com/cairn-dev/cairn/internal/recordlog"
	"github.com/cairn-dev/cairn/session"
)

// Every commit writes a commit record and most write a messages record:
// these two are encoded by hand, to exactly the bytes encMode gives them
// (TestCommitRecordEncoding, TestMessagesRecordEncoding compare the two),
// without reflection, without boxing the value in an interface and, for
// the commit's time, without formatting it into a string of its own.

// addMessages adds a record of kind holding vs as encMode encodes a
// []session.Value: an array of byte strings. A nil message (which
// Normalize refuses before a commit gets here) takes the encoder's path,
// which fails the commit as before.
func (f *frameBuf) addMessages(kind byte, vs []session.Value) {
	if f.err != nil {
		return
	}
	for _, v := range vs {
		if v == nil {
			f.add(kind, vs)
			return
		}
	}
	buf, start := recordlog.Reserve(f.buf)
	buf = cborHeadAppend(buf, 4, uint64(len(vs)))
	for _, v := range vs {
		buf = cborHeadAppend(buf, 2, uint64(len(v)))
		buf = append(buf, v...)
	}
	f.buf = buf
	recordlog.Seal(f.buf, start, kind)
	f.recs++
	if f.indexing {
		// What indexValue takes from such a record: its elements' lengths.
		sizes := make([]int, len(vs))
		for i, v := range vs {
			sizes[i] = len(v)
		}
		f.indexedParsed(parsed{kind: kind, sizes: sizes}, start)
	}
}

// addCommit adds the commit record of rec (kindCommit), as encMode
// encodes a commitRec: a map of its five fields keyed by their numbers,
// the time as RFC 3339 text with nanoseconds (null when zero).
func (f *frameBuf) addCommit(rec commitRec) {
	if f.err != nil {
		return
	}
	if !timeEncodable(rec.Time) {
		f.add(kindCommit, rec) // which RFC 3339 cannot write: the encoder fails
		return
	}
	buf, start := recordlog.Reserve(f.buf)
	buf = append(buf, 5<<5|5, 1)
	buf = cborIntAppend(buf, int64(rec.Schema))
	buf = append(buf, 2)
	buf = cborHeadAppend(buf, 0, rec.Generation)
	buf = cborTimeAppend(append(buf, 3), rec.Time)
	buf = append(buf, 4)
	buf = cborIntAppend(buf, int64(rec.Records))
	buf = append(buf, 5)
	buf = cborIntAppend(buf, rec.Bytes)
	f.buf = buf
	recordlog.Seal(f.buf, start, kindCommit)
	f.recs++
}

// cborIntAppend appends n as encMode encodes an integer.
func cborIntAppend(b []byte, n int64) []byte {
	if n >= 0 {
		return cborHeadAppend(b, 0, uint64(n))
	}
	return cborHeadAppend(b, 1, uint64(-(n + 1)))
}
