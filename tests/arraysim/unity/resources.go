package unity

import (
	"net/http"
	"strings"

	"github.com/fenced-project/fenced/tests/arraysim/simcore"
)

type idRef struct {
	ID string `json:"id"`
}

type health struct {
	Value          int      `json:"value"`
	DescriptionIDs []string `json:"descriptionIds"`
	Descriptions   []string `json:"descriptions"`
}

var (
	healthOK = health{Value: 5, DescriptionIDs: []string{"ALRT_COMPONENT_OK"},
		Descriptions: []string{"The component is operating normally. No action is required."}}
	healthNoPath = health{Value: 7, DescriptionIDs: []string{"ALRT_INITIATOR_NO_LOGGED_IN_PATH"},
		Descriptions: []string{"The initiator does not have any logged in initiator paths. Check the connection between the initiator and the storage system."}}
	lunHealthOK = health{Value: 5, DescriptionIDs: []string{"ALRT_VOL_OK"},
		Descriptions: []string{"The LUN is operating normally. No action is required."}}
)

// defaultLUNSize is the size of the LUNs a fixture seeds: 8 GiB.
const defaultLUNSize = 8 << 30

// serveType serves /api/types/<type>/instances.
func (s *Sim) serveType(w http.ResponseWriter, r *http.Request, typ string) {
	switch {
	case typ == "metricRealTimeQuery" && r.Method == http.MethodPost:
		s.createQuery(w, r)
		return
	case typ == "host" && r.Method == http.MethodPost:
		s.createHost(w, r)
		return
	case typ == "hostIPPort" && r.Method == http.MethodPost:
		s.createHostIPPort(w, r)
		return
	case typ == "hostInitiator" && r.Method == http.MethodPost:
		s.createHostInitiator(w, r)
		return
	case r.Method != http.MethodGet:
		s.fail(w, http.StatusMethodNotAllowed, CodeBadRequest, "Method %s not allowed on %s", r.Method, r.URL.Path)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var contents []any
	switch typ {
	case "host":
		for _, id := range sortedIDs(s.hosts) {
			contents = append(contents, s.hostJSONLocked(s.hosts[id], wantsField(r, "hostLUNs")))
		}
	case "hostInitiator":
		for _, id := range sortedIDs(s.initiators) {
			contents = append(contents, s.initiatorJSONLocked(s.initiators[id]))
		}
	case "lun":
		s.listLUNsLocked(w, r)
		return
	case "hostLUN":
		s.listHostLUNsLocked(w, r)
		return
	case "metricQueryResult":
		s.queryResultsLocked(w, r)
		return
	default:
		s.fail(w, http.StatusNotFound, CodeNotFound, "The requested resource type does not exist: %s", typ)
		return
	}
	simcore.WriteJSON(w, http.StatusOK, list(contents))
}

// serveInstance serves /api/instances/<type>/<id> and .../name:<name>.
func (s *Sim) serveInstance(w http.ResponseWriter, r *http.Request, typ, id string) {
	if typ == "metricRealTimeQuery" && r.Method == http.MethodDelete {
		s.deleteQuery(w, id)
		return
	}
	if r.Method != http.MethodGet {
		s.fail(w, http.StatusMethodNotAllowed, CodeBadRequest, "Method %s not allowed on %s", r.Method, r.URL.Path)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	name, byName := strings.CutPrefix(id, "name:")
	switch typ {
	case "host":
		if byName {
			var found []*host
			for _, hid := range sortedIDs(s.hosts) {
				if s.hosts[hid].Name == name {
					found = append(found, s.hosts[hid])
				}
			}
			switch len(found) {
			case 0:
				s.fail(w, http.StatusNotFound, CodeNotFound, "The requested host does not exist")
			case 1:
				simcore.WriteJSON(w, http.StatusOK, one(s.hostJSONLocked(found[0], wantsField(r, "hostLUNs"))))
			default:
				s.fail(w, http.StatusConflict, CodeMultipleHosts, "Found multiple hosts with the name %s", name)
			}
			return
		}
		if h := s.hosts[id]; h != nil {
			simcore.WriteJSON(w, http.StatusOK, one(s.hostJSONLocked(h, wantsField(r, "hostLUNs"))))
			return
		}
	case "hostLUN":
		if h, ok := s.hostLUNLocked(id); ok && !byName {
			simcore.WriteJSON(w, http.StatusOK, one(hostLUNJSON(h)))
			return
		}
	case "hostInitiator":
		if in := s.initiators[id]; in != nil {
			simcore.WriteJSON(w, http.StatusOK, one(s.initiatorJSONLocked(in)))
			return
		}
	case "hostIPPort":
		if p := s.ipPorts[id]; p != nil {
			simcore.WriteJSON(w, http.StatusOK, one(map[string]any{"id": p.ID, "address": p.Address, "host": idRef{p.Host}}))
			return
		}
	case "pool":
		if (byName && name == poolName) || (!byName && id == poolID) {
			simcore.WriteJSON(w, http.StatusOK, one(poolJSON()))
			return
		}
	case "license":
		if byName {
			id = name
		}
		if l, ok := licenseJSON(id); ok {
			simcore.WriteJSON(w, http.StatusOK, one(l))
			return
		}
	case "filesystem":
		for _, fid := range sortedIDs(s.filesystems) {
			if f := s.filesystems[fid]; (byName && f.Name == name) || (!byName && f.ID == id) {
				simcore.WriteJSON(w, http.StatusOK, one(s.filesystemJSONLocked(f)))
				return
			}
		}
	case "nfsShare":
		for _, sid := range sortedIDs(s.shares) {
			if sh := s.shares[sid]; (byName && sh.Name == name) || (!byName && sh.ID == id) {
				simcore.WriteJSON(w, http.StatusOK, one(shareJSON(sh)))
				return
			}
		}
	case "lun":
		for _, lid := range sortedIDs(s.luns) {
			if l := s.luns[lid]; (byName && l.Name == name) || (!byName && l.ID == id) {
				simcore.WriteJSON(w, http.StatusOK, one(s.lunJSONLocked(l)))
				return
			}
		}
	}
	s.fail(w, http.StatusNotFound, CodeNotFound, "The requested resource does not exist")
}

// hostJSONLocked renders a host; withLUNs adds its hostLUNs (IDs only, left
// out when there are none, as Unity answers fields=hostLUNs).
func (s *Sim) hostJSONLocked(h *host, withLUNs bool) map[string]any {
	out := map[string]any{"id": h.ID, "name": h.Name, "description": h.Name, "type": 1, "osType": "Linux"}
	if ids := s.hostLUNIDsLocked(h.ID); withLUNs && len(ids) > 0 {
		out["hostLUNs"] = refs(ids)
	}
	if len(h.FC) > 0 {
		out["fcHostInitiators"] = refs(h.FC)
	}
	if len(h.ISCSI) > 0 {
		out["iscsiHostInitiators"] = refs(h.ISCSI)
	}
	if len(h.IPPorts) > 0 {
		ports := make([]map[string]any, 0, len(h.IPPorts))
		for _, id := range h.IPPorts {
			ports = append(ports, map[string]any{"id": id, "address": s.ipPorts[id].Address})
		}
		out["hostIPPorts"] = ports
	}
	return out
}

func (s *Sim) initiatorJSONLocked(in *initiator) map[string]any {
	hl := healthNoPath
	if h := s.hosts[in.Host]; h != nil && h.Connected {
		hl = healthOK
	}
	out := map[string]any{
		"id": in.ID, "health": hl, "type": in.Type, "initiatorId": in.InitiatorID, "isIgnored": false, "paths": refs(in.Paths),
	}
	if in.Host != "" {
		out["parentHost"] = idRef{in.Host}
	}
	return out
}

func (s *Sim) lunJSONLocked(l *lun) map[string]any {
	size := l.Size
	if size == 0 {
		size = defaultLUNSize
	}
	out := map[string]any{
		"id": l.ID, "name": l.Name, "description": "", "type": 2, "wwn": l.WWN,
		"sizeTotal": size, "sizeUsed": 0, "sizeAllocated": 0, "pool": idRef{"pool_1"},
		"isThinEnabled": true, "isDataReductionEnabled": false, "isThinClone": false, "tieringPolicy": 0, "health": lunHealthOK,
	}
	if len(l.HostAccess) > 0 {
		acc := make([]map[string]any, 0, len(l.HostAccess))
		for _, a := range sortedAccess(l.HostAccess) {
			acc = append(acc, map[string]any{"host": idRef{a.Host}, "hlu": a.HLU, "accessMask": a.AccessMask})
		}
		out["hostAccess"] = acc
	}
	return out
}

// listLUNsLocked pages LUNs with per_page and page (1-based), like Unity.
func (s *Sim) listLUNsLocked(w http.ResponseWriter, r *http.Request) {
	perPage, page, err := pageOf(r)
	if err != nil {
		s.fail(w, http.StatusUnprocessableEntity, CodeBadRequest, "%v", err)
		return
	}
	ids := sortedIDs(s.luns)
	contents := []any{}
	for i := (page - 1) * perPage; i < len(ids) && i < page*perPage; i++ {
		contents = append(contents, s.lunJSONLocked(s.luns[ids[i]]))
	}
	body := list(contents)
	body["entryCount"] = len(ids)
	simcore.WriteJSON(w, http.StatusOK, body)
}

func refs(ids []string) []idRef {
	out := make([]idRef, 0, len(ids))
	for _, id := range ids {
		out = append(out, idRef{id})
	}
	return out
}
