package powermax

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"

	"github.com/fenced-project/fenced/tests/arraysim/simcore"
)

// Provisioning, as csi-powermax's CreateVolume and ControllerPublish reach
// it (dell/csi-powermax service/controller.go CreateVolume,
// service/storage_group_svc.go addVolumesToSGMV) through gopowermax
// (sloprovisioning.go CreateStorageGroup, CreateVolumeInStorageGroupS,
// CreateMaskingView, DeleteStorageGroup): storage groups with or without
// a storage resource pool, new volumes created into a storage group with a
// volume identifier and a size in cylinders, and masking views of an
// existing host, port group and storage group.

// cylinderBytes is the size of a PowerMax cylinder (15 tracks of 128 KiB).
const cylinderBytes = 1966080

// defaultCylinders is the size of the volumes a fixture seeds: 8 GiB.
const defaultCylinders = 4370

func cylindersToGB(cyl int) float64 {
	return math.Round(float64(cyl)*cylinderBytes/(1<<30)*100) / 100
}

// frontEndPathsLocked counts the volume's front-end paths: two (the
// director ports of the simulator's port groups) per masking view its
// storage groups are in.
func (s *Sim) frontEndPathsLocked(v *volume) int {
	n := 0
	for _, g := range v.Groups {
		if sg := s.groups[g]; sg != nil {
			n += 2 * len(sg.Views)
		}
	}
	return n
}

type createSGBody struct {
	StorageGroupID  string          `json:"storageGroupId"`
	SRPID           string          `json:"srpId"`
	Emulation       string          `json:"emulation"`
	ExecutionOption string          `json:"executionOption"`
	SnapshotPolicy  json.RawMessage `json:"snapshot_policies"`
	SLOParams       []struct {
		SLOID string `json:"sloId"`
	} `json:"sloBasedStorageGroupParam"`
}

// createStorageGroup creates an empty storage group: with srpId "None" a
// masking group without service level, else one in the pool with the
// first sloBasedStorageGroupParam's service level.
func (s *Sim) createStorageGroup(w http.ResponseWriter, r *http.Request) {
	var body createSGBody
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		s.fail(w, http.StatusBadRequest, "Invalid JSON in request body: %v", err)
		return
	}
	if body.StorageGroupID == "" || len(body.StorageGroupID) > 64 {
		s.fail(w, http.StatusBadRequest, "storageGroupId %q: want 1..64 characters", body.StorageGroupID)
		return
	}
	sg := &storageGroup{ID: body.StorageGroupID}
	switch {
	case body.SRPID == "" || body.SRPID == "None":
	case body.SRPID != "SRP_1":
		s.fail(w, http.StatusNotFound, "Cannot find SRP %s", body.SRPID)
		return
	default:
		sg.SRP, sg.SLO = body.SRPID, "Optimized"
		if len(body.SLOParams) > 0 && body.SLOParams[0].SLOID != "" {
			sg.SLO = body.SLOParams[0].SLOID
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.groups[sg.ID] != nil {
		s.fail(w, http.StatusConflict, "Storage Group %s already exists", sg.ID)
		return
	}
	s.groups[sg.ID] = sg
	s.changes.Touch(collStorageGroups, sg.ID)
	s.writeStorageGroupLocked(w, sg)
}

// deleteStorageGroup deletes an empty storage group that is in no masking
// view.
func (s *Sim) deleteStorageGroup(w http.ResponseWriter, id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sg := s.groups[id]
	switch {
	case sg == nil:
		s.fail(w, http.StatusNotFound, "Cannot find Storage Group %s", id)
	case len(sg.Views) > 0:
		s.fail(w, http.StatusBadRequest, "Storage Group %s is in masking view %s", id, sg.Views[0])
	case len(sg.Volumes) > 0:
		s.fail(w, http.StatusBadRequest, "Storage Group %s still has %d volumes", id, len(sg.Volumes))
	default:
		delete(s.groups, id)
		s.changes.Touch(collStorageGroups, id)
		w.WriteHeader(http.StatusNoContent)
	}
}

// addVolumeParam is expandStorageGroupParam.addVolumeParam creating new
// volumes (gopowermax GetCreateVolInSGPayload).
type addVolumeParam struct {
	CreateNewVolumes bool   `json:"create_new_volumes"`
	Emulation        string `json:"emulation"`
	VolumeAttributes []struct {
		NumberOfVolumes  int    `json:"num_of_vols"`
		CapacityUnit     string `json:"capacityUnit"`
		VolumeSize       string `json:"volume_size"`
		VolumeIdentifier *struct {
			Choice string `json:"volumeIdentifierChoice"`
			Name   string `json:"identifier_name"`
		} `json:"volumeIdentifier"`
	} `json:"volumeAttributes"`
}

// createVolumesLocked creates the volumes an addVolumeParam asks for in
// sg; sizes in cylinders only. It answers the error itself.
func (s *Sim) createVolumesLocked(w http.ResponseWriter, sg *storageGroup, p *addVolumeParam) bool {
	if !p.CreateNewVolumes || len(p.VolumeAttributes) == 0 {
		s.fail(w, http.StatusBadRequest, "addVolumeParam: only create_new_volumes with volumeAttributes is modelled")
		return false
	}
	if sg.SRP == "" {
		s.fail(w, http.StatusBadRequest, "Storage Group %s has no SRP: new volumes need one", sg.ID)
		return false
	}
	type want struct {
		ident string
		cyl   int
	}
	var wants []want
	for i, a := range p.VolumeAttributes {
		cyl, err := strconv.Atoi(a.VolumeSize)
		if a.CapacityUnit != "CYL" || err != nil || cyl <= 0 || a.NumberOfVolumes != 1 {
			s.fail(w, http.StatusBadRequest, "volumeAttributes[%d]: one volume sized in CYL is modelled (got %d of %s %s)",
				i, a.NumberOfVolumes, a.VolumeSize, a.CapacityUnit)
			return false
		}
		ident := ""
		if a.VolumeIdentifier != nil {
			if a.VolumeIdentifier.Choice != "identifier_name" || a.VolumeIdentifier.Name == "" || len(a.VolumeIdentifier.Name) > 64 {
				s.fail(w, http.StatusBadRequest, "volumeAttributes[%d].volumeIdentifier: want identifier_name of 1..64 characters", i)
				return false
			}
			ident = a.VolumeIdentifier.Name
		}
		wants = append(wants, want{ident, cyl})
	}
	for _, wv := range wants {
		id := s.nextVolumeIDLocked()
		s.volumes[id] = &volume{ID: id, Groups: []string{sg.ID}, Identifier: wv.ident, Cylinders: wv.cyl}
		sg.Volumes = append(sg.Volumes, id)
		s.changes.Touch(collVolumes, id)
		s.changes.Touch(collStorageGroups, sg.ID)
	}
	return true
}

// nextVolumeIDLocked is the lowest free device ID above every existing
// one.
func (s *Sim) nextVolumeIDLocked() string {
	top := int64(0xFF)
	for id := range s.volumes {
		if n, err := strconv.ParseInt(id, 16, 32); err == nil && n > top {
			top = n
		}
	}
	return fmt.Sprintf("%05X", top+1)
}

type createMVBody struct {
	MaskingViewID            string `json:"maskingViewId"`
	HostOrHostGroupSelection *struct {
		UseExistingHostParam *struct {
			HostID string `json:"hostId"`
		} `json:"useExistingHostParam"`
	} `json:"hostOrHostGroupSelection"`
	PortGroupSelection *struct {
		UseExistingPortGroupParam *struct {
			PortGroupID string `json:"portGroupId"`
		} `json:"useExistingPortGroupParam"`
	} `json:"portGroupSelection"`
	StorageGroupSelection *struct {
		UseExistingStorageGroupParam *struct {
			StorageGroupID string `json:"storageGroupId"`
		} `json:"useExistingStorageGroupParam"`
	} `json:"storageGroupSelection"`
	ExecutionOption string `json:"executionOption"`
}

// createMaskingView makes a masking view of an existing host, port group
// (any name: port groups are not modelled beyond their name) and storage
// group, answering the view.
func (s *Sim) createMaskingView(w http.ResponseWriter, r *http.Request) {
	var body createMVBody
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		s.fail(w, http.StatusBadRequest, "Invalid JSON in request body: %v", err)
		return
	}
	b := body
	if b.MaskingViewID == "" || b.HostOrHostGroupSelection == nil || b.HostOrHostGroupSelection.UseExistingHostParam == nil ||
		b.PortGroupSelection == nil || b.PortGroupSelection.UseExistingPortGroupParam == nil ||
		b.StorageGroupSelection == nil || b.StorageGroupSelection.UseExistingStorageGroupParam == nil {
		s.fail(w, http.StatusBadRequest, "a masking view of an existing host, port group and storage group is modelled")
		return
	}
	mv := &maskingView{ID: b.MaskingViewID, Host: b.HostOrHostGroupSelection.UseExistingHostParam.HostID,
		PortGroup:    b.PortGroupSelection.UseExistingPortGroupParam.PortGroupID,
		StorageGroup: b.StorageGroupSelection.UseExistingStorageGroupParam.StorageGroupID}
	s.mu.Lock()
	defer s.mu.Unlock()
	h, sg := s.hosts[mv.Host], s.groups[mv.StorageGroup]
	switch {
	case s.views[mv.ID] != nil:
		s.fail(w, http.StatusConflict, "Masking View %s already exists", mv.ID)
		return
	case h == nil:
		s.fail(w, http.StatusNotFound, "Cannot find Host %s", mv.Host)
		return
	case sg == nil:
		s.fail(w, http.StatusNotFound, "Cannot find Storage Group %s", mv.StorageGroup)
		return
	case mv.PortGroup == "":
		s.fail(w, http.StatusBadRequest, "portGroupId is empty")
		return
	}
	s.views[mv.ID] = mv
	h.Views = append(h.Views, mv.ID)
	sg.Views = append(sg.Views, mv.ID)
	s.changes.Touch(collMaskingViews, mv.ID)
	s.changes.Touch(collHosts, h.ID)
	s.changes.Touch(collStorageGroups, sg.ID)
	simcore.WriteJSON(w, http.StatusOK, mv)
}
