package daemon

import (
	"context"

	"github.com/cairn-dev/cairn/engine"
	"github.com/cairn-dev/cairn/procs"
	"github.com/cairn-dev/cairn/session"
)

// Backend is what the daemon dispatches to. *engine.Engine implements it;
// the interface exists so the server can be tested and benchmarked over any
// engine configuration (an engine over session.MemStore, for instance).
type Backend interface {
	Save(ctx context.Context, req engine.SaveRequest) (engine.SaveResult, error)
	ResumeSession(ctx context.Context, sessionID string) (*engine.ResumeSessionResult, error)
	BeginRun(ctx context.Context, req engine.BeginRunRequest) (engine.BeginRunResult, error)
	Checkpoint(ctx context.Context, req engine.CheckpointRequest) (engine.CheckpointResult, error)
	CompleteRun(ctx context.Context, req engine.CompleteRunRequest) (engine.CompleteRunResult, error)
	ResumeRun(ctx context.Context, req engine.ResumeRunRequest) (*engine.ResumeRunResult, error)
	BeginWorkflow(ctx context.Context, req engine.BeginWorkflowRequest) (engine.BeginWorkflowResult, error)
	CompleteStep(ctx context.Context, req engine.CompleteStepRequest) error
	FinishWorkflow(ctx context.Context, workflowID string) error
	List(ctx context.Context) ([]session.Summary, error)
	Delete(ctx context.Context, sessionID string) error
	Fork(ctx context.Context, req engine.ForkRequest) (engine.ForkResult, error)
	Export(ctx context.Context, sessionID string) ([]byte, error)
	Import(ctx context.Context, envelope []byte) (engine.ImportResult, error)
	Handoff(ctx context.Context, req engine.HandoffRequest) (engine.HandoffResult, error)
	RuntimeCheck(ctx context.Context, req engine.RuntimeCheckRequest) (engine.RuntimeCheckResult, error)
	RuntimeRestart(ctx context.Context, req engine.RuntimeRestartRequest) (procs.Result, error)
	Subscribe(fn func(engine.Event)) (cancel func())
	Capabilities() session.Capabilities
}

var _ Backend = (*engine.Engine)(nil)
