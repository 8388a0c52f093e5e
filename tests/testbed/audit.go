package testbed

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"
)

// AuditEvent is one record of the apiserver's audit log (the fields of
// audit.k8s.io/v1 Event that a Metadata-level policy writes and that tests
// look at).
type AuditEvent struct {
	AuditID    string `json:"auditID"`
	Stage      string `json:"stage"`
	Verb       string `json:"verb"`
	RequestURI string `json:"requestURI"`
	User       struct {
		Username string   `json:"username"`
		UID      string   `json:"uid"`
		Groups   []string `json:"groups"`
	} `json:"user"`
	ImpersonatedUser *struct {
		Username string `json:"username"`
	} `json:"impersonatedUser,omitempty"`
	UserAgent string            `json:"userAgent"`
	ObjectRef *AuditObjectRef   `json:"objectRef,omitempty"`
	Response  *AuditStatus      `json:"responseStatus,omitempty"`
	Received  time.Time         `json:"requestReceivedTimestamp"`
	Completed time.Time         `json:"stageTimestamp"`
	Annots    map[string]string `json:"annotations,omitempty"`
}

// AuditObjectRef names the object a request was about.
type AuditObjectRef struct {
	Resource        string `json:"resource"`
	Namespace       string `json:"namespace"`
	Name            string `json:"name"`
	UID             string `json:"uid"`
	APIGroup        string `json:"apiGroup"`
	APIVersion      string `json:"apiVersion"`
	ResourceVersion string `json:"resourceVersion"`
	Subresource     string `json:"subresource"`
}

// AuditStatus is the response status of a request.
type AuditStatus struct {
	Code    int    `json:"code"`
	Status  string `json:"status"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

// Succeeded reports whether the request got a 2xx response.
func (e AuditEvent) Succeeded() bool {
	return e.Response != nil && e.Response.Code >= 200 && e.Response.Code < 300
}

// String summarises the event: when, who, what.
func (e AuditEvent) String() string {
	obj := ""
	if r := e.ObjectRef; r != nil {
		obj = r.Resource
		if r.Subresource != "" {
			obj += "/" + r.Subresource
		}
		obj += " " + r.Namespace + "/" + r.Name
	}
	code := 0
	if e.Response != nil {
		code = e.Response.Code
	}
	return fmt.Sprintf("%s %s %s %s -> %d", e.Completed.Format(time.RFC3339Nano), e.User.Username, e.Verb, obj, code)
}

// AuditFilter selects audit events; empty fields match anything.
type AuditFilter struct {
	// Verb is e.g. "delete", "patch", "create", "update".
	Verb string
	// Resource is the plural resource, e.g. "pods", "nodes".
	Resource string
	// Subresource is e.g. "status", "eviction"; "-" matches only requests
	// on the object itself.
	Subresource string
	Namespace   string
	Name        string
	// User is the authenticated user name, e.g. "admin",
	// "system:serviceaccount:kube-system:pod-garbage-collector".
	User string
	// Since keeps events whose request arrived at or after it.
	Since time.Time
	// Succeeded keeps only events with a 2xx response.
	Succeeded bool
}

// Match reports whether e passes the filter.
func (f AuditFilter) Match(e AuditEvent) bool {
	ref := AuditObjectRef{}
	if e.ObjectRef != nil {
		ref = *e.ObjectRef
	}
	switch {
	case f.Verb != "" && e.Verb != f.Verb,
		f.Resource != "" && ref.Resource != f.Resource,
		f.Subresource == "-" && ref.Subresource != "",
		f.Subresource != "" && f.Subresource != "-" && ref.Subresource != f.Subresource,
		f.Namespace != "" && ref.Namespace != f.Namespace,
		f.Name != "" && ref.Name != f.Name,
		f.User != "" && e.User.Username != f.User,
		!f.Since.IsZero() && e.Received.Before(f.Since),
		f.Succeeded && !e.Succeeded():
		return false
	}
	return true
}

// ParseAuditLog reads audit events (JSON lines) from r, in log order,
// keeping those that match f. Lines that are not JSON objects (e.g. one cut
// short while the apiserver writes it) are an error naming the line.
func ParseAuditLog(r io.Reader, f AuditFilter) ([]AuditEvent, error) {
	var out []AuditEvent
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 16*1024*1024)
	line := 0
	for sc.Scan() {
		line++
		b := sc.Bytes()
		if len(b) == 0 {
			continue
		}
		var e AuditEvent
		if err := json.Unmarshal(b, &e); err != nil {
			return out, fmt.Errorf("audit log line %d: %w", line, err)
		}
		if f.Match(e) {
			out = append(out, e)
		}
	}
	if err := sc.Err(); err != nil {
		return out, fmt.Errorf("read audit log: %w", err)
	}
	return out, nil
}

// ReadAuditLog reads the audit log file at path, keeping events matching f.
// A last line without its newline (still being written) is ignored.
func ReadAuditLog(path string, f AuditFilter) ([]AuditEvent, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read audit log: %w", err)
	}
	if i := bytes.LastIndexByte(data, '\n'); i+1 < len(data) {
		data = data[:i+1]
	}
	file, err := ParseAuditLog(bytes.NewReader(data), f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return file, nil
}

// AuditEvents returns the events of the control plane's audit log matching f.
func (cp *ControlPlane) AuditEvents(f AuditFilter) ([]AuditEvent, error) {
	return ReadAuditLog(cp.AuditLogPath, f)
}
