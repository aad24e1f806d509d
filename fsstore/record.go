package fsstore

import (
	"bytes"
	"errors"
	"sync"
	"time"

	"github.com/fxamacker/cbor/v2"

	"github.com/cairn-dev/cairn/internal/recordlog"
	"github.com/cairn-dev/cairn/session"
)

// logMagic opens every log file: "cairn", a NUL, "L" and the format version.
// The records after it are framed by internal/recordlog.
const logMagic = "cairn\x00L1"

// Record kinds. A kind byte this build does not know makes the log
// unreadable with ErrSchemaUnsupported, never silently skipped.
const (
	kindReset        = 'R' // resetRec: the session starts over (replace)
	kindWorkspace    = 'W' // session.Workspace
	kindAgent        = 'G' // map[string]Value
	kindMeta         = 'm' // metaRec: one metadata key
	kindMessages     = 'M' // []Value appended
	kindTraces       = 'T' // []session.Trace appended
	kindArtifacts    = 'A' // []session.Artifact appended (logs written before 'P')
	kindArtifact     = 'P' // session.Artifact without data, inserted or replaced
	kindBlob         = 'B' // raw data of the artifact in the 'P' record before it
	kindDelArtifacts = 'a' // []string: artifact ids deleted
	kindTruncate     = 't' // int64: messages kept
	kindGens         = 'g' // gensRec: generations that added a compacted log's items
	kindRun          = 'r' // session.Run upserted
	kindVerif        = 'v' // session.Verification upserted
	kindTask         = 's' // session.SubagentTask upserted
	kindHandoff      = 'H' // session.Handoff
	kindRuntime      = 'X' // session.Runtime
	kindFiles        = 'F' // session.ManifestRef
	kindCheckpoint   = 'C' // session.LoopCheckpoint set
	kindDropCkpt     = 'D' // run id whose checkpoint is dropped
	kindOwner        = 'O' // ownerRec: workflow id and owning session
	kindStep         = 'S' // session.StepRecord upserted
	kindCommit       = 'Z' // commitRec: closes a commit
)

// resetRec starts a session over: the first record of a new session, of a
// replace, and of a compacted log.
type resetRec struct {
	SessionID string    `cbor:"1,keyasint"`
	CreatedAt time.Time `cbor:"2,keyasint"`
}

// gensRec keeps, through compaction, which generation added which items:
// the marks of messages and traces as [generation, first index] pairs and
// the generation of each kept checkpoint of each run.
type gensRec struct {
	Messages    [][2]uint64         `cbor:"1,keyasint"`
	Traces      [][2]uint64         `cbor:"2,keyasint"`
	Checkpoints map[string][]uint64 `cbor:"3,keyasint"`
}

type metaRec struct {
	Key   string `cbor:"1,keyasint"`
	Value []byte `cbor:"2,keyasint"`
}

type ownerRec struct {
	WorkflowID string `cbor:"1,keyasint"`
	SessionID  string `cbor:"2,keyasint"`
}

// commitRec closes a commit. Records is the number of item records before
// it and Bytes their framed length, so a stray run of older records that
// happens to parse after a trimmed tail cannot pass as a commit.
type commitRec struct {
	Schema     int       `cbor:"1,keyasint"`
	Generation uint64    `cbor:"2,keyasint"`
	Time       time.Time `cbor:"3,keyasint"`
	Records    int       `cbor:"4,keyasint"`
	Bytes      int64     `cbor:"5,keyasint"`
}

var (
	encMode cbor.UserBufferEncMode
	decMode cbor.DecMode
)

func init() {
	var err error
	encMode, err = cbor.EncOptions{Time: cbor.TimeRFC3339Nano}.UserBufferEncMode()
	if err != nil {
		panic(err)
	}
	decMode, err = cbor.DecOptions{
		MaxNestedLevels:  64,
		MaxArrayElements: 1 << 27,
		MaxMapPairs:      1 << 27,
		DupMapKey:        cbor.DupMapKeyEnforcedAPF,
	}.DecMode()
	if err != nil {
		panic(err)
	}
}

// frameBuf accumulates framed records for one or more commits.
type frameBuf struct {
	buf  []byte
	mark int // offset where the open commit began
	recs int // item records in the open commit
	err  error
	// index, when indexing is set, collects what the index takes from
	// each item record (see indexValue), made from the values as they are
	// encoded, so a commit is folded into its session's index without
	// parsing its records back.
	indexing bool
	index    []parsed
	// enc is the bytes.Buffer add encodes into, kept here because the
	// encoder takes it by pointer (an allocation per record otherwise).
	enc bytes.Buffer
}

// commitSizeHint guesses the framed size of c's commit from its bulk (the
// messages, artifact data and checkpoint state) so that the frame buffer
// is allocated once, not grown by copies while the records are added.
// It is capped: a guess only saves copies.
func commitSizeHint(c *session.Change) int {
	n := 1 << 10
	for _, m := range c.AppendMessages {
		n += len(m) + 16
	}
	for _, as := range [][]session.Artifact{c.AppendArtifacts, c.PutArtifacts} {
		for _, a := range as {
			n += len(a.Data) + 256
		}
	}
	if c.Checkpoint != nil {
		n += len(c.Checkpoint.State) + 256
	}
	return min(n, maxSizeHint)
}

// maxSizeHint bounds commitSizeHint.
const maxSizeHint = 64 << 20

// commitBufs holds the frame buffers and index lists of finished commits
// for the next ones: a commit (of any session) then neither allocates
// them nor has them zeroed, and an idle store holds none per session.
var commitBufs = sync.Pool{New: func() any { return new(frameBuf) }}

// maxKeptFrames bounds the buffers commitBufs keeps: a large commit's
// buffer goes to the garbage collector, not back to the pool.
const maxKeptFrames = 1 << 20

// newCommitBuf returns an empty indexing frame buffer with room for hint
// bytes, from commitBufs. The caller releases it once the commit is
// written and indexed.
func newCommitBuf(hint int) *frameBuf {
	f := commitBufs.Get().(*frameBuf)
	if cap(f.buf) < hint {
		f.buf = make([]byte, 0, hint)
	}
	f.indexing = true
	return f
}

// release empties f and returns it to commitBufs. Nothing may use f, its
// bytes or its index after: the log and the index keep copies (the index
// holds ids and checkpoint headers of the change, never f's bytes).
func (f *frameBuf) release() {
	clear(f.index) // so the pool holds no ids or checkpoints of this change
	*f = frameBuf{buf: f.buf[:0], index: f.index[:0]}
	if cap(f.buf) > maxKeptFrames || cap(f.index) > 256 {
		return
	}
	commitBufs.Put(f)
}

// begin opens a commit at the current end of the buffer.
func (f *frameBuf) begin() { f.mark, f.recs = len(f.buf), 0 }

// add appends one framed record holding v encoded as CBOR, and returns the
// framed size.
func (f *frameBuf) add(kind byte, v any) int64 {
	if f.err != nil {
		return 0
	}
	buf, start := recordlog.Reserve(f.buf)
	// Encoded straight into the buffer: a commit's messages are not
	// encoded into a buffer of their own first and then copied.
	f.enc = *bytes.NewBuffer(buf)
	err := encMode.MarshalToBuffer(v, &f.enc)
	out := f.enc.Bytes()
	f.enc = bytes.Buffer{} // holds no bytes while f is pooled
	if err != nil {
		f.err = err
		return 0
	}
	f.buf = out
	recordlog.Seal(f.buf, start, kind)
	f.recs++
	f.indexed(kind, v, start)
	return int64(len(f.buf) - start)
}

// indexed keeps what the index takes from the record just framed at start,
// when the buffer is indexing. The commit record is not kept: the commit
// knows its own generation and time.
func (f *frameBuf) indexed(kind byte, v any, start int) {
	if !f.indexing || kind == kindCommit || f.tooLarge(start) {
		return
	}
	p, err := indexValue(kind, v, f.buf[start+recordlog.HeaderSize:])
	if err != nil {
		f.err = err
		return
	}
	p.end, p.size = int64(len(f.buf)), int64(len(f.buf)-start)
	f.index = append(f.index, p)
}

// indexedParsed is indexed for a record whose index entry p its encoder
// made.
func (f *frameBuf) indexedParsed(p parsed, start int) {
	if !f.indexing || f.tooLarge(start) {
		return
	}
	p.end, p.size = int64(len(f.buf)), int64(len(f.buf)-start)
	f.index = append(f.index, p)
}

// tooLarge fails the buffer when the record just framed at start is
// longer than a frame may be: replay stops at such a frame, so it must
// not be written (scanning the commit back before writing it caught this
// before).
func (f *frameBuf) tooLarge(start int) bool {
	if n := len(f.buf) - start - recordlog.HeaderSize; n > recordlog.MaxPayload {
		f.err = session.Errorf(session.CodeTooLarge, "a record of %d bytes passes the limit of %d bytes", n, recordlog.MaxPayload)
		return true
	}
	return false
}

// addRaw appends one framed record holding payload as it is.
func (f *frameBuf) addRaw(kind byte, payload []byte) int64 {
	if f.err != nil {
		return 0
	}
	start := len(f.buf)
	f.buf = recordlog.Append(f.buf, kind, payload)
	f.recs++
	f.indexed(kind, nil, start)
	return int64(len(f.buf) - start)
}

// flush hands the buffered bytes to write and empties the buffer. The open
// commit stays open: its start is kept relative to the buffer, so the
// commit record still counts every byte of it.
func (f *frameBuf) flush(write func([]byte) error) {
	if f.err != nil || len(f.buf) == 0 {
		return
	}
	if err := write(f.buf); err != nil {
		f.err = err
		return
	}
	f.mark -= len(f.buf)
	f.buf = f.buf[:0]
}

// commit closes the open commit with its commit record.
func (f *frameBuf) commit(gen uint64, now time.Time) {
	f.addCommit(commitRec{Schema: 1, Generation: gen, Time: now.UTC(), Records: f.recs, Bytes: int64(len(f.buf) - f.mark)})
	f.begin()
}

// commitGroup is one complete commit found by scan; the records' payloads
// alias the scanned data.
type commitGroup struct {
	records []recordlog.Record
	parsed  []parsed // instead of records, when the assembler parses
	commit  commitRec
	end     int64 // offset just past the commit record
}

var errBadMagic = errors.New("not a cairn log (bad magic)")

// scan parses data (a whole log) and returns its complete commits and the
// offset where valid data ends. Anything after that offset is a torn or
// uncommitted tail. scan fails only for a bad magic or a commit record
// written by a newer schema.
func scan(data []byte) ([]commitGroup, int64, error) {
	if !recordlog.HasMagic(data, logMagic) {
		return nil, 0, errBadMagic
	}
	return scanRecords(data, int64(len(logMagic)), 0)
}

// scanRecords parses framed records in data from off on, expecting the first
// commit to be generation lastGen+1 (any generation when lastGen is 0); see
// assembler for what ends the valid data.
func scanRecords(data []byte, off int64, lastGen uint64) ([]commitGroup, int64, error) {
	var groups []commitGroup
	asm := assembler{valid: off, lastGen: lastGen, onGroup: func(g commitGroup) error {
		groups = append(groups, g)
		return nil
	}}
	recordlog.Scan(data, off, asm.add)
	if asm.err != nil {
		return nil, 0, asm.err
	}
	return groups, asm.valid, nil
}

// assembler groups framed records, as they are scanned or walked, into
// complete commits and hands each to onGroup. A commit whose generation
// does not follow the previous one, or whose record count or length
// disagrees with its commit record, ends the valid data: so a stray run of
// older records that happens to parse after a trimmed tail cannot pass as a
// commit. valid is the end of the last complete commit.
type assembler struct {
	pending      []recordlog.Record
	parsedRecs   []parsed
	pendingBytes int64
	lastGen      uint64
	valid        int64
	err          error
	onGroup      func(commitGroup) error
	// parse, when set, keeps each record parsed (parseRecord) instead of
	// whole, so a pending commit holds no payloads.
	parse bool
	count int // records pending
}

func (a *assembler) add(r recordlog.Record) bool {
	if r.Kind != kindCommit {
		if a.parse {
			p, err := parseRecord(r)
			if err != nil {
				a.err = err
				return false
			}
			a.parsedRecs = append(a.parsedRecs, p)
		} else {
			a.pending = append(a.pending, r)
		}
		a.count++
		a.pendingBytes += r.Size
		return true
	}
	var c commitRec
	if decMode.Unmarshal(r.Payload, &c) != nil {
		return false
	}
	if c.Schema > 1 {
		a.err = errFutureSchema(c.Schema)
		return false
	}
	if c.Records != a.count || c.Bytes != a.pendingBytes || (a.lastGen != 0 && c.Generation != a.lastGen+1) || c.Generation == 0 {
		return false
	}
	if err := a.onGroup(commitGroup{records: a.pending, parsed: a.parsedRecs, commit: c, end: r.End}); err != nil {
		a.err = err
		return false
	}
	a.lastGen = c.Generation
	a.pending, a.parsedRecs, a.pendingBytes, a.count = nil, nil, 0, 0
	a.valid = r.End
	return true
}
