//go:build cgo

package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// TestMessagesReadIntoHandlePad: an embedded read of messages reads into
// the handle's pad, given back once the answer is encoded (the pad then
// holds a free buffer and none lent), and answers stay right read after
// read through the same buffers.
func TestMessagesReadIntoHandlePad(t *testing.T) {
	h, err := openHandle(fmt.Sprintf(`{"workspace":%q,"embedded":true}`, t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = closeHandle(h) })
	const n = 30
	for i := range n {
		// A save per message: a tail spans frames, read as one span.
		req := fmt.Sprintf(`{"session_id":"s","change":{"append_messages":[{"i":%d,"text":%q}]}}`, i, strings.Repeat(string(rune('a'+i%26)), 1500))
		if _, err := call(h, "save", []byte(req)); err != nil {
			t.Fatal(err)
		}
	}
	in, err := lookup(h)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		req  string
		from int
	}{{`{"session_id":"s","tail":20}`, n - 20}, {`{"session_id":"s","from":2,"limit":5}`, 2}, {`{"session_id":"s","tail":20}`, n - 20}, {`{"session_id":"s","tail":3}`, n - 3}} {
		out, err := call(h, "messages", []byte(c.req))
		if err != nil {
			t.Fatal(err)
		}
		var page struct {
			From     int `json:"from"`
			Messages []struct {
				I    int    `json:"i"`
				Text string `json:"text"`
			} `json:"messages"`
		}
		if err := json.Unmarshal(out, &page); err != nil {
			t.Fatalf("%s: %v", c.req, err)
		}
		if page.From != c.from || len(page.Messages) == 0 {
			t.Fatalf("%s: from %d, %d messages", c.req, page.From, len(page.Messages))
		}
		for k, m := range page.Messages {
			if m.I != c.from+k || m.Text != strings.Repeat(string(rune('a'+m.I%26)), 1500) {
				t.Fatalf("%s: message %d is %d %.10q", c.req, c.from+k, m.I, m.Text)
			}
		}
		if free, lent := in.pad.Count(); free == 0 || lent != 0 {
			t.Fatalf("%s: the handle's pad holds %d free and %d lent buffers, want some free and none lent", c.req, free, lent)
		}
	}
}
