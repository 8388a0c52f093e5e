package simcore

import (
	"fmt"
	"net/http"
)

// AuditCheckEnv names the environment variable New reads the audit check
// mode from (see ParseAuditCheck): ARRAYSIM_AUDIT_CHECK=log or panic.
const AuditCheckEnv = "ARRAYSIM_AUDIT_CHECK"

// AuditCheck makes a server with a Tracker family also take full
// snapshots around every write and compare the tracked audit with theirs.
type AuditCheck int

// Audit check modes.
const (
	// AuditCheckOff audits tracked families from their reports only.
	AuditCheckOff AuditCheck = iota
	// AuditCheckLog compares, logs every mismatch at level Error and keeps
	// it in AuditCheckReport. The audit records the full snapshots' change.
	AuditCheckLog
	// AuditCheckPanic is AuditCheckLog that then panics, which fails the
	// request (net/http logs the panic and drops the connection).
	AuditCheckPanic
)

// ParseAuditCheck reads a mode: "" or "off", "log", "panic".
func ParseAuditCheck(s string) (AuditCheck, error) {
	switch s {
	case "", "off":
		return AuditCheckOff, nil
	case "log":
		return AuditCheckLog, nil
	case "panic":
		return AuditCheckPanic, nil
	}
	return AuditCheckOff, fmt.Errorf("%s=%q: want off, log or panic", AuditCheckEnv, s)
}

// AuditMismatch is a write whose tracked audit was not what full
// snapshots gave.
type AuditMismatch struct {
	Method string `json:"method"`
	Path   string `json:"path"`
	// Tracked and Full are the Change each way (the audit records Full).
	Tracked string `json:"tracked"`
	Full    string `json:"full"`
	// StaleBefore and StaleAfter are where the server's copy of the
	// objects differed from the full snapshot before and after the write:
	// changes the family did not report.
	StaleBefore string `json:"staleBefore,omitempty"`
	StaleAfter  string `json:"staleAfter,omitempty"`
}

// AuditCheckReport is what the audit check has seen since the server was
// made.
type AuditCheckReport struct {
	// Checked counts the writes compared.
	Checked    int             `json:"checked"`
	Mismatches []AuditMismatch `json:"mismatches,omitempty"`
}

// SetAuditCheck sets the audit check mode (New reads it from
// AuditCheckEnv). It has no effect on a family that is not a Tracker.
func (s *Server) SetAuditCheck(c AuditCheck) {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	s.check = c
}

// AuditCheckReport returns what the audit check has compared.
func (s *Server) AuditCheckReport() AuditCheckReport {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	out := s.checks
	out.Mismatches = append([]AuditMismatch(nil), s.checks.Mismatches...)
	return out
}

// Tracked reports whether the server audits writes from the family's
// per-object reports (false: full snapshots).
func (s *Server) Tracked() bool {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	return s.tracked != nil
}

// serveWrite serves a write request and returns its audit Change: from
// the family's per-object report when it is a Tracker, else from full
// snapshots before and after. The caller holds writeMu.
func (s *Server) serveWrite(w http.ResponseWriter, r *http.Request) string {
	t := s.tracked
	if t == nil {
		before := snapshotJSON(s.fam.Snapshot())
		s.fam.ServeHTTP(w, r)
		return diffSnapshots(before, snapshotJSON(s.fam.Snapshot()))
	}
	var full []byte
	if s.check != AuditCheckOff {
		full = snapshotJSON(s.fam.Snapshot())
	}
	if err := t.refresh(); err != nil {
		s.untrack(err)
		if full == nil {
			full = snapshotJSON(s.fam.Snapshot())
		}
		s.fam.ServeHTTP(w, r)
		return diffSnapshots(full, snapshotJSON(s.fam.Snapshot()))
	}
	var staleBefore string
	if full != nil {
		staleBefore = diffSnapshots(full, t.document())
	}
	s.fam.ServeHTTP(w, r)
	paths, err := t.diff()
	if err != nil {
		// The copy is still the state before the write.
		s.untrack(err)
		if full == nil {
			full = t.document()
		}
		return diffSnapshots(full, snapshotJSON(s.fam.Snapshot()))
	}
	change := formatChange(paths)
	if full == nil {
		return change
	}
	after := snapshotJSON(s.fam.Snapshot())
	want := diffSnapshots(full, after)
	s.checks.Checked++
	staleAfter := diffSnapshots(after, t.document())
	if change == want && staleBefore == "" && staleAfter == "" {
		return want
	}
	m := AuditMismatch{Method: r.Method, Path: r.URL.RequestURI(), Tracked: change, Full: want,
		StaleBefore: staleBefore, StaleAfter: staleAfter}
	s.checks.Mismatches = append(s.checks.Mismatches, m)
	// Copy every object again, so one lapse is reported once.
	t.built = false
	s.logger.Error("tracked audit differs from full snapshots", "method", m.Method, "path", m.Path,
		"tracked", m.Tracked, "full", m.Full, "staleBefore", m.StaleBefore, "staleAfter", m.StaleAfter)
	if s.check == AuditCheckPanic {
		panic(fmt.Sprintf("simcore: array %s: tracked audit of %s %s is %q, full snapshots give %q (stale before %q, after %q)",
			s.name, m.Method, m.Path, m.Tracked, m.Full, m.StaleBefore, m.StaleAfter))
	}
	return want
}

// untrack turns per-object tracking off after a failure: full snapshots
// take over. The caller holds writeMu.
func (s *Server) untrack(err error) {
	s.logger.Error("per-object audit tracking failed; auditing with full snapshots from now on", "error", err)
	s.tracked = nil
}
