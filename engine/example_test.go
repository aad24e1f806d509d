package engine_test

import (
	"context"
	"fmt"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/session"
)

// An agent loop checkpoints after each tool turn; after a crash, ResumeRun
// hands back the boundary with the counters carried on.
func Example() {
	ctx := context.Background()
	e := engine.New(session.NewMemStore(), engine.Options{})
	defer e.Close()

	_, _ = e.Save(ctx, api.SaveRequest{SessionID: "demo", Change: &session.Change{
		AppendMessages: []session.Value{session.Value(`{"role":"user","content":"fix the build"}`)},
	}})
	run, _ := e.BeginRun(ctx, api.BeginRunRequest{SessionID: "demo", RunID: "run-1"})
	_, _ = e.Checkpoint(ctx, api.CheckpointRequest{
		RunID:          run.RunID,
		Turn:           1,
		NewMessages:    []session.Value{session.Value(`{"role":"assistant","tool":"make"}`)},
		Usage:          session.Usage{InputTokens: 900, OutputTokens: 100, TotalTokens: 1000},
		ToolCallsCount: 1,
		State:          session.Value(`{"plan":"rerun make"}`),
	})

	// ... the host crashes here; a new process picks the run up:
	res, err := e.ResumeRun(ctx, api.ResumeRunRequest{RunID: "run-1", NewRunID: "run-2"})
	if err != nil {
		fmt.Println(session.CodeOf(err))
		return
	}
	fmt.Println(res.RunID, "resumes", res.ResumedFrom, "at turn", res.Turn)
	fmt.Println("messages:", len(res.Messages), "tokens:", res.Usage.TotalTokens, "tool calls:", res.ToolCallsCount)
	fmt.Println("state:", string(res.State))

	_, err = e.ResumeRun(ctx, api.ResumeRunRequest{RunID: "no-such-run"})
	fmt.Println(session.CodeOf(err))
	// Output:
	// run-2 resumes run-1 at turn 1
	// messages: 2 tokens: 1000 tool calls: 1
	// state: {"plan":"rerun make"}
	// no_checkpoint
}
