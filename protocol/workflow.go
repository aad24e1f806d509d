package protocol

import (
	"context"
	"fmt"
	"sync"

	"github.com/cairn-dev/cairn/api"
	"github.com/cairn-dev/cairn/session"
)

// maxWorkflowWorkers is how many steps ParallelResumable runs at once by
// default (fewer when fewer are left), as the other bindings do.
const maxWorkflowWorkers = 32

// Step is one step of ParallelResumable: its id, its identity (a digest of
// what the step does: change it and a rerun fails closed with
// step_identity_changed before anything runs) and the function that does
// the work. Run's result is recorded as the step's result (a JSON value;
// nil records none) and is what a rerun returns instead of running it.
type Step struct {
	StepID   string
	Identity string
	Run      func(ctx context.Context) (session.Value, error)
}

// StepError is a step whose Run failed (returned an error) during
// ParallelResumable. It unwraps to that error.
type StepError struct {
	StepID string
	Err    error
}

func (e *StepError) Error() string {
	return fmt.Sprintf("workflow step %s failed: %v", e.StepID, e.Err)
}

// Unwrap returns the step's error.
func (e *StepError) Unwrap() error { return e.Err }

// WorkflowOption qualifies ParallelResumable.
type WorkflowOption func(*workflowOptions)

type workflowOptions struct {
	sessionID string
	workers   int
}

// InSession makes the workflow's checkpoint owned by the session (as
// beginWorkflow's and completeStep's session_id): deleting the session
// deletes it, and another session's workflow of the same id is not_owner.
func InSession(sessionID string) WorkflowOption {
	return func(o *workflowOptions) { o.sessionID = sessionID }
}

// MaxWorkers bounds how many steps run at once (n < 1: the default, the
// number of steps left to run but at most 32).
func MaxWorkers(n int) WorkflowOption {
	return func(o *workflowOptions) { o.workers = n }
}

// ParallelResumable runs a resumable workflow's remaining steps
// concurrently, as the Python, Node and Rust bindings do:
//
//   - It begins the workflow with the specs' ids and identities
//     (beginWorkflow); a recorded step whose identity changed fails the
//     call with step_identity_changed before anything runs.
//   - Steps recorded as completed are not run: their recorded results are
//     returned. Every other step runs, at most MaxWorkers at once (default:
//     as many as are left, up to 32), and each success is recorded with
//     completeStep as it lands, before it counts as done.
//   - The results come back in spec order.
//   - When a step fails (Run returns an error, or its completeStep fails),
//     the other steps still finish and are recorded; then the first
//     failure is returned (a *StepError for Run's error, the client's error
//     for a failed call) and no results. A rerun runs only the steps that
//     did not succeed. A step that panics lets the others finish, then the
//     panic is raised again in the caller's goroutine.
//   - A step not started yet when ctx ends is not run; it fails with
//     ctx's error.
//   - The workflow is not finished: call FinishWorkflow once the results
//     are used, so that a later run starts over.
//
// A spec without Run is invalid_argument, before anything is called.
func (c *Client) ParallelResumable(ctx context.Context, specs []Step, workflowID string, opts ...WorkflowOption) ([]session.Value, error) {
	var o workflowOptions
	for _, opt := range opts {
		opt(&o)
	}
	ids := make([]api.StepSpec, len(specs))
	for i, s := range specs {
		if s.Run == nil {
			return nil, session.Errorf(session.CodeInvalidArgument, "parallelResumable: step %q has no Run function", s.StepID)
		}
		ids[i] = api.StepSpec{StepID: s.StepID, Identity: s.Identity}
	}
	begun, err := c.BeginWorkflow(ctx, api.BeginWorkflowRequest{WorkflowID: workflowID, SessionID: o.sessionID, Steps: ids})
	if err != nil {
		return nil, err
	}
	recorded := make(map[string]session.Value, len(begun.Completed))
	for _, r := range begun.Completed {
		recorded[r.StepID] = r.Result
	}
	results := make([]session.Value, len(specs))
	var todo []int
	for i, s := range specs {
		if v, ok := recorded[s.StepID]; ok {
			results[i] = v
		} else {
			todo = append(todo, i)
		}
	}
	if len(todo) == 0 {
		return results, nil
	}

	workers := o.workers
	if workers < 1 {
		workers = maxWorkflowWorkers
	}
	workers = min(workers, len(todo))
	var (
		mu       sync.Mutex
		failure  error
		panicked any
		next     int
		wg       sync.WaitGroup
	)
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		if failure == nil {
			failure = err
		}
	}
	runOne := func(i int) {
		s := specs[i]
		defer func() {
			if p := recover(); p != nil {
				mu.Lock()
				if panicked == nil {
					panicked = p
				}
				mu.Unlock()
			}
		}()
		if err := ctx.Err(); err != nil {
			fail(err)
			return
		}
		v, err := s.Run(ctx)
		if err != nil {
			fail(&StepError{StepID: s.StepID, Err: err})
			return
		}
		err = c.CompleteStep(ctx, api.CompleteStepRequest{
			WorkflowID: workflowID, SessionID: o.sessionID, StepID: s.StepID, Identity: s.Identity, Result: v,
		})
		if err != nil {
			fail(err)
			return
		}
		mu.Lock()
		results[i] = v
		mu.Unlock()
	}
	// Each worker takes the next step left until none is; all have
	// returned when Wait does.
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				if next == len(todo) {
					mu.Unlock()
					return
				}
				i := todo[next]
				next++
				mu.Unlock()
				runOne(i)
			}
		}()
	}
	wg.Wait()
	if panicked != nil {
		panic(panicked)
	}
	if failure != nil {
		return nil, failure
	}
	return results, nil
}
