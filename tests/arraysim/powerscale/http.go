package powerscale

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/fenced-project/fenced/tests/arraysim/simcore"
)

const maxRequestBody = 1 << 20

// apiError is an error reply.
type apiError struct {
	status int
	msg    string
}

func errf(status int, format string, args ...any) *apiError {
	return &apiError{status: status, msg: fmt.Sprintf(format, args...)}
}

// ErrorBody is OneFS's error body: {"errors":[{"code","message"}]}, never
// with an empty list (an empty list makes the client panic).
func (s *Sim) ErrorBody(status int, msg string) []byte {
	code := "AEC_EXCEPTION"
	switch status {
	case http.StatusBadRequest:
		code = "AEC_BAD_REQUEST"
	case http.StatusUnauthorized:
		code = "AEC_UNAUTHORIZED"
	case http.StatusForbidden:
		code = "AEC_FORBIDDEN"
	case http.StatusNotFound:
		code = "AEC_NOT_FOUND"
	case http.StatusConflict:
		code = "AEC_CONFLICT"
	case http.StatusMethodNotAllowed:
		code = "AEC_METHOD_NOT_ALLOWED"
	}
	if msg == "" {
		msg = http.StatusText(status)
	}
	body, _ := json.Marshal(map[string]any{"errors": []map[string]string{{"code": code, "message": msg}}})
	return body
}

func (s *Sim) writeError(w http.ResponseWriter, e *apiError) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.status)
	_, _ = w.Write(s.ErrorBody(e.status, e.msg))
}

// ServeHTTP serves the session and platform APIs.
func (s *Sim) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := strings.TrimSuffix(r.URL.Path, "/")
	if path == "/session/1/session" {
		s.serveSession(w, r)
		return
	}
	if !strings.HasPrefix(path, "/platform/") && path != "/namespace" && !strings.HasPrefix(path, "/namespace/") {
		s.writeError(w, errf(http.StatusNotFound, "path %s not found", r.URL.Path))
		return
	}
	if e := s.authenticate(r); e != nil {
		s.writeError(w, e)
		return
	}
	var body []byte
	if r.Body != nil {
		b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRequestBody))
		if err != nil {
			s.writeError(w, errf(http.StatusBadRequest, "read request body: %v", err))
			return
		}
		body = b
	}
	var e *apiError
	switch {
	case path == "/platform/latest":
		e = s.onlyGet(r, func() { simcore.WriteJSON(w, http.StatusOK, map[string]string{"latest": "16"}) })
	case path == "/platform/1/cluster/config" || path == "/platform/3/cluster/config":
		e = s.onlyGet(r, func() { s.writeClusterConfig(w) })
	case path == "/platform/3/statistics/summary/client":
		e = s.onlyGet(r, func() { s.writeClientStats(w, r) })
	case strings.HasPrefix(path, "/namespace"):
		e = s.serveNamespace(w, r, path)
	case path == "/platform/1/protocols/nfs/exports" || path == "/platform/1/protocols/nfs/exports/":
		e = s.onlyGet(r, func() { s.writeV1Exports(w) })
	case strings.HasPrefix(path, "/platform/2/protocols/nfs/exports") || strings.HasPrefix(path, "/platform/4/protocols/nfs/exports"):
		e = s.serveExports(w, r, path, body)
	default:
		e = errf(http.StatusNotFound, "path %s not found", r.URL.Path)
	}
	if e != nil {
		s.writeError(w, e)
	}
}

func (s *Sim) onlyGet(r *http.Request, serve func()) *apiError {
	if r.Method != http.MethodGet {
		return errf(http.StatusMethodNotAllowed, "%s is not allowed on %s", r.Method, r.URL.Path)
	}
	serve()
	return nil
}

// sessionLogin is the body of POST /session/1/session/.
type sessionLogin struct {
	Username string   `json:"username"`
	Password string   `json:"password"`
	Services []string `json:"services"`
}

// serveSession answers session login (201 with isisessid and isicsrf
// cookies), session info and logout.
func (s *Sim) serveSession(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodPost:
		var req sessionLogin
		if err := json.NewDecoder(io.LimitReader(r.Body, maxRequestBody)).Decode(&req); err != nil {
			s.writeError(w, errf(http.StatusBadRequest, "invalid session request: %v", err))
			return
		}
		if req.Username != s.username || req.Password != s.password {
			s.writeError(w, errf(http.StatusUnauthorized, "Unable to authenticate user"))
			return
		}
		sid, csrf := randomHex(16), randomHex(16)
		s.mu.Lock()
		s.sessions[sid] = csrf
		s.mu.Unlock()
		w.Header().Add("Set-Cookie", "isisessid="+sid+"; path=/; HttpOnly")
		w.Header().Add("Set-Cookie", "isicsrf="+csrf+"; path=/")
		simcore.WriteJSON(w, http.StatusCreated, map[string]any{"services": req.Services,
			"timeout_absolute": 14400, "timeout_inactive": 900, "username": req.Username})
	case http.MethodGet:
		if e := s.authenticate(r); e != nil {
			s.writeError(w, e)
			return
		}
		simcore.WriteJSON(w, http.StatusOK, map[string]any{"username": s.username, "services": []string{"platform", "namespace"}})
	case http.MethodDelete:
		if c, err := r.Cookie("isisessid"); err == nil {
			s.mu.Lock()
			delete(s.sessions, c.Value)
			s.mu.Unlock()
		}
		w.WriteHeader(http.StatusNoContent)
	default:
		s.writeError(w, errf(http.StatusMethodNotAllowed, "%s is not allowed on the session", r.Method))
	}
}

// authenticate accepts a live session (isisessid cookie with its
// X-CSRF-Token) or Basic credentials. Anything else is 401 (the client
// logs in again in session mode).
func (s *Sim) authenticate(r *http.Request) *apiError {
	if c, err := r.Cookie("isisessid"); err == nil && c.Value != "" {
		s.mu.Lock()
		csrf, live := s.sessions[c.Value]
		s.mu.Unlock()
		if !live {
			return errf(http.StatusUnauthorized, "Authorization required: the session is not valid")
		}
		if r.Header.Get("X-CSRF-Token") != csrf {
			return errf(http.StatusUnauthorized, "Authorization required: CSRF token missing or invalid")
		}
		return nil
	}
	user, pass, ok := r.BasicAuth()
	if !ok || user != s.username || pass != s.password {
		return errf(http.StatusUnauthorized, "Authorization required")
	}
	return nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func (s *Sim) writeClusterConfig(w http.ResponseWriter) {
	simcore.WriteJSON(w, http.StatusOK, map[string]any{
		"name": s.clusterName, "description": "", "guid": "000c29sim0000", "join_mode": "Manual",
		"local_devid": 1, "local_lnn": 1, "local_serial": "SIM0001",
		"devices":       []map[string]any{{"devid": 1, "guid": "000c29sim0001", "is_up": true, "lnn": 1}},
		"onefs_version": map[string]string{"build": "B_" + s.release, "release": s.release, "revision": "1", "type": "Isilon OneFS", "version": "Isilon OneFS v" + s.release},
		"timezone":      map[string]string{"abbreviation": "UTC", "name": "UTC", "path": "UTC"},
	})
}

// writeClientStats answers the NFS client summary: one entry per client
// with the IOActive signal that is connected and still listed by an
// export. numeric=true reports remote_name as the IP.
func (s *Sim) writeClientStats(w http.ResponseWriter, r *http.Request) {
	numeric := r.URL.Query().Get("numeric") == "true"
	now := time.Now().Unix()
	s.mu.Lock()
	entries := []map[string]any{}
	for _, c := range s.sortedClientsLocked() {
		if !c.IOActive || !c.Connected || !s.listedLocked(c) {
			continue
		}
		name := c.IP
		if !numeric && c.FQDN != "" {
			name = c.FQDN
		}
		entries = append(entries, map[string]any{
			"protocol": "nfs3", "class": "total", "remote_addr": c.IP, "remote_name": name,
			"local_addr": "127.0.0.1", "local_name": s.clusterName + "-1", "node": 1,
			"in": 4.0e6, "out": 2.0e6, "num_operations": 480, "time": now,
		})
	}
	s.mu.Unlock()
	simcore.WriteJSON(w, http.StatusOK, map[string]any{"client": entries})
}

func (s *Sim) sortedClientsLocked() []*client {
	out := make([]*client, 0, len(s.clients))
	for _, c := range s.clients {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].IP < out[j].IP })
	return out
}
