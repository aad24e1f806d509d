package api

// ChangesParams are the params of changes. Since is a clock from an
// earlier answer; "" or a clock of another tracker instance asks for
// everything (FreshInstance set).
type ChangesParams struct {
	Since string `json:"since,omitempty"`
}

// ChangeSet is the answer to changes: the paths (slash-separated, relative
// to the root, sorted) that changed after the given clock, and the clock to
// pass next time. With FreshInstance the tracker could not tell what
// changed since that clock (empty, from another instance or a restart, or
// older than the history it keeps) and Added lists every indexed path.
// Directories are not listed; the files inside them are.
type ChangeSet struct {
	Clock         string   `json:"clock"`
	FreshInstance bool     `json:"fresh_instance"`
	Added         []string `json:"added"`
	Modified      []string `json:"modified"`
	Deleted       []string `json:"deleted"`
}

// FilesStatus reports workspace tracking: its mode, counters and clock.
type FilesStatus struct {
	Root      string `json:"root"`
	Mode      string `json:"mode"`              // "watching" or "polling"
	Warning   string `json:"warning,omitempty"` // why the tracker polls, naming the limit to raise
	Clock     string `json:"clock"`
	Files     int    `json:"files"`     // indexed non-directory paths
	Dirs      int    `json:"dirs"`      // indexed directories, the root included
	Watches   int    `json:"watches"`   // inotify watches held
	Events    uint64 `json:"events"`    // file system events received
	Rescans   uint64 `json:"rescans"`   // full rescans (overflow, polling, sync fallback)
	Overflows uint64 `json:"overflows"` // inotify queue overflows
}

// HandoffRequest asks for a session's handoff.
type HandoffRequest struct {
	SessionID string `json:"session_id"`
}

// HandoffMissing is one required part a handoff lacks.
type HandoffMissing struct {
	Key     string `json:"key"`     // result, verification, restart_path, reviewed_version, risks_decisions or next_step
	Message string `json:"message"` // a sentence for people
}

// HandoffResult is HANDOFF.md rendered from the latest generation's
// evidence, and what the handoff lacks.
type HandoffResult struct {
	SessionID  string           `json:"session_id"`
	Generation uint64           `json:"generation"`
	Markdown   string           `json:"markdown"`
	Complete   bool             `json:"complete"` // nothing required is missing
	Missing    []HandoffMissing `json:"missing"`
	Files      Drift            `json:"files"` // the files changed in the session, per the manifests
}

// RuntimeCheckRequest asks for the live state of a session's recorded
// processes.
type RuntimeCheckRequest struct {
	SessionID string `json:"session_id"`
	TimeoutMS int64  `json:"timeout_ms,omitempty"` // per health check; 0: the default
}

// ProcessState is the probed state of one recorded process: not_running,
// healthy, unhealthy or unknown.
type ProcessState struct {
	Name   string `json:"name"`
	State  string `json:"state"`
	Detail string `json:"detail,omitempty"` // what was tried and what it answered
}

// PreviewState is a recorded preview with the state of its process.
type PreviewState struct {
	URL     string `json:"url"`
	Process string `json:"process,omitempty"`
	State   string `json:"state"` // the process's state; unknown without one
}

// RuntimeCheckResult is the live state of the recorded processes and
// previews.
type RuntimeCheckResult struct {
	Processes []ProcessState `json:"processes"`
	Previews  []PreviewState `json:"previews"`
}

// RuntimeRestartRequest asks to bring one recorded process back.
type RuntimeRestartRequest struct {
	SessionID string `json:"session_id"`
	Name      string `json:"name"`
	TimeoutMS int64  `json:"timeout_ms,omitempty"` // for the health check to pass; 0: the default
}

// RestartResult reports what runtime.restart did.
type RestartResult struct {
	Name    string `json:"name"`
	Outcome string `json:"outcome"` // started, already_healthy or failed
	// State is the process's state when the restart returned: healthy;
	// unknown when it started but has nothing that can prove it up (no
	// health check, or only a port); not_running after a failure.
	State string `json:"state"`
	// PID of the started process, which leads its own process group.
	PID int `json:"pid,omitempty"`
	// TookMS is how long the restart took from the start to the outcome.
	TookMS int64 `json:"took_ms"`
	// Detail says what proved the outcome (the passing health check) or
	// the last failure.
	Detail string `json:"detail,omitempty"`
	// Log is the file the process's output went to.
	Log string `json:"log,omitempty"`
	// MissingEnv lists the recorded env_keys not set in the environment the
	// process started with. Names only, never values.
	MissingEnv []string `json:"missing_env,omitempty"`
	// Error repeats the error the restart returned.
	Error string `json:"error,omitempty"`
}
