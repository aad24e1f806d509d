package session

import (
	"context"
	"encoding/json"
	"slices"
)

// Query selects a range of a session's messages, traces or run events for a
// paged read. The range is [From, To) by index (To 0: to the end); Tail > 0
// selects the last Tail items instead; SinceGeneration > 0 (messages only)
// selects the items added after that generation. Limit and MaxBytes then cut
// the page short: at most Limit items (0: no limit) and, past the first item,
// no more than MaxBytes of item bytes (0: no limit). A page always holds at
// least one item when the range is not empty, so paging always advances.
type Query struct {
	From            int64  `json:"from,omitempty"`
	To              int64  `json:"to,omitempty"`
	Tail            int64  `json:"tail,omitempty"`
	SinceGeneration uint64 `json:"since_generation,omitempty"`
	Limit           int64  `json:"limit,omitempty"`
	MaxBytes        int64  `json:"max_bytes,omitempty"`
}

// Check reports a query that cannot be answered.
func (q Query) Check() error {
	if q.From < 0 || q.To < 0 || q.Tail < 0 || q.Limit < 0 || q.MaxBytes < 0 {
		return Errorf(CodeInvalidArgument, "from, to, tail, limit and max_bytes must not be negative")
	}
	if q.To != 0 && q.To < q.From {
		return Errorf(CodeInvalidArgument, "to (%d) is before from (%d)", q.To, q.From)
	}
	if q.Tail > 0 && (q.From != 0 || q.To != 0 || q.SinceGeneration != 0) {
		return Errorf(CodeInvalidArgument, "tail selects a range by itself; do not combine it with from, to or since_generation")
	}
	if q.SinceGeneration > 0 && (q.From != 0 || q.To != 0) {
		return Errorf(CodeInvalidArgument, "since_generation selects a range by itself; do not combine it with from or to")
	}
	return nil
}

// Bounds resolves the range of q over a list of total items, with since the
// index of the first item added after q.SinceGeneration (the store works it
// out; ignored unless SinceGeneration is set). The range is clamped to the
// list.
func (q Query) Bounds(total, since int64) (from, to int64) {
	from, to = q.From, q.To
	switch {
	case q.Tail > 0:
		from, to = max(total-q.Tail, 0), total
	case q.SinceGeneration > 0:
		from, to = since, total
	}
	if to == 0 || to > total {
		to = total
	}
	return min(from, to), to
}

// Cut returns how many of the items from..to a page takes, given each
// item's size in bytes: at least one, at most Limit, and no more than
// MaxBytes past the first.
func (q Query) Cut(from, to int64, size func(i int64) int64) int64 {
	n, bytes := int64(0), int64(0)
	for i := from; i < to; i++ {
		if q.Limit > 0 && n == q.Limit {
			break
		}
		s := size(i)
		if n > 0 && q.MaxBytes > 0 && bytes+s > q.MaxBytes {
			break
		}
		n, bytes = n+1, bytes+s
	}
	return n
}

// Page is one page of a paged read, taken at Generation: Items are the items
// From..Next-1 of a list of Total items. Next == the end of the queried
// range means the range is complete; otherwise query again from Next.
type Page[T any] struct {
	Generation uint64 `json:"generation"`
	Total      int64  `json:"total"`
	From       int64  `json:"from"`
	Next       int64  `json:"next"`
	More       bool   `json:"more"`
	Items      []T    `json:"items"`
}

// Run event kinds.
const (
	EventTrace      = "trace"
	EventCheckpoint = "checkpoint"
)

// RunEvent is one event of a run, as RunEvents lists them: a trace recorded
// with the run's id, or a loop checkpoint of the run, with the generation
// that committed it.
type RunEvent struct {
	Kind       string          `json:"kind"`
	Generation uint64          `json:"generation"`
	Trace      *Trace          `json:"trace,omitempty"`
	Checkpoint *LoopCheckpoint `json:"checkpoint,omitempty"`
}

// Reader is the targeted reads of a Store: each costs what it returns, not
// the session's size. Every read answers from one generation, which it
// reports.
type Reader interface {
	// Head returns the session's latest generation without its messages,
	// artifacts and traces (Messages is empty, the others nil), with its
	// loop checkpoints, and its summary.
	Head(ctx context.Context, sessionID string) (*State, Summary, error)

	// Messages returns a page of the session's messages.
	Messages(ctx context.Context, sessionID string, q Query) (Page[Value], error)

	// Traces returns a page of the session's traces.
	Traces(ctx context.Context, sessionID string, q Query) (Page[Trace], error)

	// Artifacts returns the artifacts named by ids (every artifact when
	// ids is nil) in the session's order, with their data when withData
	// (else Data is nil; SHA256, Size and Metadata describe it). A named
	// id the session does not hold is not_found. Total is the session's
	// artifact count.
	Artifacts(ctx context.Context, sessionID string, ids []string, withData bool) (Page[Artifact], error)

	// RunEvents returns a page of a run's events: every trace recorded
	// with its id and every loop checkpoint of it that is still kept (a
	// run's checkpoints are kept until it ends), in commit order.
	RunEvents(ctx context.Context, sessionID, runID string, q Query) (Page[RunEvent], error)

	// Copy creates session dst (which must not exist: conflict) from the
	// latest generation of src (or generation at, when at is not 0)
	// without its loop checkpoints, with then (a normalised delta, may be
	// nil) applied, as generation 1 of dst, created now. The content is
	// copied inside the store.
	Copy(ctx context.Context, src, dst string, at uint64, then *Change) (CommitResult, error)
}

// pageOf cuts a page of q out of list, whose first item added after
// q.SinceGeneration is at since.
func pageOf[T any](list []T, gen uint64, q Query, since int64, size func(T) int64) (Page[T], error) {
	if err := q.Check(); err != nil {
		return Page[T]{}, err
	}
	total := int64(len(list))
	from, to := q.Bounds(total, since)
	n := q.Cut(from, to, func(i int64) int64 { return size(list[i]) })
	items := slices.Clone(list[from : from+n])
	if items == nil {
		items = []T{}
	}
	return Page[T]{Generation: gen, Total: total, From: from, Next: from + n, More: from+n < to, Items: items}, nil
}

// ValueSize is the size a paged read counts for a value: its bytes.
func ValueSize(v Value) int64 { return int64(len(v)) }

// TraceSize is the size a paged read counts for a trace.
func TraceSize(t Trace) int64 { return int64(len(t.Data)+len(t.Type)+len(t.RunID)) + 48 }

// EventSize is the size a paged read counts for a run event.
func EventSize(e RunEvent) int64 {
	if e.Trace != nil {
		return TraceSize(*e.Trace)
	}
	if e.Checkpoint != nil {
		return int64(len(e.Checkpoint.State)) + 128
	}
	return 16
}

// jsonSize is the length of v's JSON encoding (0 if it has none).
func jsonSize(v any) int64 {
	b, _ := json.Marshal(v)
	return int64(len(b))
}
