package simcore

import (
	"fmt"
	"net/http"
	"regexp"
	"time"
)

// Fault kinds.
const (
	// FaultLatency sleeps Latency, then serves normally (or lets another
	// matching fault fire).
	FaultLatency = "latency"
	// FaultError replies Status with the family's ErrorBody(Status, Message).
	FaultError = "error"
	// FaultReset hijacks and closes the connection without a response.
	FaultReset = "reset"
	// FaultHang blocks until the client goes away (request context done).
	FaultHang = "hang"
	// FaultMalformed replies 200 with a truncated, invalid JSON body.
	FaultMalformed = "malformed"
)

// Fault is one injected fault. A request matches when Method (if set) equals
// the request method and Path (if set) matches the URL path.
type Fault struct {
	// ID is assigned by AddFault; it is ignored on input.
	ID      string        `json:"id,omitempty"`
	Kind    string        `json:"kind"`
	Method  string        `json:"method,omitempty"` // "" = any
	Path    string        `json:"path,omitempty"`   // Go regexp on URL path; "" = any
	Latency time.Duration `json:"latency,omitempty"`
	Status  int           `json:"status,omitempty"`
	Message string        `json:"message,omitempty"`
	// Count fires the fault this many times; 0 = unlimited (until removed
	// or expired).
	Count int `json:"count,omitempty"`
	// For keeps the fault active this long from AddFault; 0 = forever.
	For time.Duration `json:"for,omitempty"`
}

// Validate checks a fault before it is added, naming the bad field.
func (f Fault) Validate() error {
	switch f.Kind {
	case FaultLatency:
		if f.Latency <= 0 {
			return fmt.Errorf("fault kind %q: latency must be > 0, got %s", f.Kind, f.Latency)
		}
	case FaultError:
		if f.Status != 0 && (f.Status < 400 || f.Status > 599) {
			return fmt.Errorf("fault kind %q: status must be 400..599, got %d", f.Kind, f.Status)
		}
	case FaultReset, FaultHang, FaultMalformed:
	default:
		return fmt.Errorf("fault kind %q: unknown (want %s, %s, %s, %s or %s)",
			f.Kind, FaultLatency, FaultError, FaultReset, FaultHang, FaultMalformed)
	}
	if f.Path != "" {
		if _, err := regexp.Compile(f.Path); err != nil {
			return fmt.Errorf("fault path %q: %w", f.Path, err)
		}
	}
	if f.Count < 0 {
		return fmt.Errorf("fault count must be >= 0, got %d", f.Count)
	}
	if f.For < 0 {
		return fmt.Errorf("fault for must be >= 0, got %s", f.For)
	}
	return nil
}

// activeFault is a fault in the server's table.
type activeFault struct {
	Fault
	re      *regexp.Regexp
	expires time.Time // zero = never
	left    int       // remaining firings; 0 with Count==0 = unlimited
}

func (a *activeFault) matches(r *http.Request, now time.Time) bool {
	if !a.expires.IsZero() && !now.Before(a.expires) {
		return false
	}
	if a.Method != "" && a.Method != r.Method {
		return false
	}
	if a.re != nil && !a.re.MatchString(r.URL.Path) {
		return false
	}
	return true
}

// pickFaults selects the faults that fire for r: every matching latency
// fault, then at most one other matching fault (the first added). Exhausted
// and expired faults are dropped. The caller holds s.mu.
func (s *Server) pickFaults(r *http.Request, now time.Time) (latency time.Duration, kinds []string, fire *Fault) {
	kept := s.faults[:0]
	for _, a := range s.faults {
		if !a.expires.IsZero() && !now.Before(a.expires) {
			continue
		}
		fired := false
		if a.matches(r, now) {
			if a.Kind == FaultLatency {
				latency += a.Latency
				kinds = append(kinds, a.Kind)
				fired = true
			} else if fire == nil {
				f := a.Fault
				fire = &f
				kinds = append(kinds, a.Kind)
				fired = true
			}
		}
		if fired && a.Count > 0 {
			a.left--
			if a.left <= 0 {
				continue
			}
		}
		kept = append(kept, a)
	}
	for i := len(kept); i < len(s.faults); i++ {
		s.faults[i] = nil
	}
	s.faults = kept
	return latency, kinds, fire
}
