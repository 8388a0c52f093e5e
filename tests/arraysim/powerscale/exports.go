package powerscale

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/fenced-project/fenced/tests/arraysim/simcore"
)

// renderExportLocked renders an export as the v2 and v4 APIs return it:
// the four client lists are always present ([] when empty).
func renderExportLocked(e *export) map[string]any {
	obj := map[string]any{
		"id": e.ID, "zone": e.Zone, "paths": clone(e.Paths), "description": e.Description,
		"all_dirs": false, "read_only": false, "security_flavors": []string{"unix"},
		"map_root":           map[string]any{"enabled": true, "user": map[string]string{"id": "USER:nobody"}},
		"unresolved_clients": []string{}, "conflicting_paths": []string{},
	}
	for _, name := range ListNames {
		obj[name] = clone(e.Lists[name])
	}
	return obj
}

// exportFields are the fields a PUT or POST may carry; anything else is a
// 400 as on OneFS. Only the paths, description and the four lists are
// stored; the others are accepted and ignored.
var exportFields = map[string]bool{
	"paths": true, "description": true, "zone": true, "clients": true, "root_clients": true,
	"read_write_clients": true, "read_only_clients": true, "map_all": true, "map_root": true,
	"map_non_root": true, "map_failure": true, "read_only": true, "security_flavors": true, "all_dirs": true,
}

// exportQueryArgs are the query arguments export requests accept.
var exportQueryArgs = map[string]bool{
	"zone": true, "resume": true, "limit": true, "path": true, "sort": true, "dir": true, "scope": true,
	"check": true, "offset": true, "ignore_unresolvable_hosts": true, "force": true,
	"ignore_conflicts": true, "ignore_bad_paths": true, "ignore_bad_auth": true,
}

func (s *Sim) serveExports(w http.ResponseWriter, r *http.Request, path string, body []byte) *apiError {
	q := r.URL.Query()
	for k := range q {
		if !exportQueryArgs[k] {
			return errf(http.StatusBadRequest, "Unknown query argument %q", k)
		}
	}
	zone := q.Get("zone")
	if zone == "" {
		zone = DefaultZone
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.zones[zone] {
		return errf(http.StatusNotFound, "Access zone %q not found", zone)
	}
	rest := strings.TrimPrefix(strings.TrimPrefix(path, "/platform/2/protocols/nfs/exports"), "/platform/4/protocols/nfs/exports")
	rest = strings.TrimPrefix(rest, "/")
	if rest == "" {
		switch r.Method {
		case http.MethodGet:
			return s.listExportsLocked(w, q, zone)
		case http.MethodPost:
			return s.createExportLocked(w, zone, body)
		}
		return errf(http.StatusMethodNotAllowed, "%s is not allowed on the export collection", r.Method)
	}
	id, err := strconv.Atoi(rest)
	if err != nil || id <= 0 {
		return errf(http.StatusNotFound, "Export %q not found", rest)
	}
	e, ok := s.exports[id]
	if !ok || e.Zone != zone {
		return errf(http.StatusNotFound, "Export %d not found in zone %s", id, zone)
	}
	switch r.Method {
	case http.MethodGet:
		simcore.WriteJSON(w, http.StatusOK, map[string]any{"exports": []any{renderExportLocked(e)}})
		return nil
	case http.MethodPut:
		fields, ae := parseExportBody(body, zone)
		if ae != nil {
			return ae
		}
		s.changes.Touch(collExports, exportID(id))
		if ae := applyExportFields(e, fields); ae != nil {
			return ae
		}
		w.WriteHeader(http.StatusNoContent)
		return nil
	case http.MethodDelete:
		delete(s.exports, id)
		s.changes.Touch(collExports, exportID(id))
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	return errf(http.StatusMethodNotAllowed, "%s is not allowed on an export", r.Method)
}

// writeV1Exports answers GET /platform/1/protocols/nfs/exports, which
// csi-isilon's ControllerPublishVolume reads through goisilon's
// GetExportsCountAttachedToNode (apiv1.GetIsiExports) to count the exports
// a node's IP is a client of before it publishes (its per-node volume
// limit). goisilon reads one answer and follows no resume token, so the
// simulator answers every export of the System zone (the v1 API has no
// zone argument) in one page.
func (s *Sim) writeV1Exports(w http.ResponseWriter) {
	s.mu.Lock()
	defer s.mu.Unlock()
	page := []any{}
	for _, e := range s.sortedExportsLocked(DefaultZone) {
		page = append(page, renderExportLocked(e))
	}
	simcore.WriteJSON(w, http.StatusOK, map[string]any{"exports": page, "total": len(page), "resume": nil})
}

// resumeToken encodes where the next page starts.
type resumeToken struct {
	Zone   string `json:"z"`
	Offset int    `json:"o"`
	Limit  int    `json:"l"`
	Path   string `json:"p,omitempty"`
}

// listExportsLocked answers a list: {"exports":[...],"total":N,
// "resume":token|null,"digest":..}. resume is null on the last page (an
// empty string would make the v4 client loop forever).
func (s *Sim) listExportsLocked(w http.ResponseWriter, q map[string][]string, zone string) *apiError {
	get := func(k string) string {
		if v := q[k]; len(v) > 0 {
			return v[len(v)-1]
		}
		return ""
	}
	tok := resumeToken{Zone: zone, Limit: s.pageSize, Path: get("path")}
	if rs := get("resume"); rs != "" {
		raw, err := base64.RawURLEncoding.DecodeString(rs)
		if err != nil || json.Unmarshal(raw, &tok) != nil || tok.Limit <= 0 || tok.Offset < 0 {
			return errf(http.StatusBadRequest, "Invalid resume token")
		}
		if !s.zones[tok.Zone] {
			return errf(http.StatusNotFound, "Access zone %q not found", tok.Zone)
		}
	} else if l := get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 {
			return errf(http.StatusBadRequest, "Field: limit: %q is not a positive integer", l)
		}
		tok.Limit = n
	}
	var matched []*export
	for _, e := range s.sortedExportsLocked(tok.Zone) {
		if tok.Path == "" || contains(e.Paths, tok.Path) {
			matched = append(matched, e)
		}
	}
	start := min(tok.Offset, len(matched))
	end := min(start+tok.Limit, len(matched))
	page := make([]any, 0, end-start)
	for _, e := range matched[start:end] {
		page = append(page, renderExportLocked(e))
	}
	var resume any
	if end < len(matched) {
		next := tok
		next.Offset = end
		raw, _ := json.Marshal(next)
		resume = base64.RawURLEncoding.EncodeToString(raw)
	}
	simcore.WriteJSON(w, http.StatusOK, map[string]any{"exports": page, "total": len(matched),
		"resume": resume, "digest": "sim-" + strconv.Itoa(len(s.exports))})
	return nil
}

func contains(l []string, v string) bool {
	for _, x := range l {
		if x == v {
			return true
		}
	}
	return false
}

// parseExportBody decodes a PUT/POST body field by field, so that an
// absent field stays unchanged (partial update) and a field that is
// present but null or of the wrong type is a 400.
func parseExportBody(body []byte, zone string) (map[string]json.RawMessage, *apiError) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil || fields == nil {
		return nil, errf(http.StatusBadRequest, "Invalid JSON body: expected an object")
	}
	for k, v := range fields {
		if !exportFields[k] {
			return nil, errf(http.StatusBadRequest, "Field: %s is not allowed", k)
		}
		if string(v) == "null" {
			return nil, errf(http.StatusBadRequest, "Field: %s: null is not allowed", k)
		}
	}
	if z, ok := fields["zone"]; ok {
		var bz string
		if json.Unmarshal(z, &bz) != nil || (bz != "" && bz != zone) {
			return nil, errf(http.StatusBadRequest, "Field: zone: does not match the zone of the request")
		}
	}
	return fields, nil
}

// applyExportFields validates every stored field, then applies them.
func applyExportFields(e *export, fields map[string]json.RawMessage) *apiError {
	lists := map[string][]string{}
	for _, name := range append([]string{"paths"}, ListNames...) {
		raw, ok := fields[name]
		if !ok {
			continue
		}
		var l []string
		if err := json.Unmarshal(raw, &l); err != nil {
			return errf(http.StatusBadRequest, "Field: %s: expected an array of strings", name)
		}
		for _, v := range l {
			if strings.TrimSpace(v) == "" || strings.ContainsAny(v, " \t") {
				return errf(http.StatusBadRequest, "Field: %s: %q is not a valid client or path", name, v)
			}
		}
		lists[name] = l
	}
	if p, ok := lists["paths"]; ok && len(p) == 0 {
		return errf(http.StatusBadRequest, "Field: paths: at least one path is required")
	}
	var desc *string
	if raw, ok := fields["description"]; ok {
		var d string
		if err := json.Unmarshal(raw, &d); err != nil {
			return errf(http.StatusBadRequest, "Field: description: expected a string")
		}
		desc = &d
	}
	for name, l := range lists {
		if name == "paths" {
			e.Paths = l
		} else {
			e.Lists[name] = l
		}
	}
	if desc != nil {
		e.Description = *desc
	}
	return nil
}

func (s *Sim) createExportLocked(w http.ResponseWriter, zone string, body []byte) *apiError {
	fields, ae := parseExportBody(body, zone)
	if ae != nil {
		return ae
	}
	if _, ok := fields["paths"]; !ok {
		return errf(http.StatusBadRequest, "Field: paths: required")
	}
	e := &export{ID: s.nextID, Zone: zone, Lists: map[string][]string{}}
	for _, name := range ListNames {
		e.Lists[name] = []string{}
	}
	if ae := applyExportFields(e, fields); ae != nil {
		return ae
	}
	s.exports[e.ID] = e
	s.nextID++
	s.changes.Touch(collExports, exportID(e.ID))
	simcore.WriteJSON(w, http.StatusCreated, map[string]int{"id": e.ID})
	return nil
}
