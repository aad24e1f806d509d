package fsstore

import (
	"encoding/binary"

	"github.com/cairn-dev/cairn/internal/recordlog"
	"github.com/cairn-dev/cairn/session"
)

// addArtifactHeader adds a's header record (kindArtifact): a without its
// data, encoded by hand to exactly the bytes encMode gives it (a map of
// the fields that are not empty, keyed by their JSON names, in
// declaration order), without reflection: a LangGraph saver's put
// writes four of them. TestArtifactHeaderEncoding compares the two.
func (f *frameBuf) addArtifactHeader(a *session.Artifact) {
	if f.err != nil {
		return
	}
	buf, start := recordlog.Reserve(f.buf)
	n := 1 // id has no omitempty
	for _, s := range [...]string{a.Kind, a.Name, a.MediaType, a.RunID, a.SHA256, a.Path} {
		if s != "" {
			n++
		}
	}
	if a.Size != 0 {
		n++
	}
	if len(a.Metadata) > 0 {
		n++
	}
	buf = cborHeadAppend(buf, 5, uint64(n))
	text := func(key, v string, omit bool) {
		if !omit || v != "" {
			buf = cborTextAppend(cborTextAppend(buf, key), v)
		}
	}
	text("id", a.ID, false)
	text("kind", a.Kind, true)
	text("name", a.Name, true)
	text("media_type", a.MediaType, true)
	text("run_id", a.RunID, true)
	text("sha256", a.SHA256, true)
	if a.Size != 0 {
		buf = cborIntAppend(cborTextAppend(buf, "size"), a.Size)
	}
	text("path", a.Path, true)
	if len(a.Metadata) > 0 {
		buf = cborHeadAppend(cborTextAppend(buf, "metadata"), 2, uint64(len(a.Metadata)))
		buf = append(buf, a.Metadata...)
	}
	f.sealed(buf, start, kindArtifact, a)
}

// cborHeadAppend appends the shortest head of an item of major type major
// and argument arg, as encMode writes it.
func cborHeadAppend(b []byte, major byte, arg uint64) []byte {
	m := major << 5
	switch {
	case arg < 24:
		return append(b, m|byte(arg))
	case arg <= 0xff:
		return append(b, m|24, byte(arg))
	case arg <= 0xffff:
		return binary.BigEndian.AppendUint16(append(b, m|25), uint16(arg))
	case arg <= 0xffffffff:
		return binary.BigEndian.AppendUint32(append(b, m|26), uint32(arg))
	}
	return binary.BigEndian.AppendUint64(append(b, m|27), arg)
}
