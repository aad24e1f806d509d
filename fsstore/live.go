package fsstore

import (
	"io"
	"slices"
	"time"

	"github.com/fxamacker/cbor/v2"

	"github.com/cairn-dev/cairn/internal/recordlog"
	"github.com/cairn-dev/cairn/internal/scratch"
	"github.com/cairn-dev/cairn/session"
)

// flushAt is how many bytes writeLive buffers before it writes them out.
const flushAt = 1 << 20

// frameReader reads checked frames of one log below its committed size.
type frameReader struct {
	r    io.ReaderAt
	path string
	// pre holds spans read ahead (prefetch); frame answers from them the
	// frames they hold whole.
	pre []span
	// pad, when not nil, lends the buffers spans are read into (a read
	// whose caller is done with its result before the next: see
	// scratch).
	pad *scratch.Pad
}

// frame reads the checked frame of it; with a pad, into a buffer the pad
// lends.
func (fr frameReader) frame(it item) (recordlog.Record, error) {
	for i := range fr.pre {
		if rec, ok, err := fr.pre[i].frameIn(fr, it); ok {
			return rec, err
		}
	}
	buf := fr.pad.Get(int(it.fsz))
	if err := fr.readAt(buf, it.off()); err != nil {
		return recordlog.Record{}, err
	}
	rec, err := recordlog.CheckFrame(buf, fr.path, it.off())
	return rec, fr.wrapFrameErr(err)
}

// elems reads the elements its of array records (bytes: byte-string
// content), each frame read once however many of its elements are asked
// for, and frames close together in one read (spanFrame). raw shares
// buffers that elems allocates for this call alone.
func (fr frameReader) elems(its []item, bytes bool, fn func(i int, raw []byte) error) error {
	var cur item
	var parts [][]byte
	var sp span
	for i, it := range its {
		if parts == nil || it.off() != cur.off() {
			rec, err := fr.spanFrame(&sp, its[i:])
			if err != nil {
				return err
			}
			if parts, err = elements(rec.Payload, bytes); err != nil {
				return session.Wrap(session.CodeInternal, err, "read session log %s at %d", fr.path, it.off())
			}
			cur = it
		}
		if it.elem() >= len(parts) {
			return session.Errorf(session.CodeInternal, "read session log %s at %d: no element %d", fr.path, it.off(), it.elem())
		}
		if err := fn(i, parts[it.elem()]); err != nil {
			return err
		}
	}
	return nil
}

// elements returns the elements of the CBOR array p (for a byte-string
// array, the strings' content).
func elements(p []byte, bytes bool) ([][]byte, error) {
	sizes, err := arrayElems(p, false)
	if err != nil {
		return nil, err
	}
	out := make([][]byte, len(sizes))
	off := arrayHeaderLen(p)
	for i, n := range sizes {
		e := p[off : off+n]
		if bytes {
			_, _, h, _ := cborHead(e)
			e = e[h:]
		}
		out[i] = e
		off += n
	}
	return out, nil
}

// writeLive frames the latest generation of the session indexed by t, read
// from fr, as records of one open commit in fb: the content of a compacted
// log (withCheckpoints, keeping which generation added what) or of a copy
// under another id (no checkpoints; everything is then generation 1),
// created at created. It
// reads and writes a bounded amount at a time, flushing fb through write,
// so it costs what the session holds on disk and little memory.
func writeLive(fb *frameBuf, write func([]byte) error, fr frameReader, t *tracker, id string, created time.Time, withCheckpoints bool) error {
	// Every frame is read into a buffer the pad lends and copied into fb
	// before the next is read: the copy of a session of any size reads
	// into the same few buffers (see flush).
	pad := new(scratch.Pad)
	fr.pad = pad
	flush := func() {
		pad.Reset()
		if len(fb.buf) >= flushAt {
			fb.flush(write)
		}
	}
	verbatim := func(it item) error {
		if int(it.fsz) > scratch.Max && !fb.indexing {
			// Larger than a pad lends (an artifact's data): streamed.
			err := fb.copyFrame(write, fr, it, pad.Get(scratch.Max))
			flush()
			return err
		}
		rec, err := fr.frame(it)
		if err != nil {
			return err
		}
		fb.addRaw(rec.Kind, rec.Payload)
		flush()
		return fb.err
	}
	fb.add(kindReset, resetRec{SessionID: id, CreatedAt: created})
	for _, k := range []byte{kindWorkspace, kindAgent} {
		if it, ok := t.single[k]; ok {
			if err := verbatim(it); err != nil {
				return err
			}
		}
	}
	for _, key := range sortedKeys(t.meta) {
		if err := verbatim(t.meta[key]); err != nil {
			return err
		}
	}
	if err := rechunk(fb, fr, t.msgs, kindMessages, true, flush); err != nil {
		return err
	}
	if err := rechunk(fb, fr, t.traces, kindTraces, false, flush); err != nil {
		return err
	}
	for _, aid := range t.arts.order {
		a := t.arts.at[aid]
		if !a.legacy {
			if err := verbatim(a.hdr); err != nil {
				return err
			}
			if a.hasDat {
				if err := verbatim(a.data); err != nil {
					return err
				}
			}
			continue
		}
		err := fr.elems([]item{a.hdr}, false, func(_ int, raw []byte) error {
			var full session.Artifact
			if err := decMode.Unmarshal(raw, &full); err != nil {
				return session.Wrap(session.CodeInternal, err, "decode artifact %q", aid)
			}
			addArtifact(fb, full)
			return nil
		})
		if err != nil {
			return err
		}
		flush()
	}
	for _, list := range []*keyed[item]{&t.runs, &t.verifs, &t.tasks} {
		for _, k := range list.order {
			if err := verbatim(list.at[k]); err != nil {
				return err
			}
		}
	}
	for _, k := range []byte{kindHandoff, kindRuntime, kindFiles} {
		if it, ok := t.single[k]; ok {
			if err := verbatim(it); err != nil {
				return err
			}
		}
	}
	if !withCheckpoints {
		return fb.err
	}
	gens := gensRec{Messages: fromMarks(t.msgMarks), Traces: fromMarks(t.trMarks), Checkpoints: map[string][]uint64{}}
	for _, run := range sortedKeys(t.ckpts) {
		for _, ev := range t.ckpts[run].events {
			if err := verbatim(ev.at); err != nil {
				return err
			}
			gens.Checkpoints[run] = append(gens.Checkpoints[run], ev.gen)
		}
	}
	fb.add(kindGens, gens)
	return fb.err
}

// copyFrame appends the frame of it, as it is, to what fb has written:
// fb's bytes are flushed through write first, then the frame is streamed
// through write a part at a time, read into buf (recordlog.CopyFrame), so
// a frame of any size is copied without being held whole, in memory or in
// fb. fb must not be indexing: the frame's payload never passes through
// it.
func (fb *frameBuf) copyFrame(write func([]byte) error, fr frameReader, it item, buf []byte) error {
	if fb.flush(write); fb.err != nil {
		return fb.err
	}
	var werr error
	err := recordlog.CopyFrame(fr.r, fr.path, it.off(), int(it.fsz), buf, func(p []byte) error {
		werr = write(p)
		return werr
	})
	switch {
	case werr != nil:
		fb.err = werr
	case err != nil:
		fb.err = fr.wrapFrameErr(err)
	default:
		fb.mark -= int(it.fsz) // the open commit counts the frame's bytes
		fb.recs++
	}
	return fb.err
}

// rechunk copies the items of an array list into new records of at most
// messageChunk bytes each, in order. Each record's elements are the bytes
// fr read them into, encoded into fb before flush (which resets fr's pad)
// lets the next chunk's reads reuse them.
func rechunk(fb *frameBuf, fr frameReader, its []item, kind byte, bytes bool, flush func()) error {
	var vals []session.Value
	var raws []cbor.RawMessage
	for start := 0; start < len(its); {
		end, n := start, 0
		for end < len(its) && (end == start || n+int(its[end].size) <= messageChunk) {
			n += int(its[end].size)
			end++
		}
		var err error
		if bytes {
			vals, err = borrowElems(vals, fr, its[start:end], true)
			fb.add(kind, vals)
		} else {
			raws, err = borrowElems(raws, fr, its[start:end], false)
			fb.add(kind, raws)
		}
		if err != nil {
			return err
		}
		flush()
		start = end
	}
	return fb.err
}

// borrowElems reads the elements of its into buf (grown as needed) as the
// bytes fr read them into, not copies.
func borrowElems[T ~[]byte](buf []T, fr frameReader, its []item, bytes bool) ([]T, error) {
	buf = slices.Grow(buf[:0], len(its))[:len(its)]
	err := fr.elems(its, bytes, func(i int, raw []byte) error {
		buf[i] = T(raw)
		return nil
	})
	return buf, err
}
