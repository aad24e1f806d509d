//go:build cgo

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"testing"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/session"
)

// TestMessagesAsStored checks that messages answers a page of messages as
// the host saved them, byte for byte (api.MessagesResult.AppendJSON), not
// re-encoded by encoding/json, which would compact the whitespace and
// escape '<'.
func TestMessagesAsStored(t *testing.T) {
	h, err := openHandle(fmt.Sprintf(`{"workspace":%q,"embedded":true}`, t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = closeHandle(h) })
	msgs := []string{`{"role": "user", "content": "a <b> & c"}`, "[1,\n 2]", `"\u00e9"`}
	save := fmt.Sprintf(`{"session_id":"s","change":{"append_messages":[%s,%s,%s]}}`, msgs[0], msgs[1], msgs[2])
	if _, err := call(h, "save", []byte(save)); err != nil {
		t.Fatal(err)
	}
	out, err := call(h, "messages", []byte(`{"session_id":"s","tail":2}`))
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf(`{"session_id":"s","generation":1,"total":3,"from":1,"next":3,"more":false,"messages":[%s,%s]}`, msgs[1], msgs[2])
	if string(out) != want {
		t.Fatalf("messages(tail=2):\n got %s\nwant %s", out, want)
	}
	out, err = call(h, "messages", []byte(`{"session_id":"s","tail":3}`))
	if err != nil {
		t.Fatal(err)
	}
	if !json.Valid(out) || !bytes.Contains(out, []byte(msgs[0])) {
		t.Fatalf("messages(tail=3) = %s, want %s in it", out, msgs[0])
	}
}

// TestCheckpointResultJSON checks that a checkpoint's result, encoded by
// hand (api.CheckpointResult's AppendJSON), is what json.Marshal gives,
// into the caller's buffer and into a result of its own, and that a buffer
// too small for it is left for C memory.
func TestCheckpointResultJSON(t *testing.T) {
	for _, r := range []api.CheckpointResult{
		{}, {Generation: 7, MessageCount: 12},
		{Generation: math.MaxUint64, MessageCount: math.MinInt64},
		{Generation: 1 << 40, MessageCount: math.MaxInt64},
	} {
		want, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 128)
		p, n, err := encodeResultTo(r, buf)
		ok := err == nil && p == nil
		if !ok || !bytes.Equal(buf[:n], want) {
			t.Fatalf("%+v: %q (%v), json.Marshal gives %q", r, buf[:n], ok, want)
		}
		if got, err := encodeResult(r); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%+v: encodeResult gives %q (%v), json.Marshal %q", r, got, err, want)
		}
		small := make([]byte, len(want)-1, len(want)-1)
		p, n, err = encodeResultTo(r, small)
		if err != nil || p == nil {
			t.Fatalf("%+v: encoded into %d bytes, %d needed", r, len(small), len(want))
		}
		if got := takeC(p, n); !bytes.Equal(got, want) {
			t.Fatalf("%+v: in C memory %q, json.Marshal gives %q", r, got, want)
		}
	}
}

// TestResumeSessionResultC checks that a resumeSession answer, which
// encodes its parts other than the messages once (api.JSONPreparer), is
// what json.Marshal gives, into the caller's buffer and into C memory, and
// that one encoding/json refuses (a NaN cost) answers json.Marshal's
// error, not what the prepared appender holds.
func TestResumeSessionResultC(t *testing.T) {
	r := api.ResumeSessionResult{Generation: 3, MessageCount: 2, Snapshot: &session.Snapshot{
		SessionID: "s", Generation: 3, Messages: []session.Value{json.RawMessage(`{"role":"user"}`), json.RawMessage(`[1,2]`)},
		Runs: []session.Run{{RunID: "r", Status: session.RunRunning, Usage: session.Usage{Cost: 0.25}}},
	}}
	want, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, len(want))
	if p, n, err := encodeResultTo(r, buf); err != nil || p != nil || !bytes.Equal(buf[:n], want) {
		t.Fatalf("into buf: %q (%v, C memory %v), json.Marshal gives %q", buf[:n], err, p != nil, want)
	}
	p, n, err := encodeResultTo(r, nil)
	if err != nil || p == nil {
		t.Fatalf("into C memory: %v", err)
	}
	if got := takeC(p, n); !bytes.Equal(got, want) {
		t.Fatalf("in C memory %q, json.Marshal gives %q", got, want)
	}
	r.Snapshot.Runs[0].Usage.Cost = math.NaN()
	if p, _, err := encodeResultTo(r, nil); err == nil || p != nil {
		t.Fatalf("a NaN cost: encoded (C memory %v), want json.Marshal's error", p != nil)
	}
}
