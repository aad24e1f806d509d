package session

import (
	"context"
	"sort"
)

// VerifyRequest is the params of verify. Secrets adds a scan of every
// served session's content for credential-shaped strings (ScanSecrets).
type VerifyRequest struct {
	Secrets bool `json:"secrets,omitempty"`
}

// MaxSecretFindings is how many findings a scan lists; SecretScan.Found
// counts them all.
const MaxSecretFindings = 1000

// secretPageBytes bounds the message and trace bytes a scan holds at once
// (past the first item of a page).
const secretPageBytes = 1 << 20

// SecretScan is what verify --secrets found. Content is reported, never
// changed: the host decides what to do about it.
type SecretScan struct {
	Sessions  int   `json:"sessions"`  // sessions scanned (those the store serves)
	Messages  int64 `json:"messages"`  // messages scanned
	Artifacts int64 `json:"artifacts"` // artifacts scanned (metadata, and data when inline)
	Traces    int64 `json:"traces"`    // traces scanned
	Bytes     int64 `json:"bytes"`     // content bytes scanned
	// Found counts every finding; Findings lists the first
	// MaxSecretFindings, in session, then place, then offset order.
	Found    int64           `json:"found"`
	Findings []SecretFinding `json:"findings"`
}

// SecretFinding is one credential-shaped string, by where it is, never by
// what it is.
type SecretFinding struct {
	SessionID string `json:"session_id"`
	// Where is "message", "trace", "artifact" (its data),
	// "artifact_metadata", "agent" or "metadata" (the last three are
	// structured maps a session written before the current rules may
	// still hold).
	Where string `json:"where"`
	// Index is the message's or trace's index in the session (-1 for the
	// others).
	Index int64 `json:"index"`
	// ID is the artifact's id, or the agent or metadata key.
	ID string `json:"id,omitempty"`
	// Offset is where the string starts, in bytes: in the message's or
	// the trace data's JSON text, in the artifact's data or metadata, or
	// in the agent or metadata value.
	Offset int64 `json:"offset"`
	// Rule is the SecretRules name that matched, or "secret_key_name" for
	// a map value kept under a credential-named key.
	Rule string `json:"rule"`
	// Redacted is the string's first characters and "…", never more.
	Redacted string `json:"redacted"`
}

// ScanSecrets scans the content of the sessions ids through r's targeted
// reads, so it holds one page of messages or traces, or one artifact's
// data, at a time. A session that is gone by the time it is read is
// skipped.
func ScanSecrets(ctx context.Context, r Reader, ids []string) (*SecretScan, error) {
	sc := &SecretScan{Findings: []SecretFinding{}}
	for _, id := range ids {
		if err := sc.session(ctx, r, id); err != nil {
			if CodeOf(err) == CodeNotFound {
				continue
			}
			return nil, err
		}
		sc.Sessions++
	}
	return sc, nil
}

func (sc *SecretScan) add(f SecretFinding, b []byte, m SecretMatch) {
	sc.Found++
	if len(sc.Findings) >= MaxSecretFindings {
		return
	}
	f.Offset, f.Rule = int64(m.Offset), m.Rule
	f.Redacted = RedactSecret(b[m.Offset : m.Offset+m.Len])
	sc.Findings = append(sc.Findings, f)
}

func (sc *SecretScan) scan(f SecretFinding, b []byte) {
	sc.Bytes += int64(len(b))
	for _, m := range FindSecrets(b) {
		sc.add(f, b, m)
	}
}

func (sc *SecretScan) session(ctx context.Context, r Reader, id string) error {
	head, _, err := r.Head(ctx, id)
	if err != nil {
		return err
	}
	for _, part := range []struct {
		where string
		m     map[string]Value
	}{{"agent", head.Snapshot.Agent}, {"metadata", head.Snapshot.Metadata}} {
		keys := make([]string, 0, len(part.m))
		for k := range part.m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			f := SecretFinding{SessionID: id, Where: part.where, Index: -1, ID: k}
			v := part.m[k]
			if IsSecretKey(k) && !isNull(v) {
				sc.Bytes += int64(len(v))
				sc.add(f, v, SecretMatch{Rule: "secret_key_name", Len: len(v)})
				continue
			}
			sc.scan(f, v)
		}
	}
	for from := int64(0); ; {
		p, err := r.Messages(ctx, id, Query{From: from, MaxBytes: secretPageBytes})
		if err != nil {
			return err
		}
		for i, m := range p.Items {
			sc.Messages++
			sc.scan(SecretFinding{SessionID: id, Where: "message", Index: p.From + int64(i)}, m)
		}
		if !p.More {
			break
		}
		from = p.Next
	}
	for from := int64(0); ; {
		p, err := r.Traces(ctx, id, Query{From: from, MaxBytes: secretPageBytes})
		if err != nil {
			return err
		}
		for i, t := range p.Items {
			sc.Traces++
			sc.scan(SecretFinding{SessionID: id, Where: "trace", Index: p.From + int64(i)}, t.Data)
		}
		if !p.More {
			break
		}
		from = p.Next
	}
	list, err := r.Artifacts(ctx, id, nil, false)
	if err != nil {
		return err
	}
	for _, a := range list.Items {
		sc.Artifacts++
		sc.scan(SecretFinding{SessionID: id, Where: "artifact_metadata", Index: -1, ID: a.ID}, a.Metadata)
		if a.Path != "" && a.SHA256 == "" {
			continue // a workspace path, no inline data
		}
		one, err := r.Artifacts(ctx, id, []string{a.ID}, true)
		if err != nil {
			if CodeOf(err) == CodeNotFound {
				continue // deleted since the listing
			}
			return err
		}
		for _, d := range one.Items {
			sc.scan(SecretFinding{SessionID: id, Where: "artifact", Index: -1, ID: a.ID}, d.Data)
		}
	}
	return nil
}
