package powerflex

import (
	"encoding/json"
	"net/http"
	"strconv"
)

// msgVolumeNameInUse is the MDM's text for a volume name that exists; the
// driver matches it to make CreateVolume idempotent (dell/csi-powerflex
// service/service.go sioGatewayVolumeNameInUse).
const (
	codeVolumeNameInUse = 105
	msgVolumeNameInUse  = "Volume name already in use. Please use a different name."
	// PoolName is the name of the one storage pool each system has.
	PoolName = "pool1"
)

type storagePoolJSON struct {
	ID                 string `json:"id"`
	Name               string `json:"name"`
	ProtectionDomainID string `json:"protectionDomainId"`
	Links              []link `json:"links"`
}

// poolID and protectionDomainID are the IDs of a system's one storage
// pool and protection domain (volumes render the same pool ID).
func poolID(systemID string) string             { return derivedID("pool", systemID) }
func protectionDomainID(systemID string) string { return derivedID("pd", systemID) }

// storagePools answers GET /api/types/StoragePool/instances: one pool,
// PoolName, per system. The caller holds s.mu.
func (s *Sim) storagePools() []storagePoolJSON {
	out := []storagePoolJSON{}
	for _, id := range sortedKeys(s.systems) {
		p := poolID(id)
		out = append(out, storagePoolJSON{ID: p, Name: PoolName, ProtectionDomainID: protectionDomainID(id),
			Links: []link{{Rel: "self", HREF: "/api/instances/StoragePool::" + p}}})
	}
	return out
}

// createVolume answers POST /api/types/Volume/instances as goscaleio's
// CreateVolume sends it (storagePoolId, name, volumeSizeInKb): the volume
// is created unmapped on the pool's system and its ID returned as
// {"id": ...}. A name in use is the MDM's "name already in use" error.
func (s *Sim) createVolume(w http.ResponseWriter, r *http.Request) {
	var p struct {
		ProtectionDomainID string `json:"protectionDomainId"`
		StoragePoolID      string `json:"storagePoolId"`
		VolumeType         string `json:"volumeType"`
		VolumeSizeInKb     string `json:"volumeSizeInKb"`
		Name               string `json:"name"`
		UseRmcache         string `json:"useRmcache"`
		CompressionMethod  string `json:"compressionMethod"`
	}
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		writeError(w, http.StatusBadRequest, codeNone, msgInvalidRequest+": "+err.Error())
		return
	}
	size, err := strconv.Atoi(p.VolumeSizeInKb)
	if p.Name == "" || err != nil || size <= 0 {
		writeError(w, http.StatusBadRequest, codeNone, msgInvalidRequest+": name and a positive volumeSizeInKb are required")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	systemID := ""
	for _, id := range sortedKeys(s.systems) {
		if poolID(id) == p.StoragePoolID {
			systemID = id
		}
	}
	if systemID == "" {
		writeError(w, http.StatusInternalServerError, codeNone, "Could not find the Storage Pool")
		return
	}
	for _, v := range s.volumes {
		if v.Name == p.Name {
			writeError(w, http.StatusInternalServerError, codeVolumeNameInUse, msgVolumeNameInUse)
			return
		}
	}
	id := derivedID("volume", p.Name)
	s.volumes[id] = &volume{ID: id, Name: p.Name, SizeInKb: size, SystemID: systemID}
	s.changes.Touch(collVolumes, id)
	writeJSON(w, map[string]string{"id": id})
}
