package protocol

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/session"
)

// RunOptions says how StartRun starts a run.
type RunOptions struct {
	// Resume picks up the session's interrupted run (the latest, when there
	// are several) from its last finished turn; without one, a new run
	// starts.
	Resume bool
	// RunID names the new run (default: one cairn makes).
	RunID string
}

// Turn is one finished tool turn, as AgentRun.Turn saves it.
type Turn struct {
	// Messages are the turn's new messages.
	Messages []session.Value
	// Usage is what the turn spent; it is added to the run's totals.
	Usage session.Usage
	// ToolCalls is how many tool calls the turn made.
	ToolCalls int64
	// State, when set, is saved to resume with.
	State session.Value
}

// AgentRun is one agent run of a session for a host with its own loop:
// Turn checkpoints each finished tool turn (its messages, the turn number,
// the running usage and tool-call totals and a state) in one commit, and
// nothing is written while a turn is under way, so a process killed in the
// middle of a tool call resumes from the last finished turn. Complete ends
// the run; a run never completed (an error, a crash) is left running, for
// StartRun with Resume to pick up. An AgentRun is safe for one goroutine
// at a time; Turn and Complete serialize.
//
// A Turn whose checkpoint fails with code unavailable (a lost connection,
// a call timeout: the outcome is unknown) is settled by the next Turn (or
// Complete, Fail): it first reads the run to learn whether that checkpoint
// was committed. If it was, the run counts it, and a Turn equal to it is
// the host retrying it: it returns its number without saving it again;
// any other Turn is the next one. If it was not, the Turn is saved anew.
type AgentRun struct {
	c         *Client
	sessionID string
	runID     string
	from      string
	messages  []session.Value

	mu    sync.Mutex
	turns int64
	usage session.Usage
	tools int64
	state session.Value
	done  bool
	// unsure is the last Turn when its checkpoint's outcome is unknown.
	unsure *attempt
}

// attempt is a Turn whose checkpoint's outcome is unknown: its number,
// the totals it carried and the Turn itself.
type attempt struct {
	n     int64
	usage session.Usage
	tools int64
	t     Turn
}

// StartRun starts a run of sessionID (creating the session when it does
// not exist), or with opts.Resume picks up its interrupted run with the
// counters that run had checkpointed.
func (c *Client) StartRun(ctx context.Context, sessionID string, opts RunOptions) (*AgentRun, error) {
	if err := session.ValidateID("session", sessionID); err != nil {
		return nil, err
	}
	if opts.Resume {
		zero, no := int64(0), false
		rs, err := c.ResumeSessionWith(ctx, api.ResumeSessionRequest{
			SessionID: sessionID, MessagesTail: &zero, Artifacts: api.IncludeNone, Traces: api.IncludeNone,
			Drift: &no, Processes: &no,
		})
		if err != nil && session.CodeOf(err) != session.CodeNotFound {
			return nil, err
		}
		if err == nil && len(rs.InterruptedRuns) > 0 {
			last := rs.InterruptedRuns[len(rs.InterruptedRuns)-1]
			r, err := c.ResumeRun(ctx, api.ResumeRunRequest{RunID: last.RunID, SessionID: sessionID, NewRunID: opts.RunID})
			if err != nil {
				return nil, err
			}
			return &AgentRun{c: c, sessionID: sessionID, runID: r.RunID, from: r.ResumedFrom, messages: r.Messages,
				turns: r.Turn, usage: r.Usage, tools: r.ToolCallsCount, state: r.State}, nil
		}
	}
	if err := c.ensureSession(ctx, sessionID); err != nil {
		return nil, err
	}
	r, err := c.BeginRun(ctx, api.BeginRunRequest{SessionID: sessionID, RunID: opts.RunID})
	if err != nil {
		return nil, err
	}
	return &AgentRun{c: c, sessionID: sessionID, runID: r.RunID}, nil
}

// ensureSession creates sessionID, empty, when it does not exist: beginRun
// needs one. A racing creator wins (generation 0 expected); its session is
// as good.
func (c *Client) ensureSession(ctx context.Context, sessionID string) error {
	_, err := c.Summary(ctx, sessionID)
	if err == nil || session.CodeOf(err) != session.CodeNotFound {
		return err
	}
	zero := uint64(0)
	_, err = c.Save(ctx, api.SaveRequest{SessionID: sessionID,
		Snapshot: &session.Snapshot{Messages: []session.Value{}}, ExpectGeneration: &zero})
	if session.CodeOf(err) == session.CodeConflict {
		return nil
	}
	return err
}

// SessionID is the session the run writes to.
func (r *AgentRun) SessionID() string { return r.sessionID }

// RunID is the run's id; a resumed run has a new one (see ResumedFrom).
func (r *AgentRun) RunID() string { return r.runID }

// ResumedFrom is the run this one resumed, or "".
func (r *AgentRun) ResumedFrom() string { return r.from }

// Messages are, on resume, the session's messages up to the last finished
// turn.
func (r *AgentRun) Messages() []session.Value { return r.messages }

// Turns is the last finished turn (0 before the first).
func (r *AgentRun) Turns() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.turns
}

// Usage is the usage over the run line, resumed runs included.
func (r *AgentRun) Usage() session.Usage {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.usage
}

// ToolCallsCount is the tool calls over the run line, resumed runs included.
func (r *AgentRun) ToolCallsCount() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.tools
}

// State is the state saved with the last finished turn, if any.
func (r *AgentRun) State() session.Value {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.state
}

// errRunDone is returned by Turn on a completed run.
var errRunDone = errors.New("run is finished")

// Turn checkpoints one finished turn and returns its number. The totals
// change only when the checkpoint is saved.
func (r *AgentRun) Turn(ctx context.Context, t Turn) (int64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done {
		return 0, session.Wrap(session.CodeConflict, errRunDone, "turn: run %s", r.runID)
	}
	a, err := r.settle(ctx)
	if err != nil {
		return 0, err
	}
	if a != nil && sameTurn(a.t, t) {
		return r.turns, nil // the host retrying the turn that was committed
	}
	n, usage, tools := r.turns+1, r.usage.Add(t.Usage), r.tools+t.ToolCalls
	msgs := t.Messages
	if msgs == nil {
		msgs = []session.Value{}
	}
	if _, err := r.c.Checkpoint(ctx, api.CheckpointRequest{RunID: r.runID, SessionID: r.sessionID, Turn: n,
		NewMessages: msgs, Usage: usage, ToolCallsCount: tools, State: t.State}); err != nil {
		if CodeOf(err) == api.CodeUnavailable {
			// The caller may reuse its slices: keep copies.
			t.Messages = cloneValues(t.Messages)
			t.State = slices.Clone(t.State)
			r.unsure = &attempt{n: n, usage: usage, tools: tools, t: t}
		}
		return 0, err
	}
	r.turns, r.usage, r.tools = n, usage, tools
	if t.State != nil {
		r.state = t.State
	}
	return n, nil
}

// Complete ends the run as completed, with its totals. Completing again
// does nothing.
func (r *AgentRun) Complete(ctx context.Context) error {
	return r.end(ctx, "completed")
}

// Fail ends the run as failed: it can no longer be resumed.
func (r *AgentRun) Fail(ctx context.Context) error {
	return r.end(ctx, "failed")
}

func (r *AgentRun) end(ctx context.Context, status string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done {
		return nil
	}
	if _, err := r.settle(ctx); err != nil {
		return err
	}
	usage, tools := r.usage, r.tools
	if _, err := r.c.CompleteRun(ctx, api.CompleteRunRequest{RunID: r.runID, SessionID: r.sessionID, Status: status,
		Usage: &usage, ToolCallsCount: &tools}); err != nil {
		return err
	}
	r.done = true
	return nil
}

// WithRun starts a run (as StartRun), calls fn with it and completes it
// when fn returns nil. When fn fails the run is left as a crash leaves it,
// to be resumed.
func (c *Client) WithRun(ctx context.Context, sessionID string, opts RunOptions, fn func(*AgentRun) error) error {
	r, err := c.StartRun(ctx, sessionID, opts)
	if err != nil {
		return err
	}
	if err := fn(r); err != nil {
		return err
	}
	return r.Complete(ctx)
}

// settle learns whether the Turn whose outcome was unknown was committed
// (the run's checkpoint has reached it) and, if so, counts it and returns
// it; nil otherwise. An error reading the run leaves it unknown.
func (r *AgentRun) settle(ctx context.Context) (*attempt, error) {
	a := r.unsure
	if a == nil {
		return nil, nil
	}
	rec, err := r.c.Run(ctx, api.RunRequest{RunID: r.runID, SessionID: r.sessionID})
	if err != nil {
		return nil, err
	}
	r.unsure = nil
	if rec.Checkpoint == nil || rec.Checkpoint.Turn < a.n {
		return nil, nil
	}
	r.turns, r.usage, r.tools = a.n, a.usage, a.tools
	if a.t.State != nil {
		r.state = a.t.State
	}
	return a, nil
}

// sameTurn reports whether a and b carry the same messages, usage, tool
// calls and state: the same JSON values, however their texts are spaced,
// ordered or spelled (a host that encodes a retried turn again), as the
// Python, Node.js and Rust helpers compare them.
func sameTurn(a, b Turn) bool {
	return a.Usage == b.Usage && a.ToolCalls == b.ToolCalls && sameValue(a.State, b.State) &&
		slices.EqualFunc(a.Messages, b.Messages, sameValue)
}

// sameValue reports whether x and y are the same JSON value: objects with
// the same members in any order, numbers of the same value however
// written (1, 1.0 and 1e0 are one number). An absent value (nil) is only
// the same as another absent one.
func sameValue(x, y session.Value) bool {
	if bytes.Equal(x, y) {
		return true
	}
	if len(x) == 0 || len(y) == 0 {
		return false
	}
	vx, err := decodeValue(x)
	if err != nil {
		return false
	}
	vy, err := decodeValue(y)
	return err == nil && equalValues(vx, vy)
}

func decodeValue(v session.Value) (any, error) {
	d := json.NewDecoder(bytes.NewReader(v))
	d.UseNumber()
	var out any
	err := d.Decode(&out)
	return out, err
}

func equalValues(x, y any) bool {
	switch x := x.(type) {
	case map[string]any:
		y, ok := y.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, xv := range x {
			yv, ok := y[k]
			if !ok || !equalValues(xv, yv) {
				return false
			}
		}
		return true
	case []any:
		y, ok := y.([]any)
		return ok && slices.EqualFunc(x, y, equalValues)
	case json.Number:
		y, ok := y.(json.Number)
		if !ok {
			return false
		}
		if x == y {
			return true
		}
		cx, okx := decimal(string(x))
		cy, oky := decimal(string(y))
		return okx && oky && cx == cy
	default: // string, bool, nil
		return x == y
	}
}

// canonical is a JSON number's value as sign, significant digits (no
// leading or trailing zeros) and the power of ten they are scaled by.
// Zero is the zero canonical, whatever its sign.
type canonical struct {
	neg    bool
	digits string
	exp    int64
}

// decimal returns the canonical form of the JSON number s, read as text:
// a number such as 1e100000000 is not expanded. ok is false when s is not
// a JSON number or its exponent does not fit an int64.
func decimal(s string) (c canonical, ok bool) {
	if s, c.neg = strings.CutPrefix(s, "-"); s == "" {
		return canonical{}, false
	}
	mant, e, hasExp := strings.Cut(strings.ToLower(s), "e")
	whole, frac, _ := strings.Cut(mant, ".")
	if hasExp {
		n, err := strconv.ParseInt(e, 10, 64)
		if err != nil {
			return canonical{}, false
		}
		c.exp = n
	}
	digits := whole + frac
	if digits == "" || strings.Trim(digits, "0123456789") != "" || c.exp < math.MinInt64+int64(len(frac)) {
		return canonical{}, false
	}
	c.exp -= int64(len(frac))
	digits = strings.TrimLeft(digits, "0")
	trimmed := strings.TrimRight(digits, "0")
	if trimmed == "" {
		return canonical{}, true
	}
	if c.exp > math.MaxInt64-int64(len(digits)-len(trimmed)) {
		return canonical{}, false
	}
	c.exp += int64(len(digits) - len(trimmed))
	c.digits = trimmed
	return c, true
}

func cloneValues(vs []session.Value) []session.Value {
	out := make([]session.Value, len(vs))
	for i, v := range vs {
		out[i] = slices.Clone(v)
	}
	return out
}
