package powerflex

import (
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// Error codes and messages. Messages are the PowerFlex MDM's own texts
// (goscaleio's code.properties table); the gateway reports MDM command
// failures and unknown objects with HTTP 500 and a numeric errorCode.
// The numeric codes are this simulator's choice: clients, like
// csi-powerflex, match on messages.
const (
	codeNone            = 0
	codeVolumeNotFound  = 79
	codeSdcNotFound     = 86
	codeAlreadyMapped   = 81
	codeNotMapped       = 84
	codeSingleMapping   = 306
	codeInvalidLimit    = 317
	codeSystemNotFound  = 111
	msgUnauthorized     = "Unauthorized"
	msgInvalidRequest   = "Request message is not valid"
	msgVolumeNotFound   = "Could not find the volume"
	msgSdcNotFound      = "Could not find the SDC"
	msgSystemNotFound   = "Could not find the System"
	msgAlreadyMapped    = "The volume is already mapped to this SDC"
	msgNotMapped        = "The volume is not mapped to SDC"
	msgSingleMapping    = "Only a single SDC may be mapped to this volume at a time"
	msgBandwidthInvalid = "Bandwidth limit must be a multiple of 1024 Kbps"
	msgIopsInvalid      = "IOPS limit must be 0 (unlimited) or a positive number"
)

// ServeHTTP serves the PowerFlex REST API.
func (s *Sim) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := r.URL.Path
	if path == "/api/login" {
		s.login(w, r)
		return
	}
	if rest, ok := strings.CutPrefix(path, "/rest/v1/"); ok && rest != "" {
		if !s.authorized(r) {
			writeError(w, http.StatusUnauthorized, codeNone, msgUnauthorized)
			return
		}
		s.serveFile(w, r, strings.Split(rest, "/"))
		return
	}
	if !strings.HasPrefix(path, "/api/") {
		writeError(w, http.StatusNotFound, codeNone, "no such resource: "+path)
		return
	}
	if !s.authorized(r) {
		writeError(w, http.StatusUnauthorized, codeNone, msgUnauthorized)
		return
	}
	parts := strings.Split(strings.TrimPrefix(path, "/api/"), "/")
	switch {
	case path == "/api/version":
		s.mu.RLock()
		v := s.version
		s.mu.RUnlock()
		if allow(w, r, http.MethodGet) {
			writeJSON(w, v)
		}
	case parts[0] == "types" && len(parts) >= 3 && parts[2] == "instances":
		s.serveType(w, r, parts[1], parts[3:])
	case parts[0] == "instances" && len(parts) >= 2:
		typ, id, ok := strings.Cut(parts[1], "::")
		if !ok || id == "" {
			writeError(w, http.StatusBadRequest, codeNone, msgInvalidRequest+": malformed instance "+parts[1])
			return
		}
		s.serveInstance(w, r, typ, id, parts[2:])
	default:
		writeError(w, http.StatusNotFound, codeNone, "no such resource: "+path)
	}
}

// login answers GET /api/login with Basic credentials by a new token.
func (s *Sim) login(w http.ResponseWriter, r *http.Request) {
	if !allow(w, r, http.MethodGet) {
		return
	}
	user, pass, ok := r.BasicAuth()
	s.mu.Lock()
	defer s.mu.Unlock()
	if !ok || subtle.ConstantTimeCompare([]byte(user), []byte(s.username)) != 1 ||
		subtle.ConstantTimeCompare([]byte(pass), []byte(s.password)) != 1 {
		writeError(w, http.StatusUnauthorized, codeNone, msgUnauthorized)
		return
	}
	s.tokenSeq++
	s.logins++
	token := fmt.Sprintf("YWRtaW46%08d%s", s.tokenSeq, derivedID("token", strconv.Itoa(s.tokenSeq)))
	s.tokens[token] = true
	writeJSON(w, token)
}

// authorized accepts "Bearer <token>" (API >= 4.0) and Basic ":<token>".
func (s *Sim) authorized(r *http.Request) bool {
	var token string
	if h := r.Header.Get("Authorization"); strings.HasPrefix(h, "Bearer ") {
		token = strings.TrimPrefix(h, "Bearer ")
	} else if _, pass, ok := r.BasicAuth(); ok {
		token = pass
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return token != "" && s.tokens[token]
}

// serveType serves /api/types/<typ>/instances[/action/<action>].
func (s *Sim) serveType(w http.ResponseWriter, r *http.Request, typ string, rest []string) {
	if len(rest) == 2 && rest[0] == "action" && rest[1] == "queryIdByKey" {
		if allow(w, r, http.MethodPost) {
			s.queryIDByKey(w, r, typ)
		}
		return
	}
	if len(rest) == 2 && rest[0] == "action" && rest[1] == "querySelectedStatistics" {
		if allow(w, r, http.MethodPost) {
			s.querySelectedStatistics(w, r, typ)
		}
		return
	}
	if typ == "Volume" && len(rest) == 0 && r.Method == http.MethodPost {
		s.createVolume(w, r)
		return
	}
	if len(rest) != 0 || !allow(w, r, http.MethodGet) {
		if len(rest) != 0 {
			writeError(w, http.StatusNotFound, codeNone, "no such resource: "+r.URL.Path)
		}
		return
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	switch typ {
	case "System":
		out := []systemJSON{}
		for _, id := range sortedKeys(s.systems) {
			out = append(out, s.systemJSON(s.systems[id]))
		}
		writeJSON(w, out)
	case "Sdc":
		out := []sdcJSON{}
		for _, id := range sortedKeys(s.sdcs) {
			out = append(out, s.sdcJSON(s.sdcs[id]))
		}
		writeJSON(w, out)
	case "Volume":
		out := []volumeJSON{}
		for _, id := range sortedKeys(s.volumes) {
			out = append(out, s.volumeJSON(s.volumes[id]))
		}
		writeJSON(w, out)
	case "StoragePool":
		writeJSON(w, s.storagePools())
	default:
		writeError(w, http.StatusNotFound, codeNone, "no such type: "+typ)
	}
}

// queryIDByKey answers the ID of the one SDC with an ip, guid or name, or
// of the one volume with a name, as a JSON string.
func (s *Sim) queryIDByKey(w http.ResponseWriter, r *http.Request, typ string) {
	var q struct {
		IP   string `json:"ip"`
		GUID string `json:"guid"`
		Name string `json:"name"`
	}
	if err := json.NewDecoder(r.Body).Decode(&q); err != nil {
		writeError(w, http.StatusBadRequest, codeNone, msgInvalidRequest+": "+err.Error())
		return
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	switch typ {
	case "Sdc":
		for _, id := range sortedKeys(s.sdcs) {
			c := s.sdcs[id]
			if (q.IP != "" && contains(c.IPs, q.IP)) || (q.GUID != "" && strings.EqualFold(c.GUID, q.GUID)) ||
				(q.Name != "" && c.Name == q.Name) {
				writeJSON(w, c.ID)
				return
			}
		}
		writeError(w, http.StatusInternalServerError, codeSdcNotFound, msgSdcNotFound)
	case "Volume":
		for _, id := range sortedKeys(s.volumes) {
			if q.Name != "" && s.volumes[id].Name == q.Name {
				writeJSON(w, id)
				return
			}
		}
		writeError(w, http.StatusInternalServerError, codeVolumeNotFound, msgVolumeNotFound)
	default:
		writeError(w, http.StatusNotFound, codeNone, "no such type: "+typ)
	}
}

// serveInstance serves /api/instances/<typ>::<id>[/relationships/<rel> | /action/<action>].
func (s *Sim) serveInstance(w http.ResponseWriter, r *http.Request, typ, id string, rest []string) {
	switch {
	case len(rest) == 0:
		if allow(w, r, http.MethodGet) {
			s.getInstance(w, typ, id)
		}
	case len(rest) == 2 && rest[0] == "relationships":
		if allow(w, r, http.MethodGet) {
			s.getRelationship(w, typ, id, rest[1])
		}
	case len(rest) == 2 && rest[0] == "action":
		if allow(w, r, http.MethodPost) {
			s.action(w, r, typ, id, rest[1])
		}
	default:
		writeError(w, http.StatusNotFound, codeNone, "no such resource: "+r.URL.Path)
	}
}

func (s *Sim) getInstance(w http.ResponseWriter, typ, id string) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	switch typ {
	case "System":
		if sys, ok := s.systems[id]; ok {
			writeJSON(w, s.systemJSON(sys))
			return
		}
		writeError(w, http.StatusInternalServerError, codeSystemNotFound, msgSystemNotFound)
	case "Sdc":
		if c, ok := s.sdcs[id]; ok {
			writeJSON(w, s.sdcJSON(c))
			return
		}
		writeError(w, http.StatusInternalServerError, codeSdcNotFound, msgSdcNotFound)
	case "Volume":
		if v, ok := s.volumes[id]; ok {
			writeJSON(w, s.volumeJSON(v))
			return
		}
		writeError(w, http.StatusInternalServerError, codeVolumeNotFound, msgVolumeNotFound)
	default:
		writeError(w, http.StatusNotFound, codeNone, "no such type: "+typ)
	}
}

func (s *Sim) getRelationship(w http.ResponseWriter, typ, id, rel string) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	switch typ + "/" + rel {
	case "System/Sdc":
		if _, ok := s.systems[id]; !ok {
			writeError(w, http.StatusInternalServerError, codeSystemNotFound, msgSystemNotFound)
			return
		}
		out := []sdcJSON{}
		for _, k := range sortedKeys(s.sdcs) {
			if c := s.sdcs[k]; c.SystemID == id {
				out = append(out, s.sdcJSON(c))
			}
		}
		writeJSON(w, out)
	case "System/Volume":
		if _, ok := s.systems[id]; !ok {
			writeError(w, http.StatusInternalServerError, codeSystemNotFound, msgSystemNotFound)
			return
		}
		out := []volumeJSON{}
		for _, k := range sortedKeys(s.volumes) {
			if v := s.volumes[k]; v.SystemID == id {
				out = append(out, s.volumeJSON(v))
			}
		}
		writeJSON(w, out)
	case "Sdc/Volume":
		if _, ok := s.sdcs[id]; !ok {
			writeError(w, http.StatusInternalServerError, codeSdcNotFound, msgSdcNotFound)
			return
		}
		out := []volumeJSON{}
		for _, k := range sortedKeys(s.volumes) {
			if v := s.volumes[k]; v.mapping(id) != nil {
				out = append(out, s.volumeJSON(v))
			}
		}
		writeJSON(w, out)
	case "Sdc/Statistics":
		c, ok := s.sdcs[id]
		if !ok {
			writeError(w, http.StatusInternalServerError, codeSdcNotFound, msgSdcNotFound)
			return
		}
		writeJSON(w, s.sdcStatistics(c))
	default:
		writeError(w, http.StatusNotFound, codeNone, "no such relationship: "+typ+"/"+rel)
	}
}

// IsQuery reports the POST actions that only read (simcore.Querier):
// queryIdByKey, queryVolumeSdcBwc (what health probes call for every
// node) and querySelectedStatistics.
func (s *Sim) IsQuery(r *http.Request) bool {
	return r.Method == http.MethodPost &&
		(strings.HasSuffix(r.URL.Path, "/action/queryIdByKey") || strings.HasSuffix(r.URL.Path, "/action/queryVolumeSdcBwc") ||
			strings.HasSuffix(r.URL.Path, "/action/querySelectedStatistics"))
}

// querySelectedStatistics answers POST
// /api/types/Sdc/instances/action/querySelectedStatistics, the PowerFlex
// REST API's bulk statistics read: the body names the SDCs (ids, or
// allIds for every one) and the statistics (properties); the answer is an
// object keyed by SDC ID, each holding the properties asked for, as an
// SDC's relationships/Statistics reports them (PyPowerFlex
// Sdc.query_selected_statistics sends the same body, and its tests' recorded
// answers are keyed by ID). The errors are this simulator's choice, no
// recorded gateway answer names them: a property the SDC statistics do
// not have, or no property, is a bad request; an unknown SDC ID fails the
// request as reading that SDC would. Only the Sdc type is simulated: the
// others answer 404.
func (s *Sim) querySelectedStatistics(w http.ResponseWriter, r *http.Request, typ string) {
	if typ != "Sdc" {
		writeError(w, http.StatusNotFound, codeNone, "querySelectedStatistics of "+typ+" is not simulated")
		return
	}
	var q struct {
		IDs        []string `json:"ids"`
		AllIDs     *string  `json:"allIds"`
		Properties []string `json:"properties"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&q); err != nil {
		writeError(w, http.StatusBadRequest, codeNone, msgInvalidRequest+": "+err.Error())
		return
	}
	if len(q.Properties) == 0 {
		writeError(w, http.StatusBadRequest, codeNone, msgInvalidRequest+": properties is empty")
		return
	}
	if q.AllIDs == nil && len(q.IDs) == 0 {
		writeError(w, http.StatusBadRequest, codeNone, msgInvalidRequest+": neither ids nor allIds")
		return
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	ids := q.IDs
	if q.AllIDs != nil {
		ids = sortedKeys(s.sdcs)
	}
	asked := make(map[string]bool, len(ids))
	for _, id := range ids {
		if _, ok := s.sdcs[id]; !ok {
			writeError(w, http.StatusInternalServerError, codeSdcNotFound, msgSdcNotFound)
			return
		}
		asked[id] = true
	}
	mapped := s.mappedVolumesLocked(asked)
	out := make(map[string]map[string]json.RawMessage, len(ids))
	for _, id := range ids {
		all, err := sdcStatisticsOf(s.sdcs[id], mapped[id]).properties()
		if err != nil {
			writeError(w, http.StatusInternalServerError, codeNone, err.Error())
			return
		}
		props := make(map[string]json.RawMessage, len(q.Properties))
		for _, name := range q.Properties {
			v, ok := all[name]
			if !ok {
				writeError(w, http.StatusBadRequest, codeNone, msgInvalidRequest+": no SDC statistic "+name)
				return
			}
			props[name] = v
		}
		out[id] = props
	}
	writeJSON(w, out)
}
