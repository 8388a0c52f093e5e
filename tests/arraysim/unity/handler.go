package unity

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/fenced-project/fenced/tests/arraysim/simcore"
)

// Unity error codes the clients look for.
const (
	// CodeNotFound is "the requested resource does not exist".
	CodeNotFound = 0x7d13005
	// CodeMultipleHosts is "found multiple hosts with this name".
	CodeMultipleHosts = 0x7d13158
	// CodeNothingToModify is modifyLun with no change.
	CodeNothingToModify = 0x6701020
	// CodeUnauthorized is a missing or expired session.
	CodeUnauthorized = 0x1000001
	// CodeBadRequest is a malformed or invalid request.
	CodeBadRequest = 0x1000002
	// CodeNameInUse is createLun with a name another LUN has (the
	// simulator's code).
	CodeNameInUse = 0x6701033
)

const (
	sessionCookie = "mod_sec_emc"
	csrfHeader    = "EMC-CSRF-TOKEN"
)

type apiError struct {
	Error struct {
		ErrorCode      int         `json:"errorCode"`
		HTTPStatusCode int         `json:"httpStatusCode"`
		Messages       []enMessage `json:"messages"`
		Created        string      `json:"created"`
	} `json:"error"`
}

type enMessage struct {
	EnUS string `json:"en-US"`
}

// ErrorBody is Unity's error body; injected errors carry a generic code.
func (s *Sim) ErrorBody(status int, msg string) []byte {
	return s.errorBody(status, codeFor(status), msg)
}

func codeFor(status int) int {
	switch status {
	case http.StatusNotFound:
		return CodeNotFound
	case http.StatusUnauthorized:
		return CodeUnauthorized
	}
	return CodeBadRequest
}

func (s *Sim) errorBody(status, code int, msg string) []byte {
	var e apiError
	e.Error.ErrorCode = code
	e.Error.HTTPStatusCode = status
	e.Error.Messages = []enMessage{{EnUS: fmt.Sprintf("%s (Error Code:0x%x)", msg, code)}}
	e.Error.Created = time.Now().UTC().Format("2006-01-02T15:04:05.000Z")
	b, _ := json.Marshal(e)
	return b
}

func (s *Sim) fail(w http.ResponseWriter, status, code int, format string, args ...any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(s.errorBody(status, code, fmt.Sprintf(format, args...)))
}

// ServeHTTP serves the Unity REST API under /api.
func (s *Sim) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := r.URL.Path
	switch path {
	case "/api/types/basicSystemInfo/instances":
		s.basicSystemInfo(w, r)
		return
	case "/api/types/loginSessionInfo":
		s.login(w, r)
		return
	}
	if !s.authorized(w, r) {
		return
	}
	parts := strings.Split(strings.TrimPrefix(path, "/api/"), "/")
	switch {
	case len(parts) == 3 && parts[0] == "types" && parts[2] == "instances":
		withFields(w, r, func(w http.ResponseWriter) { s.serveType(w, r, parts[1]) })
	case len(parts) == 3 && parts[0] == "instances":
		withFields(w, r, func(w http.ResponseWriter) { s.serveInstance(w, r, parts[1], parts[2]) })
	case len(parts) == 4 && parts[0] == "types" && parts[1] == "storageResource" && parts[2] == "action" && parts[3] == "createLun":
		if r.Method != http.MethodPost {
			s.fail(w, http.StatusMethodNotAllowed, CodeBadRequest, "Method %s not allowed", r.Method)
			return
		}
		s.createLun(w, r)
	case len(parts) == 4 && parts[0] == "types" && parts[1] == "storageResource" && parts[2] == "action" && parts[3] == "createFilesystem":
		if r.Method != http.MethodPost {
			s.fail(w, http.StatusMethodNotAllowed, CodeBadRequest, "Method %s not allowed", r.Method)
			return
		}
		s.createFilesystem(w, r)
	case len(parts) == 5 && parts[0] == "instances" && parts[1] == "storageResource" && parts[3] == "action" && parts[4] == "modifyLun":
		if r.Method != http.MethodPost {
			s.fail(w, http.StatusMethodNotAllowed, CodeBadRequest, "Method %s not allowed", r.Method)
			return
		}
		s.modifyLun(w, r, parts[2])
	case len(parts) == 5 && parts[0] == "instances" && parts[1] == "storageResource" && parts[3] == "action" && parts[4] == "modifyFilesystem":
		if r.Method != http.MethodPost {
			s.fail(w, http.StatusMethodNotAllowed, CodeBadRequest, "Method %s not allowed", r.Method)
			return
		}
		s.modifyFilesystem(w, r, parts[2])
	default:
		s.fail(w, http.StatusNotFound, CodeNotFound, "The requested resource does not exist: %s", path)
	}
}

func (s *Sim) basicSystemInfo(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		s.fail(w, http.StatusMethodNotAllowed, CodeBadRequest, "Method %s not allowed", r.Method)
		return
	}
	simcore.WriteJSON(w, http.StatusOK, list([]any{map[string]any{
		"id": "0", "model": s.spec.Model, "name": "sim-unity", "softwareVersion": s.spec.SoftwareVersion,
		"apiVersion": "13.0", "earliestApiVersion": "4.0",
	}}))
}

// login answers GET loginSessionInfo with Basic auth and X-EMC-REST-CLIENT:
// a new session cookie and its CSRF token in the EMC-CSRF-TOKEN header.
func (s *Sim) login(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		s.fail(w, http.StatusMethodNotAllowed, CodeBadRequest, "Method %s not allowed", r.Method)
		return
	}
	if !strings.EqualFold(r.Header.Get("X-EMC-REST-CLIENT"), "true") {
		s.fail(w, http.StatusUnauthorized, CodeUnauthorized, "X-EMC-REST-CLIENT header is required")
		return
	}
	if !s.basicOK(r) {
		s.fail(w, http.StatusUnauthorized, CodeUnauthorized, "Unauthorized: invalid username or password")
		return
	}
	s.newSession(w)
	simcore.WriteJSON(w, http.StatusOK, list([]any{map[string]any{
		"id": "user_" + s.spec.Username, "domain": "Local", "user": map[string]any{"id": "user_" + s.spec.Username},
		"roles": []any{map[string]any{"id": "administrator"}}, "idleTimeout": 3600, "isPasswordChangeRequired": false,
	}}))
}

func (s *Sim) basicOK(r *http.Request) bool {
	user, pass, ok := r.BasicAuth()
	return ok && subtle.ConstantTimeCompare([]byte(user), []byte(s.spec.Username)) == 1 &&
		subtle.ConstantTimeCompare([]byte(pass), []byte(s.spec.Password)) == 1
}

func (s *Sim) newSession(w http.ResponseWriter) string {
	cookie, token := randomToken(), randomToken()
	s.mu.Lock()
	s.sessions[cookie] = token
	s.logins++
	s.mu.Unlock()
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: cookie, Path: "/", HttpOnly: true})
	w.Header().Set(csrfHeader, token)
	return token
}

// authorized checks the session cookie (or Basic auth, which opens a new
// session) and, on POST and DELETE, the CSRF token. It answers 401 itself.
func (s *Sim) authorized(w http.ResponseWriter, r *http.Request) bool {
	var token string
	var ok bool
	if c, err := r.Cookie(sessionCookie); err == nil {
		s.mu.Lock()
		token, ok = s.sessions[c.Value]
		s.mu.Unlock()
	}
	if !ok {
		if !s.basicOK(r) {
			s.fail(w, http.StatusUnauthorized, CodeUnauthorized, "Unauthorized: the session is missing or has expired")
			return false
		}
		token = s.newSession(w)
		if r.Method == http.MethodPost || r.Method == http.MethodDelete {
			s.fail(w, http.StatusUnauthorized, CodeUnauthorized, "Unauthorized: EMC-CSRF-TOKEN is required")
			return false
		}
	}
	if (r.Method == http.MethodPost || r.Method == http.MethodDelete) &&
		subtle.ConstantTimeCompare([]byte(r.Header.Get(csrfHeader)), []byte(token)) != 1 {
		s.fail(w, http.StatusUnauthorized, CodeUnauthorized, "Unauthorized: EMC-CSRF-TOKEN is missing or invalid")
		return false
	}
	return true
}

func randomToken() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// list wraps contents as a Unity collection.
func list(contents []any) map[string]any {
	entries := make([]any, 0, len(contents))
	for _, c := range contents {
		entries = append(entries, map[string]any{"content": c})
	}
	return map[string]any{
		"@base": "https://127.0.0.1/api/types", "updated": time.Now().UTC().Format(time.RFC3339),
		"entryCount": len(contents), "entries": entries,
	}
}

// one wraps a content as a Unity instance.
func one(c any) map[string]any {
	return map[string]any{"@base": "https://127.0.0.1/api/instances", "updated": time.Now().UTC().Format(time.RFC3339), "content": c}
}

// IsQuery reports the creation and deletion of real-time metric queries
// (simcore.Querier). They are the array's way of reading metrics, which
// health probes do for every node, and are not part of Snapshot.
func (s *Sim) IsQuery(r *http.Request) bool {
	p := strings.TrimSuffix(r.URL.Path, "/")
	return (r.Method == http.MethodPost && p == "/api/types/metricRealTimeQuery/instances") ||
		(r.Method == http.MethodDelete && strings.HasPrefix(p, "/api/instances/metricRealTimeQuery/"))
}
