package api

import (
	"fmt"
	"reflect"
	"slices"

	"github.com/cairn-dev/cairn/session"
)

// Method describes one method of the protocol: its name and the Go types
// of its params and result. The daemon's dispatch, the C API's method
// list, the Go client's calls and hello's method list are derived from
// Methods, and schema.json is generated from it.
type Method struct {
	Name   string
	Params reflect.Type
	Result reflect.Type
	// LibParams and LibResult, when not nil, are the shapes libcairn's
	// cairn_call takes and answers with instead of Params and Result.
	LibParams, LibResult reflect.Type
}

// Spec is a method with its params type P and result type R, so handlers
// and calls are typed by the compiler: the daemon registers
// handle(api.Save, fn) and the client calls protocol.Do(ctx, c, api.Save,
// req).
type Spec[P, R any] struct {
	Name string
}

// Method returns the table entry of s.
func (s Spec[P, R]) Method() Method {
	return Method{Name: s.Name, Params: reflect.TypeFor[P](), Result: reflect.TypeFor[R]()}
}

// The methods, one Spec each (protocol/PROTOCOL.md §5 describes them).
var (
	Hello          = Spec[HelloParams, HelloResult]{"hello"}
	Status         = Spec[Empty, StatusResult]{"status"}
	Subscribe      = Spec[SubscribeParams, SubscribeResult]{"subscribe"}
	Unsubscribe    = Spec[SubscribeParams, SubscribeResult]{"unsubscribe"}
	Save           = Spec[SaveRequest, SaveResult]{"save"}
	ResumeSession  = Spec[ResumeSessionRequest, ResumeSessionResult]{"resumeSession"}
	Summary        = Spec[SessionParams, session.Summary]{"summary"}
	Messages       = Spec[MessagesRequest, MessagesResult]{"messages"}
	Artifact       = Spec[ArtifactRequest, ArtifactResult]{"artifact"}
	Artifacts      = Spec[SessionParams, ArtifactsResult]{"artifacts"}
	ArtifactsByID  = Spec[ArtifactsByIDRequest, ArtifactsByIDResult]{"artifactsByID"}
	Run            = Spec[RunRequest, RunResult]{"run"}
	Runs           = Spec[SessionParams, RunsResult]{"runs"}
	RunEvents      = Spec[RunEventsRequest, RunEventsResult]{"runEvents"}
	BeginRun       = Spec[BeginRunRequest, BeginRunResult]{"beginRun"}
	Checkpoint     = Spec[CheckpointRequest, CheckpointResult]{"checkpoint"}
	CompleteRun    = Spec[CompleteRunRequest, CompleteRunResult]{"completeRun"}
	ResumeRun      = Spec[ResumeRunRequest, ResumeRunResult]{"resumeRun"}
	BeginWorkflow  = Spec[BeginWorkflowRequest, BeginWorkflowResult]{"beginWorkflow"}
	CompleteStep   = Spec[CompleteStepRequest, Empty]{"completeStep"}
	FinishWorkflow = Spec[WorkflowParams, Empty]{"finishWorkflow"}
	List           = Spec[Empty, ListResult]{"list"}
	Delete         = Spec[SessionParams, Empty]{"delete"}
	Fork           = Spec[ForkRequest, ForkResult]{"fork"}
	Export         = Spec[SessionParams, ExportResult]{"export"}
	Import         = Spec[ImportParams, ImportResult]{"import"}
	ExportFile     = Spec[ExportFileRequest, ExportFileResult]{"exportFile"}
	ImportFile     = Spec[ImportFileRequest, ImportResult]{"importFile"}
	Verify         = Spec[session.VerifyRequest, session.VerifyReport]{"verify"}
	Repair         = Spec[session.RepairRequest, session.RepairReport]{"repair"}
	Changes        = Spec[ChangesParams, ChangeSet]{"changes"}
	Handoff        = Spec[HandoffRequest, HandoffResult]{"handoff"}
	RuntimeCheck   = Spec[RuntimeCheckRequest, RuntimeCheckResult]{"runtime.check"}
	RuntimeRestart = Spec[RuntimeRestartRequest, RestartResult]{"runtime.restart"}
)

// Methods is the method table, in the order of protocol/PROTOCOL.md §5.
var Methods = []Method{
	Hello.Method(),
	withLib(Status.Method(), nil, reflect.TypeFor[LibStatus]()),
	withLib(Subscribe.Method(), nil, reflect.TypeFor[LibSubscription]()),
	withLib(Unsubscribe.Method(), reflect.TypeFor[NextEventParams](), reflect.TypeFor[Empty]()),
	Save.Method(),
	ResumeSession.Method(),
	Summary.Method(),
	Messages.Method(),
	Artifact.Method(),
	Artifacts.Method(),
	ArtifactsByID.Method(),
	Run.Method(),
	Runs.Method(),
	RunEvents.Method(),
	BeginRun.Method(),
	Checkpoint.Method(),
	CompleteRun.Method(),
	ResumeRun.Method(),
	BeginWorkflow.Method(),
	CompleteStep.Method(),
	FinishWorkflow.Method(),
	List.Method(),
	Delete.Method(),
	Fork.Method(),
	Export.Method(),
	Import.Method(),
	ExportFile.Method(),
	ImportFile.Method(),
	Verify.Method(),
	Repair.Method(),
	Changes.Method(),
	Handoff.Method(),
	RuntimeCheck.Method(),
	RuntimeRestart.Method(),
}

// MethodNames lists the name of every method in Methods, in order.
func MethodNames() []string {
	out := make([]string, len(Methods))
	for i, m := range Methods {
		out[i] = m.Name
	}
	return out
}

// Lookup returns the method named name.
func Lookup(name string) (Method, bool) {
	for _, m := range Methods {
		if m.Name == name {
			return m, true
		}
	}
	return Method{}, false
}

// CheckServed returns an error naming the first method of tables that
// served lacks, or the first name in served that no table lists: a
// dispatcher calls it at start-up so that it serves exactly the methods
// of the tables it is given (the daemon api.Methods; libcairn api.Methods
// and api.LibMethods).
func CheckServed(served []string, tables ...[]Method) error {
	known := map[string]bool{}
	for _, t := range tables {
		for _, m := range t {
			known[m.Name] = true
			if !slices.Contains(served, m.Name) {
				return fmt.Errorf("api: method %s is not served", m.Name)
			}
		}
	}
	for _, name := range served {
		if !known[name] {
			return fmt.Errorf("api: %s is served but not in the method table", name)
		}
	}
	return nil
}
