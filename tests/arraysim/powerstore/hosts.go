package powerstore

import (
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"

	"github.com/fenced-project/fenced/tests/arraysim/simcore"
)

// nullable renders "" as JSON null, as the array does for unset references.
func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// renderHostLocked renders a host as GET host returns it.
func (s *Sim) renderHostLocked(h *host) map[string]any {
	var own []*mapping
	for _, m := range s.mappings {
		if m.HostID == h.ID {
			own = append(own, m)
		}
	}
	return s.renderHostMappedLocked(h, own)
}

// mappingsByHostLocked groups the mappings by host ID, for a listing of
// many hosts: one pass over the mappings instead of one per host.
func (s *Sim) mappingsByHostLocked() map[string][]*mapping {
	out := make(map[string][]*mapping, len(s.hosts))
	for _, m := range s.mappings {
		if m.HostID != "" {
			out[m.HostID] = append(out[m.HostID], m)
		}
	}
	return out
}

// renderHostMappedLocked renders a host whose mappings are own (any
// order).
func (s *Sim) renderHostMappedLocked(h *host, own []*mapping) map[string]any {
	ports := make([]string, 0, len(h.Initiators))
	for p := range h.Initiators {
		ports = append(ports, p)
	}
	sort.Strings(ports)
	inits := make([]map[string]any, 0, len(ports))
	for _, p := range ports {
		in := h.Initiators[p]
		sessions := []map[string]any{}
		if h.Connected || s.logins[in.PortName] {
			for _, node := range []string{"A", "B"} {
				sess := map[string]any{"appliance_id": s.applianceID, "node_id": s.applianceID + "-node-" + node}
				if in.PortType == "FC" {
					sess["fc_port_id"] = uuidFor("fc_port", s.applianceID+node)
					sess["port_name"] = "58:cc:f0:90:4d:20:0" + map[string]string{"A": "1", "B": "2"}[node] + ":f2"
				} else {
					sess["eth_port_id"] = uuidFor("eth_port", s.applianceID+node)
					sess["port_name"] = "iqn.2015-10.com.dell:dellemc-powerstore-" + s.applianceID + "-" + node
				}
				sessions = append(sessions, sess)
			}
		}
		inits = append(inits, map[string]any{
			"port_name": in.PortName, "port_type": in.PortType, "active_sessions": sessions,
			"chap_single_username": nullable(in.ChapSingleUsername),
			"chap_mutual_username": nullable(in.ChapMutualUsername),
		})
	}
	own = slices.Clone(own)
	slices.SortFunc(own, func(a, b *mapping) int { return strings.Compare(a.ID, b.ID) })
	mapped := make([]map[string]any, 0, len(own))
	for _, m := range own {
		mapped = append(mapped, map[string]any{"id": m.ID, "host_id": m.HostID, "volume_id": m.VolumeID})
	}
	return map[string]any{
		"id": h.ID, "name": h.Name, "description": nullable(h.Description),
		"os_type": h.OSType, "os_type_l10n": h.OSType, "type": "External", "type_l10n": "External",
		"host_group_id": nullable(h.GroupID), "host_connectivity": "Local_Only",
		"host_connectivity_l10n": "Local Only", "host_initiators": inits, "mapped_hosts": mapped,
	}
}

func (s *Sim) sortedMappingsLocked() []*mapping {
	out := make([]*mapping, 0, len(s.mappings))
	for _, m := range s.mappings {
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// initiatorOwnerLocked returns the host that has port name p, if any.
func (s *Sim) initiatorOwnerLocked(p string) *host {
	for _, h := range s.hosts {
		if _, ok := h.Initiators[p]; ok {
			return h
		}
	}
	return nil
}

// hostModify is the body of PATCH host/<id>.
type hostModify struct {
	AddInitiators    *[]initiatorBody   `json:"add_initiators"`
	RemoveInitiators *[]string          `json:"remove_initiators"`
	ModifyInitiators *[]initiatorModify `json:"modify_initiators"`
	Name             *string            `json:"name"`
	Description      *string            `json:"description"`
	ForceInternal    *bool              `json:"force_internal"`
	HostConnectivity *string            `json:"host_connectivity"`
}

// initiatorBody is one initiator of add_initiators.
type initiatorBody struct {
	PortName           *string `json:"port_name"`
	PortType           *string `json:"port_type"`
	ChapSingleUsername *string `json:"chap_single_username"`
	ChapSinglePassword *string `json:"chap_single_password"`
	ChapMutualUsername *string `json:"chap_mutual_username"`
	ChapMutualPassword *string `json:"chap_mutual_password"`
}

// initiatorModify is one initiator of modify_initiators: the CHAP
// credentials of an initiator the host has, as csi-powerstore's node
// plugin sends them at every start (dell/csi-powerstore pkg/node/node.go
// setupHost, modifyHostInitiators, buildInitiatorsArrayModify).
type initiatorModify struct {
	PortName           *string `json:"port_name"`
	ChapSingleUsername *string `json:"chap_single_username"`
	ChapSinglePassword *string `json:"chap_single_password"`
	ChapMutualUsername *string `json:"chap_mutual_username"`
	ChapMutualPassword *string `json:"chap_mutual_password"`
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// attachBody is the body of attach and detach.
type attachBody struct {
	VolumeID          *string `json:"volume_id"`
	LogicalUnitNumber *int64  `json:"logical_unit_number"`
}

func (s *Sim) serveHost(w http.ResponseWriter, r *http.Request, id, action string, body []byte) *apiError {
	switch {
	case id == "" && r.Method == http.MethodGet:
		q, e := s.parseQuery(r, "id", "name", "host_group_id", "os_type")
		if e != nil {
			return e
		}
		s.mu.Lock()
		rows := make([]row, 0, len(s.hosts))
		byHost := s.mappingsByHostLocked()
		for _, h := range s.hosts {
			fields := map[string]string{"id": h.ID, "name": h.Name, "host_group_id": h.GroupID, "os_type": h.OSType}
			if q.keeps(fields) { // render only what is asked for: thousands of hosts in scale runs
				rows = append(rows, row{fields: fields, obj: s.renderHostMappedLocked(h, byHost[h.ID])})
			}
		}
		s.mu.Unlock()
		writePage(w, rows, q)
		return nil
	case id == "" && r.Method == http.MethodPost:
		return s.createHost(w, body)
	case id != "" && action == "" && r.Method == http.MethodGet:
		s.mu.Lock()
		defer s.mu.Unlock()
		h, ok := s.hosts[id]
		if !ok {
			return errf(http.StatusNotFound, "host %s not found", id)
		}
		simcore.WriteJSON(w, http.StatusOK, s.renderHostLocked(h))
		return nil
	case id != "" && action == "" && r.Method == http.MethodPatch:
		var mod hostModify
		if e := decodeBody(body, &mod); e != nil {
			return e
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if e := s.modifyHostLocked(id, mod); e != nil {
			return e
		}
		noContent(w)
		return nil
	case id != "" && (action == "attach" || action == "detach") && r.Method == http.MethodPost:
		var b attachBody
		if e := decodeBody(body, &b); e != nil {
			return e
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if _, ok := s.hosts[id]; !ok {
			return errf(http.StatusNotFound, "host %s not found", id)
		}
		if e := s.attachDetachLocked(id, "", action, b); e != nil {
			return e
		}
		noContent(w)
		return nil
	}
	return errf(http.StatusMethodNotAllowed, "%s host %s %s is not supported", r.Method, id, action)
}

// hostCreate is the body of POST host as gopowerstore's CreateHost sends
// it (HostCreate).
type hostCreate struct {
	Name             *string            `json:"name"`
	OSType           *string            `json:"os_type"`
	Initiators       *[]initiatorBody   `json:"initiators"`
	Description      *string            `json:"description"`
	ForceInternal    *bool              `json:"force_internal"`
	Metadata         *map[string]string `json:"metadata"`
	HostConnectivity string             `json:"host_connectivity"`
}

// createHost answers POST host as csi-powerstore's node plugin sends it
// when no host has one of the node's initiators (dell/csi-powerstore
// pkg/node/node.go setupHost and registerHost: name = node ID, os_type
// Linux, the initiators of one protocol): 201 with {"id"}. A name in use
// is refused, and so is a port name any host has: the array's "already
// registered with another host" error, which the driver itself matches on
// (registerHost, modifyHostInitiators). The new host has no sessions until
// its node logs in (Connected false).
func (s *Sim) createHost(w http.ResponseWriter, body []byte) *apiError {
	var b hostCreate
	if e := decodeBody(body, &b); e != nil {
		return e
	}
	name := deref(b.Name)
	if name == "" || len(name) > maxHostNameLen {
		return errf(http.StatusBadRequest, "name %q: want 1..%d characters", name, maxHostNameLen)
	}
	if deref(b.OSType) == "" {
		return errf(http.StatusBadRequest, "os_type is required")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, other := range s.hosts {
		if other.Name == name {
			return errf(http.StatusBadRequest, "host name %q is already in use", name)
		}
	}
	id := uuidFor("host", name)
	if _, dup := s.hosts[id]; dup {
		id = uuidFor("host", name+"\x00"+randomHex(8))
	}
	h := &host{ID: id, Name: name, Description: deref(b.Description), OSType: deref(b.OSType), Initiators: map[string]*initiator{}}
	if b.Initiators != nil {
		for i, in := range *b.Initiators {
			p, pt := deref(in.PortName), deref(in.PortType)
			if p == "" || !validPortType(pt) {
				return errf(http.StatusBadRequest, "initiators[%d]: port_name and a port_type of iSCSI, FC or NVMe are required", i)
			}
			if s.initiatorOwnerLocked(p) != nil || h.Initiators[p] != nil {
				return &apiError{status: http.StatusBadRequest, code: codePortRegistered,
					msg: "One of the provided port names is already registered with another host. Please use port names unique to all hosts."}
			}
			h.Initiators[p] = &initiator{PortName: p, PortType: pt,
				ChapSingleUsername: deref(in.ChapSingleUsername), ChapSinglePassword: deref(in.ChapSinglePassword),
				ChapMutualUsername: deref(in.ChapMutualUsername), ChapMutualPassword: deref(in.ChapMutualPassword)}
		}
	}
	s.hosts[id] = h
	s.changes.Touch(collHosts, id)
	simcore.WriteJSON(w, http.StatusCreated, map[string]string{"id": id})
	return nil
}

// modifyHostLocked validates a whole PATCH before changing anything.
func (s *Sim) modifyHostLocked(id string, mod hostModify) *apiError {
	h, ok := s.hosts[id]
	if !ok {
		return errf(http.StatusNotFound, "host %s not found", id)
	}
	if mod.Name != nil {
		if *mod.Name == "" || len(*mod.Name) > maxHostNameLen {
			return errf(http.StatusBadRequest, "name %q: want 1..%d characters", *mod.Name, maxHostNameLen)
		}
		for _, other := range s.hosts {
			if other.ID != id && other.Name == *mod.Name {
				return errf(http.StatusBadRequest, "host name %q is already in use", *mod.Name)
			}
		}
	}
	removing := map[string]bool{}
	if mod.RemoveInitiators != nil {
		for _, p := range *mod.RemoveInitiators {
			if _, ok := h.Initiators[p]; !ok {
				return errf(http.StatusBadRequest, "initiator %q is not associated with host %s", p, h.Name)
			}
			removing[p] = true
		}
	}
	var adds []*initiator
	if mod.AddInitiators != nil {
		seen := map[string]bool{}
		for i, b := range *mod.AddInitiators {
			p, pt := deref(b.PortName), deref(b.PortType)
			if p == "" {
				return errf(http.StatusBadRequest, "add_initiators[%d].port_name is required", i)
			}
			if !validPortType(pt) {
				return errf(http.StatusBadRequest, "add_initiators[%d].port_type %q: want iSCSI, FC or NVMe", i, pt)
			}
			owner := s.initiatorOwnerLocked(p)
			if seen[p] || (owner != nil && (owner.ID != id || !removing[p])) {
				return &apiError{status: http.StatusBadRequest, code: codePortRegistered,
					msg: "One of the provided port names is already registered with another host. Please use port names unique to all hosts."}
			}
			seen[p] = true
			in := &initiator{PortName: p, PortType: pt,
				ChapSingleUsername: deref(b.ChapSingleUsername), ChapSinglePassword: deref(b.ChapSinglePassword),
				ChapMutualUsername: deref(b.ChapMutualUsername), ChapMutualPassword: deref(b.ChapMutualPassword)}
			if (in.ChapSingleUsername == "") != (in.ChapSinglePassword == "") {
				return errf(http.StatusBadRequest, "add_initiators[%d]: chap_single_username and chap_single_password go together", i)
			}
			if (in.ChapMutualUsername == "") != (in.ChapMutualPassword == "") {
				return errf(http.StatusBadRequest, "add_initiators[%d]: chap_mutual_username and chap_mutual_password go together", i)
			}
			if in.ChapMutualUsername != "" && in.ChapSingleUsername == "" {
				return errf(http.StatusBadRequest, "add_initiators[%d]: mutual CHAP needs single CHAP", i)
			}
			adds = append(adds, in)
		}
	}
	modifies, e := s.initiatorModifiesLocked(h, mod.ModifyInitiators, removing)
	if e != nil {
		return e
	}
	s.changes.Touch(collHosts, h.ID)
	for p := range removing {
		delete(h.Initiators, p)
		delete(s.logins, p) // the array drops its sessions
	}
	for _, in := range adds {
		h.Initiators[in.PortName] = in
	}
	for _, m := range modifies {
		in := h.Initiators[m.PortName]
		in.ChapSingleUsername, in.ChapSinglePassword = m.ChapSingleUsername, m.ChapSinglePassword
		in.ChapMutualUsername, in.ChapMutualPassword = m.ChapMutualUsername, m.ChapMutualPassword
	}
	if mod.Name != nil {
		h.Name = *mod.Name
	}
	if mod.Description != nil {
		h.Description = *mod.Description
	}
	return nil
}

// initiatorModifiesLocked validates modify_initiators: each names an
// initiator the host has, once, with CHAP credentials that go together
// (a user with its secret, mutual only beside single, no CHAP on FC).
// The array keeps the credentials per initiator and never returns the
// secrets; an entry replaces the initiator's CHAP credentials.
func (s *Sim) initiatorModifiesLocked(h *host, mods *[]initiatorModify, removing map[string]bool) ([]initiator, *apiError) {
	if mods == nil {
		return nil, nil
	}
	var out []initiator
	seen := map[string]bool{}
	for i, m := range *mods {
		p := deref(m.PortName)
		cur, ok := h.Initiators[p]
		switch {
		case p == "":
			return nil, errf(http.StatusBadRequest, "modify_initiators[%d].port_name is required", i)
		case !ok || removing[p]:
			return nil, errf(http.StatusBadRequest, "modify_initiators[%d]: initiator %q is not associated with host %s", i, p, h.Name)
		case seen[p]:
			return nil, errf(http.StatusBadRequest, "modify_initiators[%d]: initiator %q is named twice", i, p)
		}
		seen[p] = true
		in := initiator{PortName: p, PortType: cur.PortType,
			ChapSingleUsername: deref(m.ChapSingleUsername), ChapSinglePassword: deref(m.ChapSinglePassword),
			ChapMutualUsername: deref(m.ChapMutualUsername), ChapMutualPassword: deref(m.ChapMutualPassword)}
		switch {
		case (in.ChapSingleUsername == "") != (in.ChapSinglePassword == ""):
			return nil, errf(http.StatusBadRequest, "modify_initiators[%d]: chap_single_username and chap_single_password go together", i)
		case (in.ChapMutualUsername == "") != (in.ChapMutualPassword == ""):
			return nil, errf(http.StatusBadRequest, "modify_initiators[%d]: chap_mutual_username and chap_mutual_password go together", i)
		case in.ChapMutualUsername != "" && in.ChapSingleUsername == "":
			return nil, errf(http.StatusBadRequest, "modify_initiators[%d]: mutual CHAP needs single CHAP", i)
		case in.ChapSingleUsername != "" && cur.PortType == "FC":
			return nil, errf(http.StatusBadRequest, "modify_initiators[%d]: CHAP is for iSCSI and NVMe initiators, not FC", i)
		}
		out = append(out, in)
	}
	return out, nil
}

// attachDetachLocked attaches or detaches a volume to a host or a group.
func (s *Sim) attachDetachLocked(hostID, groupID, action string, b attachBody) *apiError {
	volID := deref(b.VolumeID)
	if volID == "" {
		return errf(http.StatusBadRequest, "volume_id is required")
	}
	if _, ok := s.volumes[volID]; !ok {
		return errf(http.StatusNotFound, "volume %s not found", volID)
	}
	if action == "detach" {
		if b.LogicalUnitNumber != nil {
			return errf(http.StatusBadRequest, "logical_unit_number is not a detach parameter")
		}
		mid := mappingID(hostID, groupID, volID)
		if _, ok := s.mappings[mid]; !ok {
			// csi-powerstore's detachVolumeFromHost (pkg/controller/base.go)
			// takes a 400 as success only when its message contains "Host
			// is not attached to volume" (any other 400 is HostIsNotExist:
			// codes.NotFound), and any 422 as success (PR #147).
			return &apiError{status: s.detachNotAttached, code: codeHostNotAttached,
				msg: fmt.Sprintf("Host is not attached to volume %s", volID)}
		}
		delete(s.mappings, mid)
		s.changes.Touch(collMappings, mid)
		return nil
	}
	var lun int64
	if b.LogicalUnitNumber != nil {
		lun = *b.LogicalUnitNumber
	}
	if msg, status := s.attachLocked(hostID, groupID, volID, lun); status != 0 {
		return errf(status, "%s", msg)
	}
	return nil
}

// attachLocked maps a volume; it returns a message and status on refusal.
// A LUN of 0 picks the lowest free LUN from 1.
func (s *Sim) attachLocked(hostID, groupID, volID string, lun int64) (string, int) {
	if lun < 0 || lun > 16383 {
		return "logical_unit_number must be 0..16383", http.StatusBadRequest
	}
	mid := mappingID(hostID, groupID, volID)
	if _, dup := s.mappings[mid]; dup {
		return "volume " + volID + " is already attached to this host or host group", http.StatusUnprocessableEntity
	}
	used := map[int64]bool{}
	for _, m := range s.mappings {
		if (hostID != "" && m.HostID == hostID) || (groupID != "" && m.GroupID == groupID) {
			used[m.LUN] = true
		}
	}
	if lun == 0 {
		for lun = 1; used[lun]; lun++ {
		}
	} else if used[lun] {
		return "logical unit number is already in use on this host or host group", http.StatusBadRequest
	}
	s.mappings[mid] = &mapping{ID: mid, HostID: hostID, GroupID: groupID, VolumeID: volID, LUN: lun}
	s.changes.Touch(collMappings, mid)
	return "", 0
}

// renderMappingLocked renders a host_volume_mapping.
func (s *Sim) renderMappingLocked(m *mapping) map[string]any {
	return map[string]any{"id": m.ID, "host_id": nullable(m.HostID), "host_group_id": nullable(m.GroupID),
		"volume_id": m.VolumeID, "logical_unit_number": m.LUN,
		"volume": map[string]any{"appliance_id": s.applianceID}}
}

func (s *Sim) serveMappings(w http.ResponseWriter, r *http.Request, id, action string) *apiError {
	if r.Method != http.MethodGet || action != "" {
		return errf(http.StatusMethodNotAllowed, "host_volume_mapping is read-only")
	}
	if id != "" {
		s.mu.Lock()
		defer s.mu.Unlock()
		m, ok := s.mappings[id]
		if !ok {
			return errf(http.StatusNotFound, "host_volume_mapping %s not found", id)
		}
		simcore.WriteJSON(w, http.StatusOK, s.renderMappingLocked(m))
		return nil
	}
	q, e := s.parseQuery(r, "id", "host_id", "host_group_id", "volume_id")
	if e != nil {
		return e
	}
	s.mu.Lock()
	rows := make([]row, 0, len(s.mappings))
	for _, m := range s.mappings {
		fields := map[string]string{"id": m.ID, "host_id": m.HostID, "host_group_id": m.GroupID, "volume_id": m.VolumeID}
		if q.keeps(fields) { // render only what is asked for: health probes ask for one host's
			rows = append(rows, row{fields: fields, obj: s.renderMappingLocked(m)})
		}
	}
	s.mu.Unlock()
	writePage(w, rows, q)
	return nil
}

func (s *Sim) renderVolumeLocked(v *volume) map[string]any {
	return map[string]any{"id": v.ID, "name": v.Name, "size": v.Size, "wwn": v.WWN,
		"appliance_id": s.applianceID, "state": "Ready", "type": "Primary"}
}

func (s *Sim) serveVolumes(w http.ResponseWriter, r *http.Request, id, action string, body []byte) *apiError {
	if r.Method == http.MethodPost && id == "" {
		return s.createVolume(w, body)
	}
	if r.Method != http.MethodGet || action != "" {
		return errf(http.StatusMethodNotAllowed, "the simulator serves volume reads only")
	}
	if id != "" {
		s.mu.Lock()
		defer s.mu.Unlock()
		v, ok := s.volumes[id]
		if !ok {
			return errf(http.StatusNotFound, "volume %s not found", id)
		}
		simcore.WriteJSON(w, http.StatusOK, s.renderVolumeLocked(v))
		return nil
	}
	// gopowerstore's GetVolumes filters type=not.eq.Snapshot; every
	// simulated volume is a Primary.
	q, e := s.parseQuery(r, "id", "name", "type")
	if e != nil {
		return e
	}
	s.mu.Lock()
	rows := make([]row, 0, len(s.volumes))
	for _, v := range s.volumes {
		rows = append(rows, row{fields: map[string]string{"id": v.ID, "name": v.Name, "type": "Primary"}, obj: s.renderVolumeLocked(v)})
	}
	s.mu.Unlock()
	writePage(w, rows, q)
	return nil
}

// createVolume answers POST volume as gopowerstore's CreateVolume sends it
// (csi-powerstore pkg/controller/creator.go): {"name","size"} and optional
// placement fields; 201 with {"id"}. A name in use is a 422, as the array
// refuses duplicate names.
func (s *Sim) createVolume(w http.ResponseWriter, body []byte) *apiError {
	var b struct {
		Name                *string `json:"name"`
		Size                *int64  `json:"size"`
		SectorSize          *int64  `json:"sector_size"`
		VolumeGroupID       string  `json:"volume_group_id"`
		ApplianceID         string  `json:"appliance_id"`
		Description         string  `json:"description"`
		ProtectionPolicyID  string  `json:"protection_policy_id"`
		PerformancePolicyID string  `json:"performance_policy_id"`
		AppType             string  `json:"app_type"`
		AppTypeOther        string  `json:"app_type_other"`
		// Metadata is what csi-powerstore's SCSICreator.Create sends on
		// arrays of release 3.0 or later (k8s_pvol_name, k8s_claim_name,
		// k8s_claim_namespace, with the header DELL-VISIBILITY: internal).
		Metadata map[string]string `json:"metadata"`
	}
	if e := decodeBody(body, &b); e != nil {
		return e
	}
	if deref(b.Name) == "" || b.Size == nil || *b.Size < 1<<20 || *b.Size%8192 != 0 {
		return errf(http.StatusBadRequest, "name and a size of at least 1 MB, a multiple of 8192, are required")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, v := range s.volumes {
		if v.Name == *b.Name {
			return errf(http.StatusUnprocessableEntity, "the name %s is already in use by another volume", *b.Name)
		}
	}
	id := uuidFor("volume", *b.Name)
	wwn := "naa.68ccf098" + strings.ReplaceAll(id, "-", "")[:24]
	s.volumes[id] = &volume{ID: id, Name: *b.Name, Size: *b.Size, WWN: wwn}
	s.changes.Touch(collVolumes, id)
	simcore.WriteJSON(w, http.StatusCreated, map[string]string{"id": id})
	return nil
}
