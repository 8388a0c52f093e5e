package powerstore

import (
	"net/http"
	"sort"
	"time"

	"github.com/fenced-project/fenced/tests/arraysim/simcore"
)

// hostGroupModify is the body of PATCH host_group/<id>.
type hostGroupModify struct {
	Name             *string   `json:"name"`
	Description      *string   `json:"description"`
	HostConnectivity *string   `json:"host_connectivity"`
	AddHostIDs       *[]string `json:"add_host_ids"`
	RemoveHostIDs    *[]string `json:"remove_host_ids"`
}

func (s *Sim) renderGroupLocked(g *hostGroup) map[string]any {
	hosts := []map[string]any{}
	for _, id := range s.groupMembersLocked(g.ID) {
		hosts = append(hosts, map[string]any{"id": id, "name": s.hosts[id].Name})
	}
	mapped := []map[string]any{}
	for _, m := range s.sortedMappingsLocked() {
		if m.GroupID == g.ID {
			mapped = append(mapped, map[string]any{"id": m.ID, "host_group_id": g.ID, "volume_id": m.VolumeID,
				"volume": s.renderVolumeLocked(s.volumes[m.VolumeID])})
		}
	}
	return map[string]any{"id": g.ID, "name": g.Name, "description": nullable(g.Description),
		"host_connectivity": "Local_Only", "hosts": hosts, "mapped_host_groups": mapped,
		"host_virtual_volume_mappings": []any{}}
}

func (s *Sim) serveHostGroup(w http.ResponseWriter, r *http.Request, id, action string, body []byte) *apiError {
	switch {
	case id == "" && r.Method == http.MethodGet:
		q, e := s.parseQuery(r, "id", "name")
		if e != nil {
			return e
		}
		s.mu.Lock()
		rows := make([]row, 0, len(s.groups))
		for _, g := range s.groups {
			rows = append(rows, row{fields: map[string]string{"id": g.ID, "name": g.Name}, obj: s.renderGroupLocked(g)})
		}
		s.mu.Unlock()
		writePage(w, rows, q)
		return nil
	case id != "" && action == "" && r.Method == http.MethodGet:
		s.mu.Lock()
		defer s.mu.Unlock()
		g, ok := s.groups[id]
		if !ok {
			return errf(http.StatusNotFound, "host_group %s not found", id)
		}
		simcore.WriteJSON(w, http.StatusOK, s.renderGroupLocked(g))
		return nil
	case id != "" && action == "" && r.Method == http.MethodPatch:
		var mod hostGroupModify
		if e := decodeBody(body, &mod); e != nil {
			return e
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if e := s.modifyGroupLocked(id, mod); e != nil {
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
		if _, ok := s.groups[id]; !ok {
			return errf(http.StatusNotFound, "host_group %s not found", id)
		}
		if e := s.attachDetachLocked("", id, action, b); e != nil {
			return e
		}
		noContent(w)
		return nil
	}
	return errf(http.StatusMethodNotAllowed, "%s host_group %s %s is not supported", r.Method, id, action)
}

// modifyGroupLocked validates a whole PATCH before changing anything.
func (s *Sim) modifyGroupLocked(id string, mod hostGroupModify) *apiError {
	g, ok := s.groups[id]
	if !ok {
		return errf(http.StatusNotFound, "host_group %s not found", id)
	}
	if mod.Name != nil {
		if *mod.Name == "" {
			return errf(http.StatusBadRequest, "name must not be empty")
		}
		for _, other := range s.groups {
			if other.ID != id && other.Name == *mod.Name {
				return errf(http.StatusBadRequest, "host group name %q is already in use", *mod.Name)
			}
		}
	}
	remove := map[string]bool{}
	if mod.RemoveHostIDs != nil {
		for _, hid := range *mod.RemoveHostIDs {
			h, ok := s.hosts[hid]
			if !ok {
				return errf(http.StatusNotFound, "host %s not found", hid)
			}
			if h.GroupID != id {
				return errf(http.StatusBadRequest, "host %s is not a member of host group %s", h.Name, g.Name)
			}
			remove[hid] = true
		}
	}
	var add []string
	if mod.AddHostIDs != nil {
		for _, hid := range *mod.AddHostIDs {
			h, ok := s.hosts[hid]
			if !ok {
				return errf(http.StatusNotFound, "host %s not found", hid)
			}
			if h.GroupID != "" && (h.GroupID != id || !remove[hid]) {
				return errf(http.StatusBadRequest, "host %s already belongs to a host group", h.Name)
			}
			add = append(add, hid)
		}
	}
	// A host's group shows in the host and in the group's member list.
	s.changes.Touch(collHostGroups, id)
	for hid := range remove {
		s.hosts[hid].GroupID = ""
		s.changes.Touch(collHosts, hid)
	}
	for _, hid := range add {
		s.hosts[hid].GroupID = id
		s.changes.Touch(collHosts, hid)
	}
	if mod.Name != nil {
		g.Name = *mod.Name
	}
	if mod.Description != nil {
		g.Description = *mod.Description
	}
	return nil
}

// metricsRequest is the body of POST metrics/generate.
type metricsRequest struct {
	Entity   string `json:"entity"`
	EntityID string `json:"entity_id"`
	Interval string `json:"interval"`
}

// metricSamples is how many samples metrics/generate returns.
const metricSamples = 6

// activeIOPS is the total_iops a volume with I/O reports.
const activeIOPS = 240

var intervals = map[string]time.Duration{
	"Twenty_Sec": 20 * time.Second, "Five_Mins": 5 * time.Minute,
	"One_Hour": time.Hour, "One_Day": 24 * time.Hour,
}

// serveMetrics answers POST metrics/generate for performance_metrics_by_volume:
// the latest samples in ascending time order; total_iops is non-zero while
// a host that reaches the volume has the IOActive signal and initiators.
func (s *Sim) serveMetrics(w http.ResponseWriter, r *http.Request, id, action string, body []byte) *apiError {
	if id != "generate" || action != "" || r.Method != http.MethodPost {
		return errf(http.StatusNotFound, "no such metrics resource")
	}
	var req metricsRequest
	if e := decodeBody(body, &req); e != nil {
		return e
	}
	step, ok := intervals[req.Interval]
	if !ok {
		return errf(http.StatusBadRequest, "interval %q: want Twenty_Sec, Five_Mins, One_Hour or One_Day", req.Interval)
	}
	if req.Entity != "performance_metrics_by_volume" {
		return errf(http.StatusBadRequest, "entity %q is not modelled by the simulator (only performance_metrics_by_volume)", req.Entity)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.volumes[req.EntityID]; !ok {
		return errf(http.StatusNotFound, "volume %s not found", req.EntityID)
	}
	iops := 0.0
	if s.volumeActiveLocked(req.EntityID) {
		iops = activeIOPS
	}
	last := s.now().UTC().Truncate(step)
	samples := make([]map[string]any, 0, metricSamples)
	for i := metricSamples - 1; i >= 0; i-- {
		ts := last.Add(-time.Duration(i) * step)
		samples = append(samples, map[string]any{
			"entity": req.Entity, "volume_id": req.EntityID, "appliance_id": s.applianceID,
			"timestamp": ts.Format(time.RFC3339), "repeat_count": 1,
			"read_iops": iops / 2, "write_iops": iops / 2, "total_iops": iops,
			"read_bandwidth": iops * 4096, "write_bandwidth": iops * 4096, "total_bandwidth": iops * 8192,
			"avg_latency": 250.0, "avg_io_size": 8192.0,
		})
	}
	sort.SliceStable(samples, func(i, j int) bool {
		return samples[i]["timestamp"].(string) < samples[j]["timestamp"].(string)
	})
	simcore.WriteJSON(w, http.StatusOK, samples)
	return nil
}
