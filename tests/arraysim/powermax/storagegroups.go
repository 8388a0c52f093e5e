package powermax

import (
	"encoding/json"
	"net/http"
	"slices"
)

// Storage group edits and masking view deletion, as csi-powermax makes
// them when it publishes and unpublishes a volume (dell/csi-powermax
// service/storage_group_svc.go: AddVolumesToStorageGroupS,
// RemoveVolumesFromStorageGroup, and DeleteMaskingView before removing a
// storage group's last volumes) through gopowermax
// (sloprovisioning.go UpdateStorageGroupS, RemoveVolumesFromStorageGroup,
// DeleteMaskingView).

// sgEdit is the body of PUT storagegroup/<id> (gopowermax
// types/v100 UpdateStorageGroupPayload), for the two edits modelled.
type sgEdit struct {
	EditStorageGroupActionParam struct {
		RemoveVolumeParam *struct {
			VolumeIDs []string `json:"volumeId"`
		} `json:"removeVolumeParam"`
		ExpandStorageGroupParam *struct {
			AddSpecificVolumeParam *struct {
				VolumeIDs []string `json:"volumeId"`
			} `json:"addSpecificVolumeParam"`
			AddVolumeParam *addVolumeParam `json:"addVolumeParam"`
		} `json:"expandStorageGroupParam"`
	} `json:"editStorageGroupActionParam"`
	ExecutionOption string `json:"executionOption"`
}

// putStorageGroup adds volumes to or removes them from a storage group.
// Like the array it refuses to empty a storage group that is in a masking
// view (which is why csi-powermax deletes the view first), to remove a
// volume that is not in the group and to add one that is not on the array.
// Only synchronous edits are served (the simulator has no jobs).
func (s *Sim) putStorageGroup(w http.ResponseWriter, r *http.Request, id string) {
	var body sgEdit
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		s.fail(w, http.StatusBadRequest, "Invalid JSON in request body: %v", err)
		return
	}
	if body.ExecutionOption != "SYNCHRONOUS" {
		s.fail(w, http.StatusBadRequest, "executionOption %q is not supported by the simulator (SYNCHRONOUS only)", body.ExecutionOption)
		return
	}
	p := body.EditStorageGroupActionParam
	if p.ExpandStorageGroupParam != nil && p.ExpandStorageGroupParam.AddVolumeParam != nil {
		if p.RemoveVolumeParam != nil || p.ExpandStorageGroupParam.AddSpecificVolumeParam != nil {
			s.fail(w, http.StatusBadRequest, "editStorageGroupActionParam must hold one edit")
			return
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		sg := s.groups[id]
		if sg == nil {
			s.fail(w, http.StatusNotFound, "Cannot find Storage Group %s", id)
			return
		}
		if s.createVolumesLocked(w, sg, p.ExpandStorageGroupParam.AddVolumeParam) {
			s.writeStorageGroupLocked(w, sg)
		}
		return
	}
	var add, remove []string
	if p.RemoveVolumeParam != nil {
		remove = p.RemoveVolumeParam.VolumeIDs
	}
	if p.ExpandStorageGroupParam != nil && p.ExpandStorageGroupParam.AddSpecificVolumeParam != nil {
		add = p.ExpandStorageGroupParam.AddSpecificVolumeParam.VolumeIDs
	}
	if (len(add) == 0) == (len(remove) == 0) {
		s.fail(w, http.StatusBadRequest, "editStorageGroupActionParam must add or remove at least one volume (other edits are not modelled)")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sg := s.groups[id]
	if sg == nil {
		s.fail(w, http.StatusNotFound, "Cannot find Storage Group %s", id)
		return
	}
	for _, v := range append(slices.Clone(add), remove...) {
		if s.volumes[v] == nil {
			s.fail(w, http.StatusNotFound, "Cannot find Volume %s", v)
			return
		}
	}
	for _, v := range remove {
		if !slices.Contains(sg.Volumes, v) {
			s.fail(w, http.StatusBadRequest, "Volume %s is not in Storage Group %s", v, id)
			return
		}
	}
	left := slices.DeleteFunc(slices.Clone(sg.Volumes), func(v string) bool { return slices.Contains(remove, v) })
	if len(remove) > 0 && len(left) == 0 && len(sg.Views) > 0 {
		s.fail(w, http.StatusBadRequest, "Cannot remove the last volumes of Storage Group %s: it is in masking view %s", id, sg.Views[0])
		return
	}
	s.changes.Touch(collStorageGroups, id)
	s.changes.Touch(collVolumes, add...)
	s.changes.Touch(collVolumes, remove...)
	for _, v := range add {
		if !slices.Contains(sg.Volumes, v) {
			sg.Volumes = append(sg.Volumes, v)
			s.volumes[v].Groups = append(s.volumes[v].Groups, id)
		}
	}
	for _, v := range remove {
		vol := s.volumes[v]
		vol.Groups = slices.DeleteFunc(vol.Groups, func(g string) bool { return g == id })
	}
	sg.Volumes = slices.DeleteFunc(sg.Volumes, func(v string) bool { return slices.Contains(remove, v) })
	s.writeStorageGroupLocked(w, sg)
}

// deleteMaskingView deletes a masking view; its host and storage group
// stay.
func (s *Sim) deleteMaskingView(w http.ResponseWriter, id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	mv := s.views[id]
	if mv == nil {
		s.fail(w, http.StatusNotFound, "Cannot find Masking View %s", id)
		return
	}
	delete(s.views, id)
	s.changes.Touch(collMaskingViews, id)
	s.changes.Touch(collHosts, mv.Host)
	s.changes.Touch(collStorageGroups, mv.StorageGroup)
	if h := s.hosts[mv.Host]; h != nil {
		h.Views = slices.DeleteFunc(h.Views, func(v string) bool { return v == id })
	}
	if sg := s.groups[mv.StorageGroup]; sg != nil {
		sg.Views = slices.DeleteFunc(sg.Views, func(v string) bool { return v == id })
	}
	w.WriteHeader(http.StatusNoContent)
}
