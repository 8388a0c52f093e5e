package powerflex

import (
	"encoding/json"
	"net/http"
)

type link struct {
	Rel  string `json:"rel"`
	HREF string `json:"href"`
}

type systemJSON struct {
	ID                       string `json:"id"`
	Name                     string `json:"name,omitempty"`
	MdmMode                  string `json:"mdmMode"`
	MdmClusterState          string `json:"mdmClusterState"`
	SystemVersionName        string `json:"systemVersionName"`
	RestrictedSdcModeEnabled bool   `json:"restrictedSdcModeEnabled"`
	RestrictedSdcMode        string `json:"restrictedSdcMode"`
	Links                    []link `json:"links"`
}

type sdcJSON struct {
	ID                 string   `json:"id"`
	Name               string   `json:"name"`
	SdcGUID            string   `json:"sdcGuid"`
	SdcIP              string   `json:"sdcIp"`
	SdcIPs             []string `json:"sdcIps"`
	MdmConnectionState string   `json:"mdmConnectionState"`
	SdcApproved        bool     `json:"sdcApproved"`
	SystemID           string   `json:"systemId"`
	HostType           string   `json:"hostType"`
	NQN                string   `json:"nqn,omitempty"`
	OSType             string   `json:"osType"`
	OnVMWare           bool     `json:"onVmWare"`
	PerfProfile        string   `json:"perfProfile"`
	Links              []link   `json:"links"`
}

type mappedSdcInfoJSON struct {
	SdcID                 string `json:"sdcId"`
	SdcIP                 string `json:"sdcIp"`
	SdcName               string `json:"sdcName"`
	LimitIops             int    `json:"limitIops"`
	LimitBwInMbps         int    `json:"limitBwInMbps"`
	AccessMode            string `json:"accessMode"`
	IsDirectBufferMapping bool   `json:"isDirectBufferMapping"`
	HostType              string `json:"hostType"`
}

type volumeJSON struct {
	ID                      string              `json:"id"`
	Name                    string              `json:"name"`
	SizeInKb                int                 `json:"sizeInKb"`
	StoragePoolID           string              `json:"storagePoolId"`
	VolumeType              string              `json:"volumeType"`
	AncestorVolumeID        string              `json:"ancestorVolumeId,omitempty"`
	MappingToAllSdcsEnabled bool                `json:"mappingToAllSdcsEnabled"`
	AccessModeLimit         string              `json:"accessModeLimit"`
	MappedSdcInfo           []mappedSdcInfoJSON `json:"mappedSdcInfo,omitempty"`
	Links                   []link              `json:"links"`
}

type bwc struct {
	TotalWeightInKb int `json:"totalWeightInKb"`
	NumOccured      int `json:"numOccured"`
	NumSeconds      int `json:"numSeconds"`
}

type sdcStatisticsJSON struct {
	UserDataReadBwc         bwc      `json:"userDataReadBwc"`
	UserDataWriteBwc        bwc      `json:"userDataWriteBwc"`
	UserDataTrimBwc         bwc      `json:"userDataTrimBwc"`
	UserDataSdcReadLatency  bwc      `json:"userDataSdcReadLatency"`
	UserDataSdcWriteLatency bwc      `json:"userDataSdcWriteLatency"`
	UserDataSdcTrimLatency  bwc      `json:"userDataSdcTrimLatency"`
	VolumeIDs               []string `json:"volumeIds"`
	NumOfMappedVolumes      int      `json:"numOfMappedVolumes"`
}

// properties returns the statistics by their JSON names, as an SDC's
// relationships/Statistics shows them.
func (st sdcStatisticsJSON) properties() (map[string]json.RawMessage, error) {
	b, err := json.Marshal(st)
	if err != nil {
		return nil, err
	}
	var out map[string]json.RawMessage
	err = json.Unmarshal(b, &out)
	return out, err
}

type volumeMetricsJSON struct {
	ReadBwc  bwc    `json:"readBwc"`
	WriteBwc bwc    `json:"writeBwc"`
	VolumeID string `json:"volumeId"`
	SdcID    string `json:"sdcId"`
}

// The caller of the *JSON methods holds s.mu (read or write).

func (s *Sim) systemJSON(sys *system) systemJSON {
	self := "/api/instances/System::" + sys.ID
	return systemJSON{
		ID: sys.ID, Name: sys.Name, MdmMode: "ThreeNodes", MdmClusterState: "ClusteredNormal",
		SystemVersionName: "DellEMC PowerFlex Version: R" + s.version, RestrictedSdcMode: "None",
		Links: []link{
			{Rel: "self", HREF: self},
			{Rel: "/api/System/relationship/Statistics", HREF: self + "/relationships/Statistics"},
			{Rel: "/api/System/relationship/Sdc", HREF: self + "/relationships/Sdc"},
			{Rel: "/api/System/relationship/Volume", HREF: self + "/relationships/Volume"},
		},
	}
}

func (s *Sim) sdcJSON(c *sdc) sdcJSON {
	self := "/api/instances/Sdc::" + c.ID
	state := "Disconnected"
	if c.Connected {
		state = "Connected"
	}
	ip := ""
	if len(c.IPs) > 0 {
		ip = c.IPs[0]
	}
	return sdcJSON{
		ID: c.ID, Name: c.Name, SdcGUID: c.GUID, SdcIP: ip, SdcIPs: append([]string(nil), c.IPs...),
		MdmConnectionState: state, SdcApproved: true, SystemID: c.SystemID, HostType: c.hostType(), NQN: c.NQN,
		OSType: "Linux", PerfProfile: "HighPerformance",
		Links: []link{
			{Rel: "self", HREF: self},
			{Rel: "/api/Sdc/relationship/Statistics", HREF: self + "/relationships/Statistics"},
			{Rel: "/api/Sdc/relationship/Volume", HREF: self + "/relationships/Volume"},
			{Rel: "/api/parent/relationship/systemId", HREF: "/api/instances/System::" + c.SystemID},
		},
	}
}

func (s *Sim) volumeJSON(v *volume) volumeJSON {
	self := "/api/instances/Volume::" + v.ID
	out := volumeJSON{
		ID: v.ID, Name: v.Name, SizeInKb: v.SizeInKb, StoragePoolID: derivedID("pool", v.SystemID),
		VolumeType: "ThinProvisioned", AccessModeLimit: AccessReadWrite,
		Links: []link{
			{Rel: "self", HREF: self},
			{Rel: "/api/Volume/relationship/Statistics", HREF: self + "/relationships/Statistics"},
		},
	}
	for _, m := range v.Mappings {
		info := mappedSdcInfoJSON{
			SdcID: m.SdcID, LimitIops: m.LimitIops, LimitBwInMbps: m.LimitBwInMbps,
			AccessMode: m.AccessMode, HostType: "SdcHost",
		}
		if c, ok := s.sdcs[m.SdcID]; ok {
			info.SdcName, info.HostType = c.Name, c.hostType()
			if len(c.IPs) > 0 {
				info.SdcIP = c.IPs[0]
			}
		}
		out.MappedSdcInfo = append(out.MappedSdcInfo, info)
	}
	return out
}

func (s *Sim) sdcStatistics(c *sdc) sdcStatisticsJSON {
	return sdcStatisticsOf(c, s.mappedVolumesLocked(map[string]bool{c.ID: true})[c.ID])
}

// mappedVolumesLocked returns the IDs of the volumes mapped to each SDC of
// sdcs, sorted, reading every volume once (as the MDM keeps each SDC's
// mappings, a bulk statistics read costs the array no scan per SDC).
func (s *Sim) mappedVolumesLocked(sdcs map[string]bool) map[string][]string {
	out := make(map[string][]string, len(sdcs))
	for _, k := range sortedKeys(s.volumes) {
		for _, m := range s.volumes[k].Mappings {
			if sdcs[m.SdcID] {
				out[m.SdcID] = append(out[m.SdcID], k)
			}
		}
	}
	return out
}

// sdcStatisticsOf is the statistics of SDC c with the volumes vols mapped.
func sdcStatisticsOf(c *sdc, vols []string) sdcStatisticsJSON {
	out := sdcStatisticsJSON{VolumeIDs: append([]string{}, vols...)}
	out.NumOfMappedVolumes = len(out.VolumeIDs)
	// An SDC sends user data only to volumes mapped to it: with none
	// mapped (a fenced SDC) its window counts no I/O, whatever the node
	// tries (IOActive says it would).
	io := ioCounters(c.IOActive && len(out.VolumeIDs) > 0)
	out.UserDataReadBwc, out.UserDataWriteBwc = io, io
	idle := ioCounters(false)
	out.UserDataTrimBwc, out.UserDataSdcReadLatency = idle, idle
	out.UserDataSdcWriteLatency, out.UserDataSdcTrimLatency = idle, idle
	return out
}

// ioCounters is one array-computed statistics window: I/Os seen in the
// last NumSeconds seconds.
func ioCounters(active bool) bwc {
	if !active {
		return bwc{NumSeconds: 1}
	}
	return bwc{NumOccured: 120, NumSeconds: 1, TotalWeightInKb: 480}
}

// writeJSON replies 200 with v.
func writeJSON(w http.ResponseWriter, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		writeError(w, http.StatusInternalServerError, codeNone, "marshal: "+err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json;charset=UTF-8")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
}

// writeError replies with PowerFlex's error body.
func writeError(w http.ResponseWriter, status, code int, msg string) {
	w.Header().Set("Content-Type", "application/json;charset=UTF-8")
	w.WriteHeader(status)
	_, _ = w.Write(errorBody(status, code, msg))
}

// allow checks the method and replies 405 when it is wrong.
func allow(w http.ResponseWriter, r *http.Request, method string) bool {
	if r.Method == method {
		return true
	}
	w.Header().Set("Allow", method)
	writeError(w, http.StatusMethodNotAllowed, codeNone, "method "+r.Method+" not allowed")
	return false
}
