package powermax

import (
	"encoding/json"
	"net/http"
	"slices"
	"sort"
	"strings"

	"github.com/fenced-project/fenced/tests/arraysim/simcore"
)

// initiatorJSON is Unisphere's initiator object (one initiator on one
// director port).
type initiatorJSON struct {
	InitiatorID      string    `json:"initiatorId"`
	SymmetrixPortKey []portKey `json:"symmetrixPortKey"`
	Type             string    `json:"type"`
	Host             string    `json:"host,omitempty"`
	LoggedIn         bool      `json:"logged_in"`
	OnFabric         bool      `json:"on_fabric"`
	FlagsInEffect    string    `json:"flags_in_effect"`
	NumVols          int       `json:"num_of_vols"`
	NumHostGroups    int       `json:"num_of_host_groups"`
	NumMaskingViews  int       `json:"num_of_masking_views"`
	MaskingViews     []string  `json:"maskingview,omitempty"`
	NumPowerPath     int       `json:"num_of_powerpath_hosts"`
}

type portKey struct {
	DirectorID string `json:"directorId"`
	PortID     string `json:"portId"`
}

// getInitiator serves the initiator list (filters in_a_host, initiator_hba,
// iscsi) and single initiators by their dir:port:id.
func (s *Sim) getInitiator(w http.ResponseWriter, r *http.Request, id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if id == "" {
		q := r.URL.Query()
		ids := []string{}
		for _, pid := range sortedKeys(s.paths) {
			p := s.paths[pid]
			if q.Get("in_a_host") == "true" && p.Host == "" {
				continue
			}
			if hba := q.Get("initiator_hba"); hba != "" && !strings.EqualFold(hba, p.Initiator) {
				continue
			}
			if q.Get("iscsi") == "true" && p.Type != "GigE" {
				continue
			}
			ids = append(ids, p.ID)
		}
		simcore.WriteJSON(w, http.StatusOK, map[string]any{"initiatorId": ids})
		return
	}
	p := s.paths[id]
	if p == nil {
		s.fail(w, http.StatusNotFound, "Cannot find Initiator %s", id)
		return
	}
	out := initiatorJSON{
		InitiatorID: p.ID, Type: p.Type, Host: p.Host,
		SymmetrixPortKey: []portKey{{DirectorID: p.Dir, PortID: p.Port}},
		LoggedIn:         s.loggedIn(p), OnFabric: s.loggedIn(p),
		FlagsInEffect: "Common_Serial_Number(C), SCSI_3(SC3), SPC2_Protocol_Version(SPC2)",
	}
	if h := s.hosts[p.Host]; h != nil {
		out.MaskingViews = slices.Clone(h.Views)
		out.NumMaskingViews = len(h.Views)
		for _, mv := range h.Views {
			if v := s.views[mv]; v != nil && s.groups[v.StorageGroup] != nil {
				out.NumVols += len(s.groups[v.StorageGroup].Volumes)
			}
		}
	}
	simcore.WriteJSON(w, http.StatusOK, out)
}

// hostEdit is the body of PUT host/{id}.
type hostEdit struct {
	EditHostActionParam *struct {
		AddInitiatorParam    *initiatorParam  `json:"addInitiatorParam"`
		RemoveInitiatorParam *initiatorParam  `json:"removeInitiatorParam"`
		RenameHostParam      *json.RawMessage `json:"renameHostParam"`
		SetHostFlagsParam    *json.RawMessage `json:"setHostFlagsParam"`
	} `json:"editHostActionParam"`
	ExecutionOption string `json:"executionOption"`
}

type initiatorParam struct {
	Initiator []string `json:"initiator"`
}

// putHost edits a host's initiators. Like the array, the edit is all or
// nothing: adding an initiator already in a host, or removing one that is
// not in this host, fails the whole request with 400 and changes nothing.
func (s *Sim) putHost(w http.ResponseWriter, r *http.Request, id string) {
	var body hostEdit
	dec := json.NewDecoder(r.Body)
	if err := dec.Decode(&body); err != nil {
		s.fail(w, http.StatusBadRequest, "Invalid JSON in request body: %v", err)
		return
	}
	p := body.EditHostActionParam
	if p == nil {
		s.fail(w, http.StatusBadRequest, "editHostActionParam is required")
		return
	}
	set := 0
	for _, x := range []bool{p.AddInitiatorParam != nil, p.RemoveInitiatorParam != nil, p.RenameHostParam != nil, p.SetHostFlagsParam != nil} {
		if x {
			set++
		}
	}
	if set != 1 {
		s.fail(w, http.StatusBadRequest, "editHostActionParam must contain exactly one action, got %d", set)
		return
	}
	if p.RenameHostParam != nil || p.SetHostFlagsParam != nil {
		s.fail(w, http.StatusBadRequest, "Host edit action is not supported by this array")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.hosts[id]
	if h == nil {
		s.fail(w, http.StatusNotFound, "Cannot find Host %s", id)
		return
	}
	if p.AddInitiatorParam != nil {
		list := p.AddInitiatorParam.Initiator
		if len(list) == 0 {
			s.fail(w, http.StatusBadRequest, "addInitiatorParam.initiator must not be empty")
			return
		}
		for _, in := range list {
			if in == "" || strings.ContainsAny(in, ":/") && !strings.HasPrefix(in, "iqn.") && !strings.HasPrefix(in, "nqn.") {
				s.fail(w, http.StatusBadRequest, "Initiator %q is not a valid WWN or iSCSI name", in)
				return
			}
			if other := s.hostOfLocked(in); other != "" {
				s.fail(w, http.StatusBadRequest, "Initiator %s is already in use by host %s", in, other)
				return
			}
		}
		s.changes.Touch(collHosts, h.ID)
		h.Initiators = append(h.Initiators, list...)
		sort.Strings(h.Initiators)
		h.Initiators = slices.Compact(h.Initiators)
		s.setPathHostLocked(list, h.ID)
	} else {
		list := p.RemoveInitiatorParam.Initiator
		if len(list) == 0 {
			s.fail(w, http.StatusBadRequest, "removeInitiatorParam.initiator must not be empty")
			return
		}
		for _, in := range list {
			if !slices.Contains(h.Initiators, in) {
				s.fail(w, http.StatusBadRequest, "Initiator %s is not a member of host %s", in, h.ID)
				return
			}
		}
		left := slices.DeleteFunc(slices.Clone(h.Initiators), func(in string) bool { return slices.Contains(list, in) })
		if s.spec.RefuseEmptyInitiatorGroupInView && len(left) == 0 && len(h.Views) > 0 {
			s.fail(w, http.StatusBadRequest, "Cannot remove the last initiators of host %s while it is in masking view(s) %s",
				h.ID, strings.Join(h.Views, ", "))
			return
		}
		s.changes.Touch(collHosts, h.ID)
		h.Initiators = left
		s.setPathHostLocked(list, "")
	}
	simcore.WriteJSON(w, http.StatusOK, s.hostJSONLocked(h))
}

// hostOfLocked names the host that has initiator in, or "".
func (s *Sim) hostOfLocked(in string) string {
	for _, id := range sortedKeys(s.hosts) {
		if slices.Contains(s.hosts[id].Initiators, in) {
			return id
		}
	}
	return ""
}

func (s *Sim) setPathHostLocked(initiators []string, hostID string) {
	for _, p := range s.paths {
		if slices.Contains(initiators, p.Initiator) {
			p.Host = hostID
			s.changes.Touch(collInitiators, p.ID)
		}
	}
}

// createHost answers POST .../sloprovisioning/symmetrix/<id>/host as
// gopowermax's CreateHost sends it ({hostId, initiatorId, hostFlags,
// executionOption}), which csi-powermax's node plugin calls when no host of
// its name exists (service/node.go nodeHostSetup, createOrUpdateIscsiHost
// and its FC and NVMe/TCP kin). Like putHost, an initiator another host
// has fails the request with 400; a name in use is a 409 (the simulator's
// choice of status: the driver looks the host up first). The host's type
// is iSCSI when its initiators are IQNs, else Fibre.
func (s *Sim) createHost(w http.ResponseWriter, r *http.Request) {
	var body struct {
		HostID          string          `json:"hostId"`
		InitiatorIDs    []string        `json:"initiatorId"`
		HostFlags       json.RawMessage `json:"hostFlags"`
		ExecutionOption string          `json:"executionOption"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		s.fail(w, http.StatusBadRequest, "Invalid JSON in request body: %v", err)
		return
	}
	if body.HostID == "" || len(body.HostID) > 64 {
		s.fail(w, http.StatusBadRequest, "hostId %q: want 1..64 characters", body.HostID)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.hosts[body.HostID] != nil {
		s.fail(w, http.StatusConflict, "The requested host resource %s already exists", body.HostID)
		return
	}
	typ := "Fibre"
	for _, in := range body.InitiatorIDs {
		if in == "" {
			s.fail(w, http.StatusBadRequest, "initiatorId must not hold an empty name")
			return
		}
		if other := s.hostOfLocked(in); other != "" {
			s.fail(w, http.StatusBadRequest, "Initiator %s is already in use by host %s", in, other)
			return
		}
		if strings.HasPrefix(in, "iqn.") {
			typ = "iSCSI"
		}
	}
	h := &host{ID: body.HostID, Type: typ, Initiators: slices.Compact(slices.Sorted(slices.Values(body.InitiatorIDs))), Connected: true}
	s.hosts[h.ID] = h
	s.changes.Touch(collHosts, h.ID)
	s.setPathHostLocked(h.Initiators, h.ID)
	simcore.WriteJSON(w, http.StatusOK, s.hostJSONLocked(h))
}
