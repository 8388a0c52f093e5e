package simcore

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Admin endpoints (JSON). They are never audited and never faulted.
//
//	GET    /_sim/state                 -> fam.Snapshot()
//	POST   /_sim/signals  {"host":"..","connected":false,"ioActive":false}
//	GET    /_sim/faults                -> [Fault]
//	POST   /_sim/faults   Fault        -> {"id":".."}
//	DELETE /_sim/faults                (all)
//	DELETE /_sim/faults/{id}
//	GET    /_sim/audit[?writes=1][&since=SEQ] -> JSON lines of AuditEntry
//	DELETE /_sim/audit                 (clear)
//	POST   /_sim/expire-sessions       (families implementing SessionExpirer)
func (s *Server) serveAdmin(w http.ResponseWriter, r *http.Request) {
	path := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/_sim"), "/")
	switch {
	case path == "/state" && r.Method == http.MethodGet:
		WriteJSON(w, http.StatusOK, s.fam.Snapshot())
	case path == "/signals" && r.Method == http.MethodPost:
		s.adminSignals(w, r)
	case path == "/faults" && r.Method == http.MethodGet:
		faults := s.Faults()
		if faults == nil {
			faults = []Fault{}
		}
		WriteJSON(w, http.StatusOK, faults)
	case path == "/faults" && r.Method == http.MethodPost:
		var f Fault
		if err := decodeStrict(r, &f); err != nil {
			adminError(w, http.StatusBadRequest, "fault: %v", err)
			return
		}
		id, err := s.AddFaultChecked(f)
		if err != nil {
			adminError(w, http.StatusBadRequest, "%v", err)
			return
		}
		WriteJSON(w, http.StatusOK, map[string]string{"id": id})
	case path == "/faults" && r.Method == http.MethodDelete:
		s.ClearFaults()
		w.WriteHeader(http.StatusNoContent)
	case strings.HasPrefix(path, "/faults/") && r.Method == http.MethodDelete:
		id := strings.TrimPrefix(path, "/faults/")
		if !s.RemoveFault(id) {
			adminError(w, http.StatusNotFound, "fault %q not found", id)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	case path == "/audit" && r.Method == http.MethodGet:
		s.adminAudit(w, r)
	case path == "/audit" && r.Method == http.MethodDelete:
		s.ClearAudit()
		w.WriteHeader(http.StatusNoContent)
	case path == "/expire-sessions" && r.Method == http.MethodPost:
		exp, ok := s.fam.(SessionExpirer)
		if !ok {
			adminError(w, http.StatusNotImplemented, "family %T has no sessions to expire", s.fam)
			return
		}
		exp.ExpireSessions()
		w.WriteHeader(http.StatusNoContent)
	default:
		adminError(w, http.StatusNotFound, "no admin endpoint %s %s", r.Method, r.URL.Path)
	}
}

// SignalsRequest is the body of POST /_sim/signals.
type SignalsRequest struct {
	Host string `json:"host"`
	Signals
}

func (s *Server) adminSignals(w http.ResponseWriter, r *http.Request) {
	var req SignalsRequest
	if err := decodeStrict(r, &req); err != nil {
		adminError(w, http.StatusBadRequest, "signals: %v", err)
		return
	}
	if req.Host == "" {
		adminError(w, http.StatusBadRequest, "signals: field host is required")
		return
	}
	// Serialised with writes, so a write's audit never shows a signal
	// change that happened while it was served.
	s.writeMu.Lock()
	err := s.fam.SetSignals(req.Host, req.Signals)
	s.writeMu.Unlock()
	if err != nil {
		adminError(w, http.StatusNotFound, "signals: %v", err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) adminAudit(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	var since int64
	if v := q.Get("since"); v != "" {
		if _, err := fmt.Sscan(v, &since); err != nil {
			adminError(w, http.StatusBadRequest, "audit: query since=%q is not a number", v)
			return
		}
	}
	writesOnly := q.Get("writes") == "1" || q.Get("writes") == "true"
	w.Header().Set("Content-Type", "application/x-ndjson")
	enc := json.NewEncoder(w)
	for _, e := range s.AuditSince(since) {
		if writesOnly && !e.Changed {
			continue
		}
		_ = enc.Encode(e)
	}
}

func decodeStrict(r *http.Request, v any) error {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

func adminError(w http.ResponseWriter, status int, format string, args ...any) {
	WriteJSON(w, status, map[string]string{"error": fmt.Sprintf(format, args...)})
}

// UnmarshalJSON accepts durations either as nanoseconds or as Go duration
// strings ("20ms", "1m").
func (f *Fault) UnmarshalJSON(b []byte) error {
	type plain Fault
	var aux struct {
		plain
		Latency json.RawMessage `json:"latency,omitempty"`
		For     json.RawMessage `json:"for,omitempty"`
	}
	if err := json.Unmarshal(b, &aux); err != nil {
		return err
	}
	*f = Fault(aux.plain)
	var err error
	if f.Latency, err = parseDuration("latency", aux.Latency); err != nil {
		return err
	}
	if f.For, err = parseDuration("for", aux.For); err != nil {
		return err
	}
	return nil
}

func parseDuration(field string, raw json.RawMessage) (time.Duration, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return 0, nil
	}
	var n int64
	if err := json.Unmarshal(raw, &n); err == nil {
		return time.Duration(n), nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return 0, fmt.Errorf("field %s: want nanoseconds or a duration string, got %s", field, raw)
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("field %s: %w", field, err)
	}
	return d, nil
}
