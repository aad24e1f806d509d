package handoff_test

import (
	"time"

	"github.com/cairn-dev/cairn/handoff"
	"github.com/cairn-dev/cairn/session"
)

var (
	t0   = time.Date(2025, 3, 14, 9, 26, 53, 0, time.UTC)
	head = "4f1c2d9e8b7a6f5e4d3c2b1a09f8e7d6c5b4a392"
)

func at(d time.Duration) *time.Time { t := t0.Add(d); return &t }

// complete returns a session whose handoff lacks nothing.
func complete() *session.Snapshot {
	return &session.Snapshot{
		SchemaVersion: 1,
		SessionID:     "feature/login-rate-limit",
		Generation:    42,
		CreatedAt:     t0,
		UpdatedAt:     t0.Add(95 * time.Minute),
		Workspace:     &session.Workspace{Root: "/home/dev/shop", GitHead: head, GitBranch: "rate-limit"},
		Runs: []session.Run{
			{RunID: "run-1", Status: session.RunInterrupted, StartedAt: t0, EndedAt: at(30 * time.Minute),
				Usage: session.Usage{InputTokens: 120000, OutputTokens: 8000, TotalTokens: 128000, Cost: 0.84}, ToolCallsCount: 37},
			{RunID: "run-2", Status: session.RunCompleted, ParentRunID: "run-1", StartedAt: t0.Add(31 * time.Minute), EndedAt: at(95 * time.Minute),
				Usage: session.Usage{InputTokens: 200000, OutputTokens: 15500, TotalTokens: 215500, Cost: 1.3125}, ToolCallsCount: 52},
		},
		Verifications: []session.Verification{{
			ID: "ver-1", RunID: "run-2", Summary: "Unit and integration tests after the limiter change.",
			Checks: []session.Check{
				{Name: "unit tests", Command: "go test ./...", Status: session.CheckPassed, Output: "ok  \tshop/auth\t0.412s\nok  \tshop/limit\t1.020s"},
				{Name: "login e2e", Command: "npm run e2e -- --grep login", Status: session.CheckPassed},
			},
		}},
		Handoff: &session.Handoff{
			Done:       []string{"Rate limit on POST /login: 5 attempts per minute per IP, then 429.", "Limiter state kept in Redis with a 60 s TTL."},
			InProgress: []string{"Admin page to clear a lockout (UI stub only)."},
			Verified:   []string{"unit tests", "`npm run e2e -- --grep login` passes"},
			Unverified: []string{"Behaviour behind the production load balancer (X-Forwarded-For handling)."},
			Restart: &session.Restart{
				Workdir:     "/home/dev/shop",
				Commands:    []string{"docker compose up -d redis", "npm run dev"},
				Config:      []string{"REDIS_URL", "SESSION_SECRET"},
				HealthCheck: "curl -fsS http://127.0.0.1:3000/healthz",
			},
			ReviewedVersion:  &session.ReviewedVersion{VCS: "git", Commit: head},
			Risks:            []string{"Clients behind one NAT share a limit; a busy office could lock itself out."},
			DecisionsPending: []string{"Should a lockout email the account owner? (product)"},
			NextStep:         &session.NextStep{Task: "Finish the admin lockout-clear page.", DoneWhen: "An admin can clear a lockout from /admin/lockouts and `npm run e2e -- --grep lockout` passes."},
		},
		Runtime: &session.Runtime{
			Processes: []session.Process{
				{Name: "web", Command: []string{"npm", "run", "dev"}, Cwd: "/home/dev/shop", EnvKeys: []string{"REDIS_URL", "SESSION_SECRET"}, Port: 3000,
					HealthCheck: &session.HealthCheck{URL: "http://127.0.0.1:3000/healthz"}},
				{Name: "redis", Command: []string{"redis-server", "--port", "6379"}, Port: 6379,
					HealthCheck: &session.HealthCheck{Command: []string{"redis-cli", "ping"}}},
			},
			Previews: []session.Preview{{URL: "http://127.0.0.1:3000/login", Process: "web"}},
		},
	}
}

func completeFiles() handoff.Files {
	return handoff.Files{
		Tracked:  true,
		Added:    []string{"src/auth/limiter.ts", "src/auth/limiter.test.ts"},
		Modified: []string{"src/auth/login.ts", "docker-compose.yml"},
		Deleted:  []string{"src/auth/old_throttle.ts"},
	}
}

// failing returns a session with failed, not-run and skipped checks, a
// verified claim that a failed check contradicts, one that nothing backs,
// a run still running, a reviewed commit that is not the head, and no file
// tracking.
func failing() *session.Snapshot {
	s := complete()
	s.SessionID = "fix-checkout-total"
	s.Workspace.GitDirty = true
	s.Runs[1].Status = session.RunRunning
	s.Runs[1].EndedAt = nil
	s.Verifications = []session.Verification{
		{ID: "ver-1", RunID: "run-1", Checks: []session.Check{
			{Name: "unit tests", Command: "go test ./...", Status: session.CheckPassed, Output: "ok  \tshop/cart\t0.3s"},
			{Name: "lint", Command: "golangci-lint run", Status: session.CheckPassed},
		}},
		{ID: "ver-2", RunID: "run-2", Summary: "Re-run after the rounding fix.", Checks: []session.Check{
			{Name: "unit tests", Command: "go test ./...", Status: session.CheckFailed, Output: failOutput()},
			{Name: "e2e checkout", Command: "npm run e2e -- --grep checkout", Status: session.CheckNotRun, Output: "not run: the browser image is not available offline"},
			{Name: "migration dry run", Command: "make migrate-dry", Status: session.CheckSkipped},
			{Command: "go vet ./...", Status: session.CheckPassed},
		}},
	}
	s.Handoff.Verified = []string{"unit tests", "lint", "Totals round half-even", "go vet ./... is clean"}
	s.Handoff.Unverified = []string{"Currency other than EUR."}
	s.Handoff.ReviewedVersion = &session.ReviewedVersion{VCS: "git", Commit: "0a1b2c3d4e5f"}
	return s
}

func failOutput() string {
	out := "=== RUN   TestTotal\n"
	for i := 1; i <= 24; i++ {
		out += "    total_test.go:" + string(rune('0'+i/10)) + string(rune('0'+i%10)) + ": case ok\n"
	}
	return out + "--- FAIL: TestTotal (0.01s)\n    total_test.go:88: total = 10.005, want 10.01 ```not a fence```\nFAIL\tshop/cart\t0.2s\n"
}
