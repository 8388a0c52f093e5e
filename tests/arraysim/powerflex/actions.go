package powerflex

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
)

// actionParams is the union of the mapping actions' bodies. PowerFlex
// passes booleans and numbers as strings.
type actionParams struct {
	SdcID                 string  `json:"sdcId"`
	AllowMultipleMappings string  `json:"allowMultipleMappings"`
	AllSdcs               string  `json:"allSdcs"`
	AccessMode            string  `json:"accessMode"`
	IgnoreScsiInitiators  string  `json:"ignoreScsiInitiators"`
	BandwidthLimitInKbps  *string `json:"bandwidthLimitInKbps"`
	IopsLimit             *string `json:"iopsLimit"`
	// HostID and AllHosts are addMappedHost's and removeMappedHost's
	// (goscaleio MapVolumeNVMeParam, UnmapVolumeNVMeParam).
	HostID   string `json:"hostId"`
	AllHosts string `json:"allHosts"`
}

// action performs POST /api/instances/<typ>::<id>/action/<name>.
func (s *Sim) action(w http.ResponseWriter, r *http.Request, typ, id, name string) {
	if typ == "Sdc" && name == "queryVolumeSdcBwc" {
		s.queryVolumeSdcBwc(w, id)
		return
	}
	if typ != "Volume" {
		writeError(w, http.StatusNotFound, codeNone, "no such action: "+typ+"/"+name)
		return
	}
	var p actionParams
	if err := json.NewDecoder(r.Body).Decode(&p); err != nil {
		writeError(w, http.StatusBadRequest, codeNone, msgInvalidRequest+": "+err.Error())
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.volumes[id]
	if !ok {
		writeError(w, http.StatusInternalServerError, codeVolumeNotFound, msgVolumeNotFound)
		return
	}
	// Every action changes at most the volume's mappings.
	s.changes.Touch(collVolumes, v.ID)
	switch name {
	case "addMappedSdc":
		s.addMappedSdc(w, v, p)
	case "removeMappedSdc":
		s.removeMappedSdc(w, v, p)
	case "addMappedHost":
		s.addMappedHost(w, v, p)
	case "removeMappedHost":
		s.removeMappedHost(w, v, p)
	case "setMappedSdcLimits":
		s.setMappedSdcLimits(w, v, p)
	default:
		writeError(w, http.StatusNotFound, codeNone, "no such action: "+typ+"/"+name)
	}
}

// addMappedSdc maps the volume to an SDC. Like the MDM it refuses a
// mapping that exists ("already mapped") and a second SDC unless
// allowMultipleMappings is TRUE. The caller holds s.mu.
func (s *Sim) addMappedSdc(w http.ResponseWriter, v *volume, p actionParams) {
	if p.SdcID == "" {
		writeError(w, http.StatusBadRequest, codeNone, msgInvalidRequest+": sdcId is required")
		return
	}
	mode := p.AccessMode
	if mode == "" {
		mode = AccessReadWrite
	}
	if !validAccessMode(mode) {
		writeError(w, http.StatusBadRequest, codeNone, msgInvalidRequest+": accessMode "+strconv.Quote(mode))
		return
	}
	if _, ok := s.sdcs[p.SdcID]; !ok {
		writeError(w, http.StatusInternalServerError, codeSdcNotFound, msgSdcNotFound)
		return
	}
	if v.mapping(p.SdcID) != nil {
		writeError(w, http.StatusInternalServerError, codeAlreadyMapped, msgAlreadyMapped)
		return
	}
	if len(v.Mappings) > 0 && !strings.EqualFold(p.AllowMultipleMappings, "TRUE") {
		writeError(w, http.StatusInternalServerError, codeSingleMapping, msgSingleMapping)
		return
	}
	v.Mappings = append(v.Mappings, &mapping{SdcID: p.SdcID, AccessMode: mode})
	writeJSON(w, struct{}{})
}

// removeMappedSdc unmaps the volume from one SDC (or from all with
// allSdcs=TRUE). Removing a mapping that does not exist is the MDM's
// "not mapped" error. The caller holds s.mu.
func (s *Sim) removeMappedSdc(w http.ResponseWriter, v *volume, p actionParams) {
	if strings.EqualFold(p.AllSdcs, "TRUE") {
		if len(v.Mappings) == 0 {
			writeError(w, http.StatusInternalServerError, codeNotMapped, msgNotMapped)
			return
		}
		v.Mappings = nil
		writeJSON(w, struct{}{})
		return
	}
	if p.SdcID == "" {
		writeError(w, http.StatusBadRequest, codeNone, msgInvalidRequest+": sdcId or allSdcs is required")
		return
	}
	if _, ok := s.sdcs[p.SdcID]; !ok {
		writeError(w, http.StatusInternalServerError, codeSdcNotFound, msgSdcNotFound)
		return
	}
	for i, m := range v.Mappings {
		if m.SdcID == p.SdcID {
			v.Mappings = append(v.Mappings[:i:i], v.Mappings[i+1:]...)
			writeJSON(w, struct{}{})
			return
		}
	}
	writeError(w, http.StatusInternalServerError, codeNotMapped, msgNotMapped)
}

// setMappedSdcLimits sets a mapping's IOPS and bandwidth limits. Absent
// fields stay unchanged; the bandwidth is in Kbps and must be a multiple
// of 1024 (the mapping shows it in Mbps). The caller holds s.mu.
func (s *Sim) setMappedSdcLimits(w http.ResponseWriter, v *volume, p actionParams) {
	if p.SdcID == "" {
		writeError(w, http.StatusBadRequest, codeNone, msgInvalidRequest+": sdcId is required")
		return
	}
	if _, ok := s.sdcs[p.SdcID]; !ok {
		writeError(w, http.StatusInternalServerError, codeSdcNotFound, msgSdcNotFound)
		return
	}
	m := v.mapping(p.SdcID)
	if m == nil {
		writeError(w, http.StatusInternalServerError, codeNotMapped, msgNotMapped)
		return
	}
	iops, bw := m.LimitIops, m.LimitBwInMbps
	if p.IopsLimit != nil {
		n, err := strconv.Atoi(*p.IopsLimit)
		if err != nil || n < 0 {
			writeError(w, http.StatusInternalServerError, codeInvalidLimit, msgIopsInvalid)
			return
		}
		iops = n
	}
	if p.BandwidthLimitInKbps != nil {
		n, err := strconv.Atoi(*p.BandwidthLimitInKbps)
		if err != nil || n < 0 || n%1024 != 0 {
			writeError(w, http.StatusInternalServerError, codeInvalidLimit, msgBandwidthInvalid)
			return
		}
		bw = n / 1024
	}
	m.LimitIops, m.LimitBwInMbps = iops, bw
	writeJSON(w, struct{}{})
}

// queryVolumeSdcBwc answers per-volume I/O counters of an SDC.
func (s *Sim) queryVolumeSdcBwc(w http.ResponseWriter, id string) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	c, ok := s.sdcs[id]
	if !ok {
		writeError(w, http.StatusInternalServerError, codeSdcNotFound, msgSdcNotFound)
		return
	}
	out := []volumeMetricsJSON{}
	for _, k := range sortedKeys(s.volumes) {
		if s.volumes[k].mapping(id) != nil {
			b := ioCounters(c.IOActive)
			out = append(out, volumeMetricsJSON{VolumeID: k, SdcID: id, ReadBwc: b, WriteBwc: b})
		}
	}
	writeJSON(w, out)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// addMappedHost maps the volume to a host by its ID: PowerFlex >= 4.0's
// call for NVMe hosts (goscaleio MapVolumeNVMe, POST
// /api/instances/Volume::<id>/action/addMappedHost with hostId, which
// csi-vxflexos' NVMePublisher sends: dell/csi-powerflex
// service/publisher.go). NVMe hosts are instances of Sdc (goscaleio
// GetNvmeHostByID reads Sdc::<id>), so a host ID is looked up like an SDC
// ID and the mapping is kept, shown and audited like an SDC's; the same
// MDM rules apply (already mapped; a second host only with
// allowMultipleMappings). The caller holds s.mu.
func (s *Sim) addMappedHost(w http.ResponseWriter, v *volume, p actionParams) {
	if p.HostID == "" {
		writeError(w, http.StatusBadRequest, codeNone, msgInvalidRequest+": hostId is required")
		return
	}
	p.SdcID = p.HostID
	s.addMappedSdc(w, v, p)
}

// removeMappedHost unmaps the volume from one host by its ID (or from all
// with allHosts=TRUE): goscaleio RemoveMappedHost, POST
// /api/instances/Volume::<id>/action/removeMappedHost with hostId, which
// csi-vxflexos' unpublish sends for an NVMe host (service/controller.go
// ControllerUnpublishVolume). The caller holds s.mu.
func (s *Sim) removeMappedHost(w http.ResponseWriter, v *volume, p actionParams) {
	if !strings.EqualFold(p.AllHosts, "TRUE") && p.HostID == "" {
		writeError(w, http.StatusBadRequest, codeNone, msgInvalidRequest+": hostId or allHosts is required")
		return
	}
	s.removeMappedSdc(w, v, actionParams{SdcID: p.HostID, AllSdcs: p.AllHosts})
}
