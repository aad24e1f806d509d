//go:build cgo

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"strings"
	"testing"
)

// benchMessage returns a chat message of 1.1–1.8 KB of JSON, shaped like
// those of bench/reads/reads_bench.py (what a Python host sends: spaces
// after ':' and ',').
func benchMessage(r *rand.Rand, i int) string {
	var b strings.Builder
	n := 1100 + r.Intn(700)
	for b.Len() < n {
		for j := 2 + r.Intn(8); j > 0; j-- {
			b.WriteByte(byte('a' + r.Intn(26)))
		}
		b.WriteByte(' ')
	}
	role := [2]string{"user", "assistant"}[i%2]
	return fmt.Sprintf(`{"id": "msg-%d", "role": %q, "content": %q}`, i, role, b.String())
}

// BenchmarkMessagesTail10 splits the Go side of an embedded
// messages(tail=10) (what cairn_call does before copying the answer to C
// memory): the read (invoke), the encoding of its result (encode), and both
// (call).
func BenchmarkMessagesTail10(b *testing.B) {
	ws := b.TempDir()
	h, err := openHandle(fmt.Sprintf(`{"workspace":%q,"embedded":true}`, ws))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = closeHandle(h) })
	r := rand.New(rand.NewSource(13))
	msgs := make([]string, 100)
	for i := range msgs {
		msgs[i] = benchMessage(r, i)
	}
	save := `{"session_id":"s","change":{"append_messages":[` + strings.Join(msgs, ",") + `]}}`
	if _, err := call(h, "save", []byte(save)); err != nil {
		b.Fatal(err)
	}
	in, err := lookup(h)
	if err != nil {
		b.Fatal(err)
	}
	req := []byte(`{"session_id":"s","tail":10}`)
	res, err := in.invoke(context.Background(), "messages", req)
	if err != nil {
		b.Fatal(err)
	}
	out, err := encodeResult(res)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("invoke", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := in.invoke(context.Background(), "messages", req); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encode", func(b *testing.B) {
		b.SetBytes(int64(len(out)))
		for i := 0; i < b.N; i++ {
			if _, err := encodeResult(res); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("json.Marshal", func(b *testing.B) {
		b.SetBytes(int64(len(out)))
		for i := 0; i < b.N; i++ {
			if _, err := json.Marshal(res); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("call", func(b *testing.B) {
		b.SetBytes(int64(len(out)))
		for i := 0; i < b.N; i++ {
			if _, err := call(h, "messages", req); err != nil {
				b.Fatal(err)
			}
		}
	})
}
