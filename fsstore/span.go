package fsstore

import (
	"cmp"
	"errors"
	"slices"

	"github.com/cairn-dev/cairn/internal/recordlog"
	"github.com/cairn-dev/cairn/internal/scratch"
	"github.com/cairn-dev/cairn/session"
)

// A read of many elements (a page of messages, a session's tail) takes the
// frames holding them in spans: one pread for a run of frames that lie
// close together in the log, each frame then checked on its own
// (recordlog.CheckFrame). The lockstep commits of an agent put a small
// checkpoint record between two message frames; a span reads those few
// bytes along rather than paying a system call and an allocation per
// frame.
const (
	// spanGap is the most bytes of other records a span takes in to join
	// the next frame.
	spanGap = 64 << 10
	// spanMax bounds one span read (a frame larger than it is read alone).
	spanMax = 16 << 20
)

// span is bytes of a log read from off on.
type span struct {
	off int64
	buf []byte
}

// frameIn returns the checked frame of it when the span holds it whole.
func (sp *span) frameIn(fr frameReader, it item) (recordlog.Record, bool, error) {
	lo := it.off() - sp.off
	if sp.buf == nil || lo < 0 || lo+int64(it.fsz) > int64(len(sp.buf)) {
		return recordlog.Record{}, false, nil
	}
	rec, err := recordlog.CheckFrame(sp.buf[lo:lo+int64(it.fsz):lo+int64(it.fsz)], fr.path, it.off())
	return rec, true, fr.wrapFrameErr(err)
}

// spanFrame returns the checked frame of its[0], reading a new span from
// it when sp does not hold it: the span runs on over the frames of its
// that follow in the log within spanGap of each other, up to spanMax.
func (fr frameReader) spanFrame(sp *span, its []item) (recordlog.Record, error) {
	first := its[0]
	if rec, ok, err := sp.frameIn(fr, first); ok {
		return rec, err
	}
	start := first.off()
	end := start + int64(first.fsz)
	// With a pad, spans are as large as it lends, so that a page read in
	// spans reads into buffers it has already mapped (see scratch).
	limit := int64(spanMax)
	if fr.pad != nil {
		limit = scratch.Max
	}
	for _, it := range its[1:] {
		off := it.off()
		if off >= start && off+int64(it.fsz) <= end {
			continue // a frame already in the span
		}
		if off < end || off-end > spanGap || off+int64(it.fsz)-start > limit {
			break
		}
		end = off + int64(it.fsz)
	}
	if end-start == int64(first.fsz) {
		sp.buf = nil
		return fr.frame(first)
	}
	buf := fr.pad.Get(int(end - start))
	if err := fr.readAt(buf, start); err != nil {
		return recordlog.Record{}, err
	}
	sp.off, sp.buf = start, buf
	rec, _, err := sp.frameIn(fr, first)
	return rec, err
}

// readAt fills buf from the log at off.
func (fr frameReader) readAt(buf []byte, off int64) error {
	if n, err := fr.r.ReadAt(buf, off); n != len(buf) {
		return session.Wrap(session.CodeInternal, err, "read session log %s at %d: %d of %d bytes", fr.path, off, n, len(buf))
	}
	return nil
}

// wrapFrameErr gives a frame read's error its code.
func (fr frameReader) wrapFrameErr(err error) error {
	if errors.Is(err, recordlog.ErrDamaged) {
		// Bytes that checked at Open fail now: bit rot. `cairn verify`
		// finds every such log and stops serving it.
		return session.Wrap(session.CodeCorrupt, err, "read session log (run `cairn verify`)")
	}
	if err != nil {
		return session.Wrap(session.CodeInternal, err, "read session log")
	}
	return nil
}

// prefetch returns fr reading the whole frames its (in any order; its is
// sorted in place) from spans read ahead: frames that lie close together
// in the log (as spanFrame joins them) are read with one pread, a frame
// with no neighbour is left to be read alone when asked for. Head uses it:
// the records it decodes are most often the few that the last commit
// wrote side by side (a run, its checkpoint, the workspace manifest), one
// system call rather than one each.
func (fr frameReader) prefetch(its []item) (frameReader, error) {
	if len(its) < 2 {
		return fr, nil
	}
	slices.SortFunc(its, func(a, b item) int { return cmp.Compare(a.off(), b.off()) })
	var spans []span
	for i := 0; i < len(its); {
		start := its[i].off()
		end := start + int64(its[i].fsz)
		frames := 1
		j := i + 1
		for ; j < len(its); j++ {
			off := its[j].off()
			if off >= start && off+int64(its[j].fsz) <= end {
				continue // the same frame again
			}
			if off < end || off-end > spanGap || off+int64(its[j].fsz)-start > spanMax {
				break
			}
			end = off + int64(its[j].fsz)
			frames++
		}
		if frames > 1 {
			buf := make([]byte, end-start)
			if err := fr.readAt(buf, start); err != nil {
				return fr, err
			}
			spans = append(spans, span{off: start, buf: buf})
		}
		i = j
	}
	fr.pre = spans
	return fr, nil
}
