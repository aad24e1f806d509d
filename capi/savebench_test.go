//go:build cgo

package main

import (
	"context"
	"encoding/base64"
	"fmt"
	"testing"

	"github.com/cairn-dev/cairn/api"
)

// putRequest is the save a LangGraph CairnSaver.put sends (cairn.langgraph)
// for checkpoint i of a small graph: two channel values, the checkpoint
// record, the head, and one index message.
func putRequest(i int) []byte {
	ver := fmt.Sprintf("%032d.0.25290693801937114", i)
	cp := fmt.Sprintf("1f1edce0-b6a0-6bca-bffe-%012x", i)
	rec := fmt.Sprintf(`{"cp":["msgpack","h6F2AqJpZNkkMWYxZWRjZTAtYjZhMC02YmNhLWJmZmUtMjMwZjg5YjE3M2Y4onRz2SAyMDI2LTEyLTAxVDIxOjI3OjQzLjU3NDEzMCswMDowMLBjaGFubmVsX3ZlcnNpb25zgqhtZXNzYWdlc9k0MDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDUuMC4yNTI5MDY5MzgwMTkzNzExNKRzdGVw2TQwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwNS4wLjI1MjkwNjkzODAxOTM3MTE0rXZlcnNpb25zX3NlZW6ArXBlbmRpbmdfc2VuZHOQsHVwZGF0ZWRfY2hhbm5lbHPA"],"md":["msgpack","gqZzb3VyY2WkbG9vcKRzdGVwBA=="],"parent":"1f1edce0-b69d-6741-bffe-%012x"}`, i)
	b64 := base64.StdEncoding.EncodeToString
	return fmt.Appendf(nil, `{"session_id":"langgraph:t","change":{"put_artifacts":[`+
		`{"id":"b[\"\",\"messages\",\"%s\"]","kind":"langgraph","data":"bXNncGFjawCUq2hlbGxvIHdvcmxkq2hlbGxvIHdvcmxkq2hlbGxvIHdvcmxkq2hlbGxvIHdvcmxk"},`+
		`{"id":"b[\"\",\"step\",\"%s\"]","kind":"langgraph","data":"bXNncGFjawAE"},`+
		`{"id":"c[\"\",\"%s\"]","kind":"langgraph","data":"%s"},`+
		`{"id":"h[\"\"]","kind":"langgraph","data":"%s"}],`+
		`"append_messages":[{"ns":"","id":"%s","parent":"1f1edce0-b69d-6741-bffe-%012x","md":["msgpack","gqZzb3VyY2WkbG9vcKRzdGVwBA=="]}]}}`,
		ver, ver, cp, b64([]byte(rec)), b64([]byte(cp)), cp, i)
}

// BenchmarkSavePut splits the Go side of an embedded CairnSaver.put's save:
// decoding its params (decode, the fast path; strict, encoding/json as
// before it) and the whole call (call: decode, the commit with its
// fdatasync, the answer).
func BenchmarkSavePut(b *testing.B) {
	req := putRequest(7)
	b.Run("decode", func(b *testing.B) {
		b.SetBytes(int64(len(req)))
		for i := 0; i < b.N; i++ {
			if _, _, err := decodeParamsCtx[api.SaveRequest](context.Background(), req, false); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("strict", func(b *testing.B) {
		b.SetBytes(int64(len(req)))
		for i := 0; i < b.N; i++ {
			var p api.SaveRequest
			if err := strictDecode(req, &p); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("call", func(b *testing.B) {
		h, err := openHandle(fmt.Sprintf(`{"workspace":%q,"embedded":true}`, b.TempDir()))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = closeHandle(h) })
		reqs := make([][]byte, b.N)
		for i := range reqs {
			reqs[i] = putRequest(i)
		}
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if _, err := call(h, "save", reqs[i]); err != nil {
				b.Fatal(err)
			}
		}
	})
}
