package powermax

import (
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/fenced-project/fenced/tests/arraysim/simcore"
)

const restPrefix = "/univmax/restapi/"

// apiVersions are the URL versions Unisphere 10.1 serves.
var apiVersions = []string{"90", "91", "92", "100", "101"}

// apiError is Unisphere's error body.
type apiError struct {
	Message        string `json:"message"`
	HTTPStatusCode int    `json:"httpStatusCode"`
	ErrorCode      int    `json:"errorCode"`
}

// ErrorBody is Unisphere's error body for status and msg.
func (s *Sim) ErrorBody(status int, msg string) []byte {
	b, _ := json.Marshal(apiError{Message: msg, HTTPStatusCode: status})
	return b
}

func (s *Sim) fail(w http.ResponseWriter, status int, format string, args ...any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(s.ErrorBody(status, fmt.Sprintf(format, args...)))
}

// ServeHTTP serves the Unisphere REST API. Every request needs Basic auth;
// a bad or missing one is a 401 (the client does not retry it).
func (s *Sim) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	user, pass, ok := r.BasicAuth()
	if !ok || subtle.ConstantTimeCompare([]byte(user), []byte(s.spec.Username)) != 1 ||
		subtle.ConstantTimeCompare([]byte(pass), []byte(s.spec.Password)) != 1 {
		s.fail(w, http.StatusUnauthorized, "Unauthorized: invalid username or password")
		return
	}
	rest, ok := strings.CutPrefix(r.URL.Path, restPrefix)
	if !ok {
		s.fail(w, http.StatusNotFound, "Resource not found: %s", r.URL.Path)
		return
	}
	parts := strings.Split(strings.TrimSuffix(rest, "/"), "/")
	switch {
	case rest == "version":
		s.only(w, r, http.MethodGet, func() {
			simcore.WriteJSON(w, http.StatusOK, map[string]any{
				"version": s.spec.Version, "api_version": "101", "supported_api_versions": apiVersions,
			})
		})
	case len(parts) >= 2 && parts[0] == "performance":
		s.servePerformance(w, r, parts[1:])
	case len(parts) >= 3 && slices.Contains(apiVersions, parts[0]) && parts[1] == "system" && parts[2] == "symmetrix":
		s.serveSymmetrix(w, r, parts[3:])
	case len(parts) >= 5 && slices.Contains(apiVersions, parts[0]) && parts[1] == "sloprovisioning" && parts[2] == "symmetrix":
		if parts[3] != s.spec.SymmetrixID {
			s.fail(w, http.StatusNotFound, "Symmetrix %s is not managed by this Unisphere", parts[3])
			return
		}
		s.serveProvisioning(w, r, parts[4], parts[5:])
	default:
		s.fail(w, http.StatusNotFound, "Resource not found: %s", r.URL.Path)
	}
}

// only runs fn when the request method is m, else answers 405.
func (s *Sim) only(w http.ResponseWriter, r *http.Request, m string, fn func()) {
	if r.Method != m {
		s.fail(w, http.StatusMethodNotAllowed, "Method %s not allowed on %s", r.Method, r.URL.Path)
		return
	}
	fn()
}

func (s *Sim) serveSymmetrix(w http.ResponseWriter, r *http.Request, rest []string) {
	s.only(w, r, http.MethodGet, func() {
		switch len(rest) {
		case 0:
			simcore.WriteJSON(w, http.StatusOK, map[string]any{"symmetrixId": []string{s.spec.SymmetrixID}})
		case 1:
			if rest[0] != s.spec.SymmetrixID {
				s.fail(w, http.StatusNotFound, "Cannot find Symmetrix %s", rest[0])
				return
			}
			s.mu.Lock()
			n := len(s.volumes)
			s.mu.Unlock()
			simcore.WriteJSON(w, http.StatusOK, map[string]any{
				"symmetrixId": s.spec.SymmetrixID, "model": "PowerMax_8500", "ucode": "6079.306.0",
				"local": true, "all_flash": true, "device_count": n, "display_name": "sim-" + s.spec.SymmetrixID,
			})
		default:
			s.fail(w, http.StatusNotFound, "Resource not found: %s", r.URL.Path)
		}
	})
}

func (s *Sim) serveProvisioning(w http.ResponseWriter, r *http.Request, kind string, rest []string) {
	if len(rest) > 1 {
		s.fail(w, http.StatusNotFound, "Resource not found: %s", r.URL.Path)
		return
	}
	id := ""
	if len(rest) == 1 {
		id = rest[0]
	}
	switch kind {
	case "host":
		if id != "" && r.Method == http.MethodPut {
			s.putHost(w, r, id)
			return
		}
		if id == "" && r.Method == http.MethodPost {
			s.createHost(w, r)
			return
		}
		s.only(w, r, http.MethodGet, func() { s.getHost(w, id) })
	case "initiator":
		s.only(w, r, http.MethodGet, func() { s.getInitiator(w, r, id) })
	case "maskingview":
		if id != "" && r.Method == http.MethodDelete {
			s.deleteMaskingView(w, id)
			return
		}
		if id == "" && r.Method == http.MethodPost {
			s.createMaskingView(w, r)
			return
		}
		s.only(w, r, http.MethodGet, func() { s.getMaskingView(w, id) })
	case "storagegroup":
		if id != "" && r.Method == http.MethodPut {
			s.putStorageGroup(w, r, id)
			return
		}
		if id == "" && r.Method == http.MethodPost {
			s.createStorageGroup(w, r)
			return
		}
		if id != "" && r.Method == http.MethodDelete {
			s.deleteStorageGroup(w, id)
			return
		}
		s.only(w, r, http.MethodGet, func() { s.getStorageGroup(w, id) })
	case "volume":
		s.only(w, r, http.MethodGet, func() { s.getVolume(w, r, id) })
	default:
		s.fail(w, http.StatusNotFound, "Resource not found: %s", r.URL.Path)
	}
}

// hostJSON is Unisphere's host object.
type hostJSON struct {
	HostID            string   `json:"hostId"`
	NumMaskingViews   int      `json:"num_of_masking_views"`
	NumInitiators     int      `json:"num_of_initiators"`
	NumHostGroups     int      `json:"num_of_host_groups"`
	PortFlagsOverride bool     `json:"port_flags_override"`
	ConsistentLUN     bool     `json:"consistent_lun"`
	EnabledFlags      string   `json:"enabled_flags"`
	DisabledFlags     string   `json:"disabled_flags"`
	Type              string   `json:"type"`
	Initiators        []string `json:"initiator,omitempty"`
	MaskingViews      []string `json:"maskingview,omitempty"`
	NumPowerPathHosts int      `json:"num_of_powerpath_hosts"`
	BWLimit           int      `json:"bw_limit"`
}

func (s *Sim) hostJSONLocked(h *host) hostJSON {
	return hostJSON{
		HostID: h.ID, NumMaskingViews: len(h.Views), NumInitiators: len(h.Initiators), Type: h.Type,
		Initiators: slices.Clone(h.Initiators), MaskingViews: slices.Clone(h.Views),
	}
}

func (s *Sim) getHost(w http.ResponseWriter, id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if id == "" {
		simcore.WriteJSON(w, http.StatusOK, map[string]any{"hostId": sortedKeys(s.hosts)})
		return
	}
	h := s.hosts[id]
	if h == nil {
		s.fail(w, http.StatusNotFound, "Cannot find Host %s", id)
		return
	}
	simcore.WriteJSON(w, http.StatusOK, s.hostJSONLocked(h))
}

func (s *Sim) getMaskingView(w http.ResponseWriter, id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if id == "" {
		simcore.WriteJSON(w, http.StatusOK, map[string]any{"maskingViewId": sortedKeys(s.views)})
		return
	}
	mv := s.views[id]
	if mv == nil {
		s.fail(w, http.StatusNotFound, "Cannot find Masking View %s", id)
		return
	}
	simcore.WriteJSON(w, http.StatusOK, mv)
}

func (s *Sim) getStorageGroup(w http.ResponseWriter, id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if id == "" {
		simcore.WriteJSON(w, http.StatusOK, map[string]any{"storageGroupId": sortedKeys(s.groups)})
		return
	}
	sg := s.groups[id]
	if sg == nil {
		s.fail(w, http.StatusNotFound, "Cannot find Storage Group %s", id)
		return
	}
	s.writeStorageGroupLocked(w, sg)
}

// writeStorageGroupLocked answers a storage group as GET storagegroup/<id>
// returns it.
func (s *Sim) writeStorageGroupLocked(w http.ResponseWriter, sg *storageGroup) {
	out := map[string]any{
		"storageGroupId": sg.ID, "workload": "None",
		"num_of_vols": len(sg.Volumes), "num_of_masking_views": len(sg.Views), "maskingview": slices.Sorted(slices.Values(sg.Views)),
		"type": "Standalone", "cap_gb": float64(len(sg.Volumes)) * 8, "device_emulation": "FBA",
	}
	if sg.SRP != "" {
		out["srp"], out["slo"], out["service_level"] = sg.SRP, sg.SLO, sg.SLO
	}
	simcore.WriteJSON(w, http.StatusOK, out)
}

// getVolume serves one volume, or the volume iterator (one page; filter
// storageGroupId).
func (s *Sim) getVolume(w http.ResponseWriter, r *http.Request, id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if id == "" {
		var ids []string
		sg := r.URL.Query().Get("storageGroupId")
		if sg != "" && s.groups[sg] == nil {
			s.fail(w, http.StatusNotFound, "Cannot find Storage Group %s", sg)
			return
		}
		ident, byIdent := r.URL.Query()["volume_identifier"]
		if byIdent && strings.HasPrefix(ident[0], "<like>") {
			s.fail(w, http.StatusBadRequest, "volume_identifier <like> matching is not modelled by the simulator")
			return
		}
		for _, v := range sortedKeys(s.volumes) {
			if (sg == "" || slices.Contains(s.volumes[v].Groups, sg)) && (!byIdent || s.volumes[v].Identifier == ident[0]) {
				ids = append(ids, v)
			}
		}
		list := make([]map[string]any, 0, len(ids))
		for _, v := range ids {
			list = append(list, map[string]any{"volumeId": v})
		}
		simcore.WriteJSON(w, http.StatusOK, map[string]any{
			"id": "sim-volume-iterator", "count": len(ids), "maxPageSize": 1000, "expirationTime": s.now().Add(time.Minute).UnixMilli(),
			"resultList": map[string]any{"result": list, "from": 1, "to": len(ids)},
		})
		return
	}
	v := s.volumes[id]
	if v == nil {
		// The text csi-powermax's GetVolumeByID matches ("Could not find",
		// service/controller.go cannotBeFound) to answer NotFound, as
		// gopowermax's mock answers (mock/mock.go).
		s.fail(w, http.StatusNotFound, "Could not find volume: %s", id)
		return
	}
	cyl, ident := v.Cylinders, v.Identifier
	if cyl == 0 {
		cyl = defaultCylinders
	}
	if ident == "" {
		ident = "csi-sim-" + v.ID
	}
	simcore.WriteJSON(w, http.StatusOK, map[string]any{
		"volumeId": v.ID, "type": "TDEV", "emulation": "FBA", "cap_gb": cylindersToGB(cyl), "cap_cyl": cyl, "status": "Ready",
		"wwn": "60000970000" + s.spec.SymmetrixID + "5330" + v.ID, "effective_wwn": "60000970000" + s.spec.SymmetrixID + "5330" + v.ID,
		"storageGroupId": slices.Sorted(slices.Values(v.Groups)), "num_of_storage_groups": len(v.Groups),
		"volume_identifier": ident, "num_of_front_end_paths": s.frontEndPathsLocked(v),
	})
}

// IsQuery reports POST performance/Volume/metrics, which only reads
// (simcore.Querier): health probes call it for every node.
func (s *Sim) IsQuery(r *http.Request) bool {
	return r.Method == http.MethodPost && strings.HasSuffix(strings.TrimSuffix(r.URL.Path, "/"), "/performance/Volume/metrics")
}
