package powerstore

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"

	"github.com/fenced-project/fenced/tests/arraysim/simcore"
)

// APIPrefix is where the REST API lives; clients are given
// <base URL>/api/rest as their endpoint.
const APIPrefix = "/api/rest/"

// Message codes in error bodies. The two "registered"/"not attached" codes
// are the array's; the others are the simulator's own stand-ins.
const (
	codeNotFound       = "0xE04040010005"
	codeBadRequest     = "0xE04040020009"
	codePortRegistered = "0xE0A01001002D"
	codeUnauthorized   = "0xE09040040001"
	codeForbidden      = "0xE09040040002"
	codeUnprocessable  = "0xE0A07001B005"
	codeServer         = "0xE04040030001"
	// codeHostNotAttached, codeNFSHostPresent and codeNFSHostAbsent are
	// the array's codes for a detach of a volume the host does not have
	// and for an NFS export entry already present or already removed,
	// as gopowerstore's api package named them before v1.7
	// (HostIsNotAttachedToVolumeErrorCode, HostAlreadyPresentInNFSExport,
	// HostAlreadyRemovedFromNFSExport).
	codeHostNotAttached = "0xE0A01001001E"
	codeNFSHostPresent  = "0xE080100F0008"
	codeNFSHostAbsent   = "0xE080100F0009"
	maxRequestBody      = 1 << 20
)

// ErrorBody is PowerStore's error body: {"messages":[{code, severity,
// message_l10n, arguments}]}.
func (s *Sim) ErrorBody(status int, msg string) []byte {
	code := codeServer
	switch {
	case status == http.StatusNotFound:
		code = codeNotFound
	case status == http.StatusUnauthorized:
		code = codeUnauthorized
	case status == http.StatusForbidden:
		code = codeForbidden
	case status == http.StatusUnprocessableEntity:
		code = codeUnprocessable
	case status >= 400 && status < 500:
		code = codeBadRequest
	}
	return errorBody(code, msg)
}

func errorBody(code, msg string) []byte {
	body, _ := json.Marshal(map[string]any{"messages": []map[string]any{{
		"code": code, "severity": "Error", "message_l10n": msg, "arguments": []string{},
	}}})
	return body
}

// apiError is an error reply.
type apiError struct {
	status int
	code   string
	msg    string
}

func (e *apiError) Error() string { return e.msg }

func errf(status int, format string, args ...any) *apiError {
	return &apiError{status: status, msg: fmt.Sprintf(format, args...)}
}

func (s *Sim) writeError(w http.ResponseWriter, e *apiError) {
	body := s.ErrorBody(e.status, e.msg)
	if e.code != "" {
		body = errorBody(e.code, e.msg)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.status)
	_, _ = w.Write(body)
}

// noContent answers 204 with an empty body, as the array does for attach,
// detach and modify (a "{}" body would not decode into the client's
// EmptyResponse string).
func noContent(w http.ResponseWriter) { w.WriteHeader(http.StatusNoContent) }

// ServeHTTP serves the REST API under /api/rest/.
func (s *Sim) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !strings.HasPrefix(r.URL.Path, APIPrefix) {
		s.writeError(w, errf(http.StatusNotFound, "no such resource %s", r.URL.Path))
		return
	}
	parts := strings.Split(strings.Trim(strings.TrimPrefix(r.URL.Path, APIPrefix), "/"), "/")
	if parts[0] == "login_session" {
		s.serveLogin(w, r)
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
	id, action := "", ""
	if len(parts) > 1 {
		id = parts[1]
	}
	if len(parts) > 2 {
		action = parts[2]
	}
	if len(parts) > 3 {
		s.writeError(w, errf(http.StatusNotFound, "no such resource %s", r.URL.Path))
		return
	}
	withSelect(w, r, func(w http.ResponseWriter) { s.dispatch(w, r, parts[0], id, action, body) })
}

// dispatch serves one request by resource type.
func (s *Sim) dispatch(w http.ResponseWriter, r *http.Request, kind, id, action string, body []byte) {
	var e *apiError
	switch kind {
	case "host":
		e = s.serveHost(w, r, id, action, body)
	case "host_group":
		e = s.serveHostGroup(w, r, id, action, body)
	case "host_volume_mapping":
		e = s.serveMappings(w, r, id, action)
	case "volume":
		e = s.serveVolumes(w, r, id, action, body)
	case "metrics":
		e = s.serveMetrics(w, r, id, action, body)
	case "file_system":
		e = s.serveFileSystems(w, r, id, action, body)
	case "nas_server":
		e = s.serveNAS(w, r, id, action)
	case "nfs_export":
		e = s.serveNFSExports(w, r, id, action, body)
	case "software_installed", "cluster":
		e = s.serveSystem(w, r, kind, id)
	case "appliance":
		e = s.serveAppliance(w, r, id, action)
	case "job":
		e = s.serveJobs(w, r, id, action)
	case "file_interface":
		e = s.serveFileInterface(w, r, id, action)
	default:
		e = errf(http.StatusNotFound, "no such resource type %q", kind)
	}
	if e != nil {
		s.writeError(w, e)
	}
}

// serveLogin answers GET login_session: Basic credentials only (a stale
// cookie is ignored here, so re-login after a 403 works), 401 when they are
// wrong, else a new session with DELL-EMC-TOKEN and auth_cookie.
func (s *Sim) serveLogin(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		s.writeError(w, errf(http.StatusMethodNotAllowed, "login_session supports GET only"))
		return
	}
	user, pass, ok := r.BasicAuth()
	if !ok || user != s.username || pass != s.password {
		s.writeError(w, errf(http.StatusUnauthorized, "authentication failed: bad user name or password"))
		return
	}
	sid, token := randomHex(16), randomHex(16)
	s.mu.Lock()
	s.sessionSeq++
	s.sessions[sid] = token
	s.mu.Unlock()
	http.SetCookie(w, &http.Cookie{Name: "auth_cookie", Value: sid, Path: "/", HttpOnly: true, Secure: r.TLS != nil})
	w.Header().Set("DELL-EMC-TOKEN", token)
	simcore.WriteJSON(w, http.StatusOK, []map[string]any{{
		"id": sid, "user": user, "role_ids": []string{"1"}, "idle_timeout": 3600,
		"is_password_change_required": false, "is_built_in_user": user == DefaultUsername,
	}})
}

// authenticate accepts a live session (auth_cookie, plus DELL-EMC-TOKEN on
// writes) or Basic credentials for reads. A stale or unknown cookie, or a
// write without the session's token, is 403 (the client then logs in
// again); wrong Basic credentials are 401 (the client gives up).
func (s *Sim) authenticate(r *http.Request) *apiError {
	if c, err := r.Cookie("auth_cookie"); err == nil && c.Value != "" {
		s.mu.Lock()
		token, live := s.sessions[c.Value]
		s.mu.Unlock()
		if !live {
			return errf(http.StatusForbidden, "the session has expired or is not valid; log in again")
		}
		if simcore.IsWrite(r.Method) && r.Header.Get("DELL-EMC-TOKEN") != token {
			return errf(http.StatusForbidden, "missing or invalid DELL-EMC-TOKEN for this session")
		}
		return nil
	}
	user, pass, ok := r.BasicAuth()
	if !ok || user != s.username || pass != s.password {
		return errf(http.StatusUnauthorized, "authentication required")
	}
	if simcore.IsWrite(r.Method) {
		return errf(http.StatusForbidden, "DELL-EMC-TOKEN required: log in with login_session first")
	}
	return nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// listQuery is a parsed collection query: eq/not.eq/in filters (case
// insensitive, as the array's), limit, offset and order (select is applied
// to the answer by withSelect).
type listQuery struct {
	filters []filter
	limit   int
	offset  int
	order   string
	desc    bool
}

type filter struct {
	field  string
	negate bool
	values []string
}

func (f filter) match(v string) bool {
	in := false
	for _, want := range f.values {
		// "Filtering is case insensitive" (PowerStore REST API Developers
		// Guide, "Request parameters").
		if strings.EqualFold(v, want) {
			in = true
			break
		}
	}
	return in != f.negate
}

// parseQuery parses a collection query; fields lists the filterable fields.
func (s *Sim) parseQuery(r *http.Request, fields ...string) (listQuery, *apiError) {
	q := listQuery{limit: s.defaultLimit}
	allowed := map[string]bool{}
	for _, f := range fields {
		allowed[f] = true
	}
	for key, vals := range r.URL.Query() {
		v := vals[len(vals)-1]
		switch key {
		case "select", "is_async":
		case "limit":
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > s.maxLimit {
				return q, errf(http.StatusBadRequest, "limit %q: want 1..%d", v, s.maxLimit)
			}
			q.limit = n
		case "offset":
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return q, errf(http.StatusBadRequest, "offset %q: want a number >= 0", v)
			}
			q.offset = n
		case "order":
			q.order, q.desc = strings.CutSuffix(v, ".desc")
			q.order = strings.TrimSuffix(q.order, ".asc")
		default:
			if !allowed[key] {
				return q, errf(http.StatusBadRequest, "invalid filter field %q", key)
			}
			f, e := parseFilter(key, v)
			if e != nil {
				return q, e
			}
			q.filters = append(q.filters, f)
		}
	}
	return q, nil
}

// parseFilter parses `eq.<v>`, `not.eq.<v>`, `neq.<v>` and `in.(a,b)`.
// Only the operator prefix is stripped: names may contain dots.
func parseFilter(key, v string) (filter, *apiError) {
	f := filter{field: key}
	if rest, ok := strings.CutPrefix(v, "not."); ok {
		f.negate, v = true, rest
	}
	switch {
	case strings.HasPrefix(v, "eq."):
		f.values = []string{strings.TrimPrefix(v, "eq.")}
	case strings.HasPrefix(v, "neq."):
		f.negate = !f.negate
		f.values = []string{strings.TrimPrefix(v, "neq.")}
	case strings.HasPrefix(v, "in.(") && strings.HasSuffix(v, ")"):
		f.values = strings.Split(strings.TrimSuffix(strings.TrimPrefix(v, "in.("), ")"), ",")
	default:
		return f, errf(http.StatusBadRequest, "filter %s=%q: unsupported operator (want eq., not.eq., neq. or in.())", key, v)
	}
	return f, nil
}

// row is one object of a collection with its filterable fields.
type row struct {
	fields map[string]string
	obj    any
}

// keeps reports whether a row with these fields passes every filter. A
// handler over many objects checks it before rendering one.
func (q listQuery) keeps(fields map[string]string) bool {
	for _, f := range q.filters {
		if !f.match(fields[f.field]) {
			return false
		}
	}
	return true
}

// writePage filters, orders and pages rows. A page that is not the whole
// collection answers 206 with Content-Range first-last/total.
func writePage(w http.ResponseWriter, rows []row, q listQuery) {
	kept := rows[:0:0]
	for _, rw := range rows {
		if q.keeps(rw.fields) {
			kept = append(kept, rw)
		}
	}
	key := q.order
	if key == "" {
		key = "id"
	}
	sort.SliceStable(kept, func(i, j int) bool {
		a, b := kept[i].fields[key], kept[j].fields[key]
		if a == b {
			return kept[i].fields["id"] < kept[j].fields["id"]
		}
		return (a < b) != q.desc
	})
	total := len(kept)
	if q.offset > total {
		w.Header().Set("Content-Range", fmt.Sprintf("*/%d", total))
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusRequestedRangeNotSatisfiable)
		_, _ = w.Write(errorBody(codeBadRequest, fmt.Sprintf("offset %d is beyond the %d items", q.offset, total)))
		return
	}
	end := min(q.offset+q.limit, total)
	page := make([]any, 0, end-q.offset)
	for _, rw := range kept[q.offset:end] {
		page = append(page, rw.obj)
	}
	status := http.StatusOK
	if end > q.offset && (q.offset > 0 || end < total) {
		w.Header().Set("Content-Range", fmt.Sprintf("%d-%d/%d", q.offset, end-1, total))
		status = http.StatusPartialContent
	}
	simcore.WriteJSON(w, status, page)
}

// decodeBody decodes a JSON body strictly: unknown fields are a 400, as on
// the array.
func decodeBody(body []byte, v any) *apiError {
	if len(body) == 0 {
		return errf(http.StatusBadRequest, "request body is required")
	}
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return errf(http.StatusBadRequest, "invalid request body: %v", err)
	}
	return nil
}

// serveSystem answers software_installed, cluster and appliance reads.
func (s *Sim) serveSystem(w http.ResponseWriter, r *http.Request, kind, id string) *apiError {
	if r.Method != http.MethodGet || id != "" {
		return errf(http.StatusMethodNotAllowed, "%s supports GET on the collection only", kind)
	}
	var obj map[string]any
	switch kind {
	case "software_installed":
		obj = map[string]any{"id": uuidFor("software", s.release), "is_cluster": true,
			"release_version": s.release, "build_version": s.release, "build_id": "1"}
	default:
		obj = map[string]any{"id": "0", "name": s.clusterName, "global_id": "PS" + strings.ToUpper(s.applianceID) + "0000",
			"management_address": r.Host, "state": "Configured", "appliance_count": 1,
			"master_appliance_id": s.applianceID, "nvm_subsystem_nqn": "nqn.1988-11.com.dell:powerstore:00:sim"}
	}
	simcore.WriteJSON(w, http.StatusOK, []any{obj})
	return nil
}

// applianceName is the single appliance's name. A NAS server's
// current_node_id is "<appliance name>-node-A": csi-powerstore's
// GetServiceTag (pkg/controller/controller.go) cuts it at "-node-" and
// asks GetApplianceByName for the rest.
func (s *Sim) applianceName() string { return s.clusterName + "-appliance-1" }

// serveAppliance answers GET appliance (filters id, name: gopowerstore
// GetApplianceByName sends name=eq.<name>) and GET appliance/<id>
// (GetAppliance), as csi-powerstore's GetServiceTag reads them.
func (s *Sim) serveAppliance(w http.ResponseWriter, r *http.Request, id, action string) *apiError {
	if r.Method != http.MethodGet || action != "" {
		return errf(http.StatusMethodNotAllowed, "appliance supports GET only")
	}
	obj := map[string]any{"id": s.applianceID, "name": s.applianceName(), "service_tag": "SIM0001", "model": "PowerStore 1000T"}
	if id != "" {
		if id != s.applianceID {
			return errf(http.StatusNotFound, "appliance %s not found", id)
		}
		simcore.WriteJSON(w, http.StatusOK, obj)
		return nil
	}
	q, e := s.parseQuery(r, "id", "name")
	if e != nil {
		return e
	}
	writePage(w, []row{{fields: map[string]string{"id": s.applianceID, "name": s.applianceName()}, obj: obj}}, q)
	return nil
}

// serveJobs answers GET job, the collection csi-powerstore reads before it
// creates a file system (pkg/controller/controller.go CreateVolume,
// gopowerstore GetInProgressJobsByFsName: resource_name=eq.<name>,
// state=eq.IN_PROGRESS, resource_type=eq.file_system). The simulator runs
// every request to its end before it answers, so no job is ever in
// progress and the collection is empty; GET job/<id> is a 404.
func (s *Sim) serveJobs(w http.ResponseWriter, r *http.Request, id, action string) *apiError {
	if r.Method != http.MethodGet || action != "" {
		return errf(http.StatusMethodNotAllowed, "job supports GET only")
	}
	if id != "" {
		return errf(http.StatusNotFound, "job %s not found", id)
	}
	q, e := s.parseQuery(r, "id", "resource_name", "resource_type", "resource_action", "state")
	if e != nil {
		return e
	}
	writePage(w, nil, q)
	return nil
}

// serveFileInterface answers GET file_interface/<id>: csi-powerstore's NFS
// publish (pkg/controller/publisher.go NfsPublisher.Publish) reads the NAS
// server's current_preferred_IPv4_interface_id with gopowerstore
// GetFileInterface and puts its ip_address into the publish context.
func (s *Sim) serveFileInterface(w http.ResponseWriter, r *http.Request, id, action string) *apiError {
	if r.Method != http.MethodGet || action != "" {
		return errf(http.StatusMethodNotAllowed, "file_interface supports GET only")
	}
	s.mu.Lock()
	var rows []row
	for _, n := range s.nasServers {
		fid := uuidFor("file_interface", n.Name)
		obj := map[string]any{"id": fid, "nas_server_id": n.ID, "ip_address": s.nasInterfaceIP,
			"prefix_length": 24, "role": "Production", "is_disabled": false}
		if id == fid {
			s.mu.Unlock()
			simcore.WriteJSON(w, http.StatusOK, obj)
			return nil
		}
		rows = append(rows, row{fields: map[string]string{"id": fid, "nas_server_id": n.ID}, obj: obj})
	}
	s.mu.Unlock()
	if id != "" {
		return errf(http.StatusNotFound, "file interface %s not found", id)
	}
	q, e := s.parseQuery(r, "id", "nas_server_id")
	if e != nil {
		return e
	}
	writePage(w, rows, q)
	return nil
}

// IsQuery reports POST metrics/generate, which only reads
// (simcore.Querier): health probes call it for every node.
func (s *Sim) IsQuery(r *http.Request) bool {
	return r.Method == http.MethodPost && strings.TrimSuffix(r.URL.Path, "/") == APIPrefix+"metrics/generate"
}
