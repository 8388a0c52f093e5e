package simcore

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultAuditLimit is how many audit entries a Server keeps by default;
// older entries are dropped first.
const DefaultAuditLimit = 100000

// Server wraps a Family with fault injection, an audit log and admin
// endpoints. It is safe for concurrent use.
type Server struct {
	name   string
	fam    Family
	logger *slog.Logger

	// writeMu serialises write requests so each audit entry's before/after
	// snapshots show exactly that request's change. It guards tracked,
	// check and checks.
	writeMu sync.Mutex
	// tracked is the per-object copy of a Tracker family's state (nil: the
	// family is not one, or tracking failed and full snapshots took over).
	tracked *trackedState
	// check compares tracked audits with full snapshots (SetAuditCheck).
	check  AuditCheck
	checks AuditCheckReport

	// inFlight and inFlightPeak count the array API requests being
	// served, and the most at once (InFlightPeak).
	inFlight, inFlightPeak atomic.Int64

	mu         sync.Mutex
	faults     []*activeFault
	nextFault  int64
	audit      []AuditEntry
	seq        int64
	auditLimit int
	// file is the audit file (SetAuditFile); nil when there is none.
	file *auditFile
}

// New wraps fam as the simulated array name. A nil logger discards logs.
func New(name string, fam Family, logger *slog.Logger) *Server {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{
		name:       name,
		fam:        fam,
		logger:     logger.With("array", name),
		auditLimit: DefaultAuditLimit,
	}
	if t, ok := fam.(Tracker); ok {
		s.tracked = newTrackedState(t)
	}
	check, err := ParseAuditCheck(os.Getenv(AuditCheckEnv))
	if err != nil {
		s.logger.Error("audit check not turned on", "error", err)
	}
	s.check = check
	return s
}

// Name is the simulated array's name.
func (s *Server) Name() string { return s.name }

// Family returns the wrapped family.
func (s *Server) Family() Family { return s.fam }

// SetAuditLimit changes how many audit entries are kept (n <= 0 keeps all).
func (s *Server) SetAuditLimit(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.auditLimit = n
	s.trimAudit()
}

// Audit returns a copy of the audit log.
func (s *Server) Audit() []AuditEntry {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]AuditEntry(nil), s.audit...)
}

// AuditWrites returns only the audit entries that changed state.
func (s *Server) AuditWrites() []AuditEntry {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []AuditEntry
	for _, e := range s.audit {
		if e.Changed {
			out = append(out, e)
		}
	}
	return out
}

// AuditSince returns the audit entries with Seq > seq.
func (s *Server) AuditSince(seq int64) []AuditEntry {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []AuditEntry
	for _, e := range s.audit {
		if e.Seq > seq {
			out = append(out, e)
		}
	}
	return out
}

// LastSeq returns the sequence number of the latest audit entry (0 if none).
func (s *Server) LastSeq() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.seq
}

// ClearAudit empties the audit log (sequence numbers keep increasing).
func (s *Server) ClearAudit() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.audit = nil
}

// AddFault adds a fault and returns an id usable with RemoveFault. An
// invalid fault (see Fault.Validate) is logged and not added; the returned
// id is then "". Use AddFaultChecked to get the error.
func (s *Server) AddFault(f Fault) (id string) {
	id, err := s.AddFaultChecked(f)
	if err != nil {
		s.logger.Error("invalid fault not added", "error", err)
	}
	return id
}

// AddFaultChecked adds a fault or returns why it is invalid.
func (s *Server) AddFaultChecked(f Fault) (string, error) {
	if err := f.Validate(); err != nil {
		return "", err
	}
	a := &activeFault{Fault: f, left: f.Count}
	if f.Path != "" {
		a.re = regexp.MustCompile(f.Path)
	}
	if f.For > 0 {
		a.expires = time.Now().Add(f.For)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextFault++
	a.ID = "f" + strconv.FormatInt(s.nextFault, 10)
	s.faults = append(s.faults, a)
	return a.ID, nil
}

// RemoveFault removes one fault; it reports whether the fault existed.
func (s *Server) RemoveFault(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, a := range s.faults {
		if a.ID == id {
			s.faults = append(s.faults[:i], s.faults[i+1:]...)
			return true
		}
	}
	return false
}

// ClearFaults removes every fault.
func (s *Server) ClearFaults() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = nil
}

// Faults returns the active faults.
func (s *Server) Faults() []Fault {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	var out []Fault
	for _, a := range s.faults {
		if a.expires.IsZero() || now.Before(a.expires) {
			out = append(out, a.Fault)
		}
	}
	return out
}

// InFlightPeak returns the most array API requests served at once since
// the server started or the last ResetInFlightPeak: how many calls a
// client had on the array together.
func (s *Server) InFlightPeak() int { return int(s.inFlightPeak.Load()) }

// ResetInFlightPeak starts the count of InFlightPeak again.
func (s *Server) ResetInFlightPeak() { s.inFlightPeak.Store(s.inFlight.Load()) }

// ServeHTTP serves /_sim/* admin endpoints; everything else goes through
// fault injection and the audit log to the family.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/_sim" || strings.HasPrefix(r.URL.Path, "/_sim/") {
		s.serveAdmin(w, r)
		return
	}
	n := s.inFlight.Add(1)
	defer s.inFlight.Add(-1)
	for peak := s.inFlightPeak.Load(); n > peak && !s.inFlightPeak.CompareAndSwap(peak, n); {
		peak = s.inFlightPeak.Load()
	}
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	entry := AuditEntry{
		Time:      time.Now().UTC(),
		Remote:    r.RemoteAddr,
		Requester: requesterOf(r.RemoteAddr),
		Method:    r.Method,
		Path:      r.URL.RequestURI(),
		Body:      maskBody(body),
	}
	rec := &statusRecorder{ResponseWriter: w}
	recorded := false
	defer func() {
		if !recorded {
			s.record(entry, rec.status)
		}
	}()

	// A declared query is one whether it is served or failed by a fault.
	query := IsWrite(r.Method) && s.isQuery(r)
	entry.Query = query
	s.mu.Lock()
	latency, kinds, fire := s.pickFaults(r, time.Now())
	s.mu.Unlock()
	entry.Fault = strings.Join(kinds, ",")

	if latency > 0 {
		t := time.NewTimer(latency)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return
		}
	}
	if fire != nil {
		s.inject(rec, r, fire)
		return
	}
	if !IsWrite(r.Method) || query {
		s.fam.ServeHTTP(rec, r)
		return
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	var before []byte
	objects := s.recordingObjects()
	if objects {
		before = snapshotJSON(s.fam.Snapshot())
	}
	entry.Change = s.serveWrite(rec, r)
	entry.Changed = entry.Change != ""
	if objects && entry.Changed {
		entry.Objects = changedObjects(before, snapshotJSON(s.fam.Snapshot()))
	}
	// Record while still holding writeMu so writes appear in audit order.
	s.record(entry, rec.status)
	recorded = true
}

// isQuery reports whether the family declares r a read-only query.
func (s *Server) isQuery(r *http.Request) bool {
	q, ok := s.fam.(Querier)
	return ok && q.IsQuery(r)
}

// inject performs a non-latency fault.
func (s *Server) inject(w *statusRecorder, r *http.Request, f *Fault) {
	switch f.Kind {
	case FaultError:
		status := f.Status
		if status == 0 {
			status = http.StatusInternalServerError
		}
		msg := f.Message
		if msg == "" {
			msg = "injected fault: " + http.StatusText(status)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write(s.fam.ErrorBody(status, msg))
	case FaultMalformed:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte(`{"id":"trunc`))
	case FaultHang:
		<-r.Context().Done()
		// Never answer: returning normally would let net/http send an
		// implicit "200" with an empty body, which a client still waiting
		// on the connection reads as success.
		panic(http.ErrAbortHandler)
	case FaultReset:
		resetConn(w, r)
	}
}

// resetConn closes the client connection without a response, with a TCP
// reset where the connection allows it.
func resetConn(w *statusRecorder, r *http.Request) {
	hj, ok := w.ResponseWriter.(http.Hijacker)
	if !ok {
		panic(http.ErrAbortHandler) // HTTP/2: abort the stream
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	raw := conn
	if nc, ok := conn.(interface{ NetConn() net.Conn }); ok {
		raw = nc.NetConn()
	}
	if tcp, ok := raw.(*net.TCPConn); ok {
		_ = tcp.SetLinger(0)
	}
	_ = conn.Close()
}

// record appends an audit entry.
func (s *Server) record(e AuditEntry, status int) {
	e.Status = status
	e.Done = doneNow()
	s.mu.Lock()
	s.seq++
	e.Seq = s.seq
	s.audit = append(s.audit, e)
	s.writeAuditLine(&e)
	s.trimAudit()
	s.mu.Unlock()
	s.logger.Debug("request", "seq", e.Seq, "method", e.Method, "path", e.Path,
		"status", e.Status, "changed", e.Changed, "fault", e.Fault)
}

// trimAudit drops the oldest entries beyond the limit. The caller holds s.mu.
func (s *Server) trimAudit() {
	if s.auditLimit > 0 && len(s.audit) > s.auditLimit {
		drop := len(s.audit) - s.auditLimit
		s.audit = append([]AuditEntry(nil), s.audit[drop:]...)
	}
}

// statusRecorder remembers the status written through it.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// String describes the server for logs.
func (s *Server) String() string { return fmt.Sprintf("simcore.Server(%s)", s.name) }
