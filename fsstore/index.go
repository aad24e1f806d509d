package fsstore

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"sort"
	"time"

	"github.com/cairn-dev/cairn/internal/recordlog"
	"github.com/cairn-dev/cairn/session"
)

// item is where one element of a session lives in its log: the frame at
// off(), fsz bytes long, and the element's index elem() in the frame's CBOR
// array (0 for a record that holds one item). size is the element's encoded
// length, what a page's max_bytes counts and the live-byte count adds. The
// offset (40 bits: logs up to 1 TiB) and the element index (24 bits) share
// one word, so an item is 16 bytes: the index of a session is 16 bytes per
// message, whatever the message's size.
type item struct {
	offElem uint64
	fsz     uint32
	size    uint32
}

const (
	elemBits = 24
	maxLog   = 1 << (64 - elemBits)
)

func newItem(off int64, fsz int64, elem, size int) item {
	return item{offElem: uint64(off)<<elemBits | uint64(elem), fsz: uint32(fsz), size: uint32(size)}
}

func (it item) off() int64 { return int64(it.offElem >> elemBits) }
func (it item) elem() int  { return int(it.offElem & (1<<elemBits - 1)) }

// mark says the items of a list from idx on were added by generation gen
// or a later one: the marks of a list are the generations that appended
// to it, so "added since generation G" is one binary search.
type mark struct {
	gen uint64
	idx int64
}

// keyed is a list upserted by id, in first-insert order, as session.Apply
// keeps runs, verifications, subagent tasks and artifacts: where each one's
// latest record is (V).
type keyed[V any] struct {
	order []string
	at    map[string]V
}

func (k *keyed[V]) set(id string, v V) (old V, existed bool) {
	if k.at == nil {
		k.at = map[string]V{}
	}
	old, existed = k.at[id]
	if !existed {
		k.order = append(k.order, id)
	}
	k.at[id] = v
	return old, existed
}

func (k *keyed[V]) del(id string) (V, bool) {
	old, ok := k.at[id]
	if ok {
		delete(k.at, id)
		k.order = slices.DeleteFunc(k.order, func(x string) bool { return x == id })
	}
	return old, ok
}

func (k *keyed[V]) has(id string) bool {
	_, ok := k.at[id]
	return ok
}

func (k keyed[V]) clone() keyed[V] {
	return keyed[V]{order: slices.Clone(k.order), at: maps.Clone(k.at)}
}

// art is where an artifact lives: its header record (kindArtifact, no
// data) and its data record (kindBlob) when it has data; or, for a log
// written before artifacts had records of their own, one element of a
// kindArtifacts array holding both.
type art struct {
	hdr    item
	data   item
	hasDat bool
	legacy bool
}

func (a art) live() int64 {
	if a.legacy {
		return int64(a.hdr.size)
	}
	n := int64(a.hdr.fsz)
	if a.hasDat {
		n += int64(a.data.fsz)
	}
	return n
}

// ckptEvent is one kept loop checkpoint record of a run.
type ckptEvent struct {
	gen uint64
	at  item
}

// runLine is what the index keeps of a run's loop checkpoints: the latest
// one without its state, and every one kept since the run began.
type runLine struct {
	latest session.LoopCheckpoint
	events []ckptEvent
}

// tracker is the index of a session log, kept in memory: the offsets of
// every live record, so each read preads what it returns, plus the counts
// that answer Stat, List, FindRun and CAS and decide on compaction. It
// never holds content beyond ids, statuses, run records and checkpoint
// headers. observe
// is the only code that updates it, at open and after each commit, so the
// two cannot disagree.
type tracker struct {
	sessionID string
	gen       uint64
	first     uint64 // oldest generation the log can still replay
	created   time.Time
	updated   time.Time

	single map[byte]item // workspace, agent, handoff, runtime, files
	meta   map[string]item
	runs   keyed[item]
	status map[string]string // run id -> status
	counts map[string]int    // status -> runs with it (status, counted)
	verifs keyed[item]
	tasks  keyed[item]

	msgs      []item
	msgMarks  []mark
	traces    []item
	trMarks   []mark
	traceRuns map[string][]int32 // run id -> indexes into traces

	arts    keyed[art]
	lastArt string // the header a following blob record belongs to

	ckpts map[string]*runLine

	live   int64  // encoded bytes of the latest generation
	curGen uint64 // generation of the commit being observed

	// memo holds, decoded, the run, checkpoint and manifest reference
	// records the last commit wrote (small ones only: see memoValue), so
	// that Head after it, an agent's next turn, reads and decodes none of
	// them. Only the last commit's: it never grows, and a record is looked
	// up by its place, which a later commit never reuses in this log (a
	// compaction or a repair makes a new tracker).
	memo []memoRec

	// runVals holds each run's record decoded, as Head last read it or a
	// commit wrote it, with the place it was read from: a run's record is
	// a header (ids, status, times, usage), so this costs memory per run,
	// like status, and spares Head, which every run operation reads, a
	// read and a decode of every run the session has had. An entry whose
	// place is no longer the run's is stale and not used. Only the live
	// tracker has one: a clone, read outside the session's lock, has none.
	runVals map[string]runVal
}

// runVal is one run's record, decoded, and where it was read from.
type runVal struct {
	at item
	r  session.Run
}

// memoRec is one record of the last commit, decoded: a session.Run, a
// session.LoopCheckpoint or a session.ManifestRef, as the record decodes.
type memoRec struct {
	at item
	v  any
}

// memoStateMax bounds the checkpoint state a memo keeps: a larger one is
// read back from the log, so the memo costs memory per run, not per byte
// a host checkpoints.
const memoStateMax = 1 << 10

// memoOf returns the memo of the record at it, if the last commit wrote it.
func (t *tracker) memoOf(it item) (any, bool) {
	for _, m := range t.memo {
		if m.at == it {
			return m.v, true
		}
	}
	return nil, false
}

// remember keeps the memos of the commit just folded in at base, in place
// of the previous commit's.
func (t *tracker) remember(ps []parsed, base int64) {
	clear(t.memo)
	t.memo = t.memo[:0]
	for _, p := range ps {
		if p.memo != nil {
			t.memo = append(t.memo, memoRec{at: p.item(base, 0, int(p.size)), v: p.memo})
		}
	}
}

func newTracker() *tracker {
	t := &tracker{}
	t.clear()
	t.ckpts = map[string]*runLine{}
	t.runVals = map[string]runVal{}
	return t
}

// clear forgets the session's content, not its checkpoints (a replace
// keeps them, as session.Apply does).
func (t *tracker) clear() {
	t.single, t.meta = map[byte]item{}, map[string]item{}
	t.runs, t.verifs, t.tasks, t.arts = keyed[item]{}, keyed[item]{}, keyed[item]{}, keyed[art]{}
	t.status, t.counts, t.traceRuns = map[string]string{}, map[string]int{}, map[string][]int32{}
	t.msgs, t.msgMarks, t.traces, t.trMarks = nil, nil, nil, nil
	t.lastArt = ""
	clear(t.runVals)
	t.live = 0
	for _, l := range t.ckpts {
		for _, ev := range l.events {
			t.live += int64(ev.at.fsz)
		}
	}
}

func (t *tracker) messages() int64 { return int64(len(t.msgs)) }

// setStatus records run's status, keeping counts.
func (t *tracker) setStatus(run, status string) {
	if old, ok := t.status[run]; ok {
		if t.counts[old]--; t.counts[old] == 0 {
			delete(t.counts, old)
		}
	}
	t.status[run] = status
	t.counts[status]++
}

// observe folds one complete commit, whose records sit at base plus their
// offsets in the scanned data, into the index.
func (t *tracker) observe(g commitGroup, base int64) error {
	t.curGen = g.commit.Generation
	for _, r := range g.records {
		if err := t.observeRecord(r, base); err != nil {
			return err
		}
	}
	for _, p := range g.parsed {
		if err := t.apply(p, base); err != nil {
			return err
		}
	}
	t.gen = g.commit.Generation
	if t.first == 0 {
		t.first = t.gen
	}
	t.updated = g.commit.Time
	return nil
}

func addMark(marks []mark, gen uint64, idx int64) []mark {
	if n := len(marks); n > 0 && marks[n-1].gen == gen {
		return marks
	}
	return append(marks, mark{gen, idx})
}

// since returns the index of the first item added after generation gen.
func since(marks []mark, total int64, gen uint64) int64 {
	i := sort.Search(len(marks), func(i int) bool { return marks[i].gen > gen })
	if i == len(marks) {
		return total
	}
	return marks[i].idx
}

// genOf returns the generation that added item idx.
func genOf(marks []mark, idx int64) uint64 {
	i := sort.Search(len(marks), func(i int) bool { return marks[i].idx > idx })
	if i == 0 {
		return 0
	}
	return marks[i-1].gen
}

func (t *tracker) setLive(old item, existed bool, it item) {
	if existed {
		t.live -= int64(old.fsz)
	}
	t.live += int64(it.fsz)
}

// parsed is what the index takes from one record: its place and the few
// decoded fields it keeps, never the payload. Parsing is separate from
// applying so that a log is indexed while it streams past: the records of
// a commit wait for their commit record as parsed records, which stay
// small however large the commit (a compacted log is one commit).
type parsed struct {
	kind  byte
	end   int64 // offset just past the frame, in the scanned data
	size  int64 // framed size
	sizes []int // array records: each element's length
	runs  []string
	ids   []string
	id    idOnly
	key   string
	null  bool
	n     int64
	reset resetRec
	cp    *session.LoopCheckpoint // without its state
	gens  *gensRec
	memo  any // for a commit's own records: what Head may answer (headMemo)
}

func (p parsed) item(base int64, elem, size int) item {
	return newItem(base+p.end-p.size, p.size, elem, size)
}

// parseRecord takes from r what the index needs.
func parseRecord(r recordlog.Record) (parsed, error) {
	p := parsed{kind: r.Kind, end: r.End, size: r.Size}
	dec := func(v any) error {
		if err := decMode.Unmarshal(r.Payload, v); err != nil {
			return session.Wrap(session.CodeInternal, err, "decode %q record", r.Kind)
		}
		return nil
	}
	// eachElem calls fn with each element of an array record.
	eachElem := func(what string, fn func(raw []byte) error) error {
		elems, err := arrayElems(r.Payload, false)
		if err != nil {
			return session.Wrap(session.CodeInternal, err, "decode %s record", what)
		}
		off := arrayHeaderLen(r.Payload)
		for _, e := range elems {
			if err := fn(r.Payload[off : off+e]); err != nil {
				return session.Wrap(session.CodeInternal, err, "decode %s", what)
			}
			p.sizes = append(p.sizes, e)
			off += e
		}
		return nil
	}
	var err error
	switch r.Kind {
	case kindReset:
		err = dec(&p.reset)
	case kindMessages:
		if p.sizes, err = arrayElems(r.Payload, true); err != nil {
			err = session.Wrap(session.CodeInternal, err, "decode messages record")
		}
	case kindTraces:
		err = eachElem("trace", func(raw []byte) error {
			var tr idOnly
			err := decMode.Unmarshal(raw, &tr)
			p.runs = append(p.runs, tr.RunID)
			return err
		})
	case kindArtifacts:
		err = eachElem("artifact", func(raw []byte) error {
			var a idOnly
			err := decMode.Unmarshal(raw, &a)
			p.ids = append(p.ids, a.ID)
			return err
		})
	case kindTruncate:
		err = dec(&p.n)
	case kindDelArtifacts:
		err = dec(&p.ids)
	case kindArtifact, kindRun, kindVerif, kindTask:
		err = dec(&p.id)
	case kindMeta:
		var m metaRec
		if err = dec(&m); err == nil {
			p.key, p.null = m.Key, bytes.Equal(bytes.TrimSpace(m.Value), []byte("null"))
		}
	case kindCheckpoint:
		p.cp = new(session.LoopCheckpoint)
		err = dec(p.cp)
		p.cp.State = nil
	case kindDropCkpt:
		err = dec(&p.key)
	case kindGens:
		p.gens = new(gensRec)
		err = dec(p.gens)
	case kindBlob, kindWorkspace, kindAgent, kindHandoff, kindRuntime, kindFiles:
	default:
		err = errUnknownKind(r.Kind)
	}
	return p, err
}

// indexValue takes what the index needs of a record from v, the value
// just encoded as its payload, as parseRecord would take it from the
// payload: a commit indexes its own records without decoding them back
// through reflection. The lengths of array elements are read from the
// encoded payload, as parseRecord reads them; the fields from v, which
// encode to themselves (strings, integers, UTC times at full precision).
// A value of a type it does not expect (or none, for a record framed from
// raw bytes) is parsed from the payload. TestCommitIndexEqualsReplay
// checks both ways agree.
func indexValue(kind byte, v any, payload []byte) (parsed, error) {
	p := parsed{kind: kind}
	var err error
	switch x := v.(type) {
	case resetRec:
		p.reset = x
		return p, nil
	case metaRec:
		p.key, p.null = x.Key, bytes.Equal(bytes.TrimSpace(x.Value), []byte("null"))
		return p, nil
	case int64:
		if kind == kindTruncate {
			p.n = x
			return p, nil
		}
	case []session.Value:
		if kind == kindMessages {
			if p.sizes, err = arrayElems(payload, true); err != nil {
				err = session.Wrap(session.CodeInternal, err, "decode messages record")
			}
			return p, err
		}
	case []session.Trace:
		if kind == kindTraces {
			if p.sizes, err = arrayElems(payload, false); err != nil {
				return p, session.Wrap(session.CodeInternal, err, "decode traces record")
			}
			p.runs = make([]string, len(x))
			for i := range x {
				p.runs[i] = x[i].RunID
			}
			return p, nil
		}
	case []string:
		if kind == kindDelArtifacts {
			p.ids = x
			return p, nil
		}
	case string:
		if kind == kindDropCkpt {
			p.key = x
			return p, nil
		}
	case *session.Artifact:
		if kind == kindArtifact {
			p.id.ID = x.ID
			return p, nil
		}
	case *session.Run:
		if kind == kindRun {
			p.id.RunID, p.id.Status = x.RunID, x.Status
			p.memo = memoRun(x)
			return p, nil
		}
	case *session.ManifestRef:
		if kind == kindFiles {
			f := *x
			p.memo = f
			return p, nil
		}
	case *session.Verification:
		if kind == kindVerif {
			p.id.ID = x.ID
			return p, nil
		}
	case *session.SubagentTask:
		if kind == kindTask {
			p.id.TaskID = x.TaskID
			return p, nil
		}
	case *session.LoopCheckpoint:
		// A time that is not UTC, or carries a monotonic reading, would
		// not come back from its encoding as it is: parsed instead.
		if kind == kindCheckpoint && encodesAsIs(x.CreatedAt) {
			cp := *x
			cp.State = nil
			if cp.Files != nil {
				f := *cp.Files
				cp.Files = &f
			}
			p.cp = &cp
			if len(x.State) <= memoStateMax {
				m := cp
				if len(x.State) > 0 {
					m.State = slices.Clone(x.State)
				}
				if m.Files != nil {
					f := *m.Files
					m.Files = &f
				}
				p.memo = m
			}
			return p, nil
		}
	}
	switch kind {
	case kindWorkspace, kindAgent, kindHandoff, kindRuntime, kindFiles, kindBlob:
		return p, nil
	}
	return parseRecord(recordlog.Record{Kind: kind, Payload: payload})
}

// memoRun returns r as its record decodes, or nil when a time in it would
// not come back from its encoding as it is (not UTC, or with a monotonic
// reading): that record is read back instead.
func memoRun(r *session.Run) any {
	if !encodesAsIs(r.StartedAt) || (r.EndedAt != nil && !encodesAsIs(*r.EndedAt)) {
		return nil
	}
	m := *r
	if m.EndedAt != nil {
		e := *m.EndedAt
		m.EndedAt = &e
	}
	return m
}

// encodesAsIs reports whether t decodes from its RFC 3339 encoding to a
// time.Time equal to it field for field: in UTC, without a monotonic
// reading.
func encodesAsIs(t time.Time) bool {
	return t.Location() == time.UTC && t == t.Round(0)
}

// observeRecord parses one record and folds it into the index.
func (t *tracker) observeRecord(r recordlog.Record, base int64) error {
	p, err := parseRecord(r)
	if err != nil {
		return err
	}
	return t.apply(p, base)
}

// apply folds one parsed record, at base plus its offset, into the index.
func (t *tracker) apply(p parsed, base int64) error {
	if base+p.end >= maxLog || len(p.sizes) >= 1<<elemBits {
		return session.Errorf(session.CodeInternal, "session log passes 1 TiB or a record holds over %d items: too large to index", 1<<elemBits)
	}
	whole := p.item(base, 0, int(p.size))
	switch p.kind {
	case kindReset:
		rr := p.reset
		if t.sessionID != "" && rr.SessionID != t.sessionID {
			return session.Errorf(session.CodeInternal, "log of session %q holds a reset for %q", t.sessionID, rr.SessionID)
		}
		t.sessionID = rr.SessionID
		if t.created.IsZero() {
			t.created = rr.CreatedAt
		}
		t.clear()
		t.single[kindReset] = whole
		t.live += whole.size64()
	case kindMessages:
		t.msgMarks = addMark(t.msgMarks, t.curGen, t.messages())
		for i, e := range p.sizes {
			t.msgs = append(t.msgs, p.item(base, i, e))
			t.live += int64(e)
		}
	case kindTruncate:
		n := p.n
		if n < t.messages() {
			for _, m := range t.msgs[n:] {
				t.live -= int64(m.size)
			}
			t.msgs = t.msgs[:n]
			for len(t.msgMarks) > 0 && t.msgMarks[len(t.msgMarks)-1].idx >= n {
				t.msgMarks = t.msgMarks[:len(t.msgMarks)-1]
			}
		}
	case kindTraces:
		t.trMarks = addMark(t.trMarks, t.curGen, int64(len(t.traces)))
		for i, e := range p.sizes {
			if run := p.runs[i]; run != "" {
				t.traceRuns[run] = append(t.traceRuns[run], int32(len(t.traces)))
			}
			t.traces = append(t.traces, p.item(base, i, e))
			t.live += int64(e)
		}
	case kindArtifacts:
		// Arrays of whole artifacts, as logs before kindArtifact held them.
		for i, e := range p.sizes {
			t.putArt(p.ids[i], art{hdr: p.item(base, i, e), legacy: true})
		}
	case kindArtifact:
		t.putArt(p.id.ID, art{hdr: whole})
		t.lastArt = p.id.ID
	case kindBlob:
		a, ok := t.arts.at[t.lastArt]
		if t.lastArt == "" || !ok || a.hasDat {
			return session.Errorf(session.CodeInternal, "artifact data record without its header")
		}
		a.data, a.hasDat = whole, true
		t.arts.at[t.lastArt] = a
		t.live += whole.size64()
		t.lastArt = ""
	case kindDelArtifacts:
		for _, a := range p.ids {
			if old, ok := t.arts.del(a); ok {
				t.live -= old.live()
			}
		}
	case kindWorkspace, kindAgent, kindHandoff, kindRuntime, kindFiles:
		old, existed := t.single[p.kind]
		t.single[p.kind] = whole
		t.setLive(old, existed, whole)
	case kindMeta:
		old, existed := t.meta[p.key]
		if p.null {
			// A null value deletes the key, as session.Apply does.
			if existed {
				t.live -= int64(old.fsz)
				delete(t.meta, p.key)
			}
			break
		}
		t.meta[p.key] = whole
		t.setLive(old, existed, whole)
	case kindRun:
		t.setStatus(p.id.RunID, p.id.Status)
		old, existed := t.runs.set(p.id.RunID, whole)
		t.setLive(old, existed, whole)
		if r, ok := p.memo.(session.Run); ok && t.runVals != nil {
			t.runVals[p.id.RunID] = runVal{at: whole, r: r}
		} else {
			delete(t.runVals, p.id.RunID)
		}
	case kindVerif:
		old, existed := t.verifs.set(p.id.ID, whole)
		t.setLive(old, existed, whole)
	case kindTask:
		old, existed := t.tasks.set(p.id.TaskID, whole)
		t.setLive(old, existed, whole)
	case kindCheckpoint:
		cp := *p.cp
		l := t.ckpts[cp.RunID]
		if l == nil {
			l = &runLine{}
			t.ckpts[cp.RunID] = l
		}
		l.latest = cp
		l.events = append(l.events, ckptEvent{gen: t.curGen, at: whole})
		t.live += whole.size64()
	case kindDropCkpt:
		if l := t.ckpts[p.key]; l != nil {
			for _, ev := range l.events {
				t.live -= int64(ev.at.fsz)
			}
			delete(t.ckpts, p.key)
		}
	case kindGens:
		g := p.gens
		t.msgMarks, t.trMarks = toMarks(g.Messages), toMarks(g.Traces)
		for run, gens := range g.Checkpoints {
			if l := t.ckpts[run]; l != nil && len(gens) == len(l.events) {
				for i := range l.events {
					l.events[i].gen = gens[i]
				}
			}
		}
	default:
		return errUnknownKind(p.kind)
	}
	return nil
}

func (it item) size64() int64 { return int64(it.size) }

func (t *tracker) putArt(id string, a art) {
	if old, existed := t.arts.set(id, a); existed {
		t.live -= old.live()
	}
	t.live += a.live()
}

func toMarks(pairs [][2]uint64) []mark {
	out := make([]mark, len(pairs))
	for i, p := range pairs {
		out[i] = mark{gen: p[0], idx: int64(p[1])}
	}
	return out
}

func fromMarks(marks []mark) [][2]uint64 {
	out := make([][2]uint64, len(marks))
	for i, m := range marks {
		out[i] = [2]uint64{m.gen, uint64(m.idx)}
	}
	return out
}

// cborHead reads the head of the CBOR item at p: its major type, its
// argument and the head's length.
func cborHead(p []byte) (major byte, arg uint64, n int, err error) {
	if len(p) == 0 {
		return 0, 0, 0, fmt.Errorf("truncated CBOR")
	}
	major, info := p[0]>>5, p[0]&0x1f
	switch {
	case info < 24:
		return major, uint64(info), 1, nil
	case info == 24 && len(p) >= 2:
		return major, uint64(p[1]), 2, nil
	case info == 25 && len(p) >= 3:
		return major, uint64(binary.BigEndian.Uint16(p[1:])), 3, nil
	case info == 26 && len(p) >= 5:
		return major, uint64(binary.BigEndian.Uint32(p[1:])), 5, nil
	case info == 27 && len(p) >= 9:
		return major, binary.BigEndian.Uint64(p[1:]), 9, nil
	}
	return 0, 0, 0, fmt.Errorf("unsupported CBOR head %#x", p[0])
}

// cborSkip returns the length of the CBOR item at the start of p.
func cborSkip(p []byte, depth int) (int, error) {
	if depth > 64 {
		return 0, fmt.Errorf("CBOR nested too deep")
	}
	major, arg, n, err := cborHead(p)
	if err != nil {
		return 0, err
	}
	switch major {
	case 0, 1, 7:
		return n, nil
	case 2, 3:
		if arg > uint64(len(p)-n) {
			return 0, fmt.Errorf("truncated CBOR string")
		}
		return n + int(arg), nil
	case 4, 5, 6:
		items := arg
		if major == 5 {
			items *= 2
		} else if major == 6 {
			items = 1
		}
		for ; items > 0; items-- {
			if n >= len(p) {
				return 0, fmt.Errorf("truncated CBOR container")
			}
			m, err := cborSkip(p[n:], depth+1)
			if err != nil {
				return 0, err
			}
			n += m
		}
		return n, nil
	}
	return 0, fmt.Errorf("bad CBOR major type %d", major)
}

// arrayHeaderLen is the length of the head of the CBOR array at p.
func arrayHeaderLen(p []byte) int {
	_, _, n, _ := cborHead(p)
	return n
}

// arrayElems returns the encoded length of each element of the CBOR array
// p. With bytes set, the elements are byte strings and the lengths are
// those of their content.
func arrayElems(p []byte, content bool) ([]int, error) {
	major, count, off, err := cborHead(p)
	if err != nil || major != 4 {
		return nil, fmt.Errorf("not a CBOR array")
	}
	if count > uint64(len(p)) {
		return nil, fmt.Errorf("CBOR array of %d elements in %d bytes", count, len(p))
	}
	out := make([]int, 0, count)
	for i := uint64(0); i < count; i++ {
		if off >= len(p) {
			return nil, fmt.Errorf("truncated CBOR array")
		}
		m, err := cborSkip(p[off:], 0)
		if err != nil {
			return nil, err
		}
		if content {
			maj, _, h, _ := cborHead(p[off:])
			if maj != 2 {
				return nil, fmt.Errorf("array element %d is not a byte string", i)
			}
			out = append(out, m-h)
		} else {
			out = append(out, m)
		}
		off += m
	}
	return out, nil
}

// idOnly decodes just the id fields of upserted records.
type idOnly struct {
	ID     string `json:"id"`
	RunID  string `json:"run_id"`
	TaskID string `json:"task_id"`
	StepID string `json:"step_id"`
	Status string `json:"status"`
}

// trim gives back the spare capacity of the index's lists, once a log has
// been indexed at open: an idle store holds its indexes at their size.
func (t *tracker) trim() {
	t.msgs, t.traces = slices.Clip(t.msgs), slices.Clip(t.traces)
	for k, v := range t.traceRuns {
		t.traceRuns[k] = slices.Clip(v)
	}
}

// clone returns a copy of t that later observes of t do not change.
func (t *tracker) clone() *tracker {
	c := *t
	c.memo = nil // remember reuses its array
	c.runVals = nil
	c.single, c.meta = maps.Clone(t.single), maps.Clone(t.meta)
	c.runs, c.verifs, c.tasks, c.arts = t.runs.clone(), t.verifs.clone(), t.tasks.clone(), t.arts.clone()
	c.status, c.counts = maps.Clone(t.status), maps.Clone(t.counts)
	// Messages are truncated in place (a truncation then an append
	// overwrites the slots after it), so the copy must own its items; the
	// other lists only grow or are replaced.
	c.msgs, c.msgMarks = slices.Clone(t.msgs), slices.Clone(t.msgMarks)
	c.traces, c.trMarks = slices.Clip(t.traces), slices.Clone(t.trMarks)
	c.traceRuns = make(map[string][]int32, len(t.traceRuns))
	for k, v := range t.traceRuns {
		c.traceRuns[k] = slices.Clip(v)
	}
	c.ckpts = make(map[string]*runLine, len(t.ckpts))
	for k, l := range t.ckpts {
		cl := *l
		cl.events = slices.Clip(l.events)
		c.ckpts[k] = &cl
	}
	return &c
}
