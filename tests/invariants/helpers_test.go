package invariants

import (
	"encoding/json"
	"os"
	"time"

	"github.com/fenced-project/fenced/arrayclients"
	"github.com/fenced-project/fenced/cluster/ledger"
	"github.com/fenced-project/fenced/tests/arraysim/simcore"
)

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// at is t0 plus ms milliseconds.
func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

const (
	cl    = "c1"
	node  = "worker-1"
	pflex = "pflex-1"
	pstor = "pstore-1"
	sdcID = "5a1f0c2e00000001"
	host  = "host-7f3e"
	// The footprint: web-0's volume v1 on pflex-1 and its log volume
	// 0a6e2b34 on pstore-1, as the drivers name their handles.
	pflexSys = "7f5d8fa37e2a1c0f"
	pstoreID = "PS4ebb8d4e8488"
	vol1     = "v1"
	vol2     = "0a6e2b34-5c1d-4f7e-9a8b-000000000001"
)

// footprint returns the record's footprint and the cut of each volume,
// with a read-back showing the node without access.
func footprint() ([]arrayclients.FootprintVolume, map[string][]arrayclients.VolumeCut, map[string][]arrayclients.VolumeCheck) {
	fv := []arrayclients.FootprintVolume{
		{KubeVolume: arrayclients.KubeVolume{PV: "pv-data", Attachment: AttachmentName(pflexSys+"-"+vol1, arrayclients.DriverPowerFlex, node),
			Driver: arrayclients.DriverPowerFlex, Handle: pflexSys + "-" + vol1, Attached: true},
			Placements: []arrayclients.Placement{{Array: pflex, VolumeRef: arrayclients.VolumeRef{Volume: "pv-data", Object: vol1,
				Protocol: arrayclients.ProtocolBlock, Attached: true}}}},
		{KubeVolume: arrayclients.KubeVolume{PV: "pv-log", Attachment: AttachmentName(vol2+"/"+pstoreID+"/scsi", arrayclients.DriverPowerStore, node),
			Driver: arrayclients.DriverPowerStore, Handle: vol2 + "/" + pstoreID + "/scsi", Attached: true},
			Placements: []arrayclients.Placement{{Array: pstor, VolumeRef: arrayclients.VolumeRef{Volume: "pv-log", Object: vol2,
				Protocol: arrayclients.ProtocolBlock, Attached: true}}}},
	}
	cuts := map[string][]arrayclients.VolumeCut{
		pflex: {{VolumeRef: fv[0].Placements[0].VolumeRef, Cut: arrayclients.CutSDCUnmap}},
		pstor: {{VolumeRef: fv[1].Placements[0].VolumeRef, Cut: arrayclients.CutHostInitiators}},
	}
	checks := map[string][]arrayclients.VolumeCheck{
		pflex: {{Volume: "pv-data", Object: vol1}},
		pstor: {{Volume: "pv-log", Object: vol2}},
	}
	return fv, cuts, checks
}

// run is a synthetic run under construction. good() returns one in which
// every invariant holds: worker-1 dies, is fenced on two arrays by leader
// a, its pod is deleted, it reboots and is restored.
type run struct {
	in   Inputs
	opts Options
}

func step(from, to ledger.FenceState, ms int, idx uint64, by string, term uint64) ledger.Step {
	return ledger.Step{From: from, To: to, At: at(ms), Index: idx, By: by, Term: term}
}

func audit(seq int64, ms int, replica, method, path, change string) simcore.AuditEntry {
	return simcore.AuditEntry{Seq: seq, Time: at(ms), Remote: replica + "/127.0.0.1:40000", Method: method,
		Path: path, Status: 200, Changed: change != "", Change: change}
}

func kube(ms int, user, verb, resource, ns, name string) KubeEvent {
	return KubeEvent{Stage: "ResponseComplete", Verb: verb, User: KubeUser{Username: user},
		ObjectRef: &KubeObjectRef{Resource: resource, Namespace: ns, Name: name},
		Response:  &KubeStatus{Code: 200}, Received: at(ms), Completed: at(ms + 5)}
}

func good() *run {
	ids := map[string]arrayclients.Identity{
		pflex: {Array: pflex, Family: arrayclients.PowerFlex, Node: node, ObjectID: sdcID, Keys: []string{"127.0.10.1"}},
		pstor: {Array: pstor, Family: arrayclients.PowerStore, Node: node, ObjectID: host, ObjectName: "csi-node-w1"},
	}
	fv, cuts, _ := footprint()
	fence := &ledger.Fence{
		ID: "fence-10", Cluster: cl, Node: node, Kind: ledger.KindUnfence, Origin: ledger.OriginVerdict,
		State: ledger.StateClosed, Identities: ids, IdentitiesKnown: true, BootID: "boot-1", UnfenceBootID: "boot-2",
		Plans: []arrayclients.Plan{{Array: pflex, Family: arrayclients.PowerFlex, Identity: ids[pflex], Volumes: cuts[pflex]},
			{Array: pstor, Family: arrayclients.PowerStore, Identity: ids[pstor], Volumes: cuts[pstor]}},
		Footprint: fv, FootprintRecorded: true,
		Steps: []ledger.Step{
			step("", ledger.StateIntent, 1000, 10, "a", 2),
			step(ledger.StateIntent, ledger.StateFencing, 2000, 11, "a", 2),
			step(ledger.StateFencing, ledger.StateFenced, 4000, 16, "a", 2),
			step(ledger.StateFenced, ledger.StateTainted, 5000, 17, "a", 2),
			step(ledger.StateTainted, ledger.StateEvicted, 6000, 18, "a", 2),
			step(ledger.StateEvicted, ledger.StateUnfenceIntent, 20000, 30, "a", 2),
			step(ledger.StateUnfenceIntent, ledger.StateRestored, 22000, 35, "a", 2),
			step(ledger.StateRestored, ledger.StateUntainted, 23000, 36, "a", 2),
			step(ledger.StateUntainted, ledger.StateClosed, 24000, 37, "a", 2),
		},
	}
	state := json.RawMessage(`{"sdcs":[{"id":"` + sdcID + `","connected":true}],"volumes":[{"id":"v1","mappedSdcInfo":[{"sdcId":"` + sdcID + `","accessMode":"ReadWrite"}]}]}`)
	pstate := json.RawMessage(`{"hosts":[{"id":"` + host + `","name":"csi-node-w1","initiators":[{"port_name":"iqn.1994-05.com.redhat:w1"}]}]}`)
	r := &run{
		in: Inputs{
			Kube: map[string][]KubeEvent{cl: {
				kube(4500, "fenced-a", "update", "nodes", "", node),
				kube(5500, "fenced-a", "delete", "pods", "db", "web-0"),
				kube(7000, "system:serviceaccount:kube-system:attachdetach-controller", "delete", "volumeattachments", "", fv[0].Attachment),
				kube(9000, "admin", "delete", "pods", "db", "web-1"), // not fenced's: not checked
				kube(22500, "fenced-a", "update", "nodes", "", node),
			}},
			Arrays: map[string][]simcore.AuditEntry{
				pflex: {
					audit(1, 1500, "b", "GET", "/api/types/Sdc/instances", ""),
					audit(2, 2500, "a", "POST", "/api/instances/Volume::v1/action/removeMappedSdc", "-$.volumes[v1].mappedSdcInfo["+sdcID+"]"),
					audit(3, 3000, "a", "GET", "/api/instances/Volume::v1", ""),
					audit(4, 21000, "a", "POST", "/api/instances/Volume::v1/action/addMappedSdc", "+$.volumes[v1].mappedSdcInfo["+sdcID+"]"),
					audit(5, 21500, "a", "GET", "/api/instances/Volume::v1", ""),
				},
				pstor: {
					audit(1, 2600, "a", "PATCH", "/api/rest/host/"+host, "-$.hosts["+host+"].initiators[iqn.1994-05.com.redhat:w1]"),
					audit(2, 3100, "a", "GET", "/api/rest/host/"+host, ""),
					audit(3, 21100, "a", "PATCH", "/api/rest/host/"+host, "+$.hosts["+host+"].initiators[iqn.1994-05.com.redhat:w1]"),
					audit(4, 21600, "a", "GET", "/api/rest/host/"+host, ""),
				},
			},
			ArrayStart: map[string]json.RawMessage{pflex: state, pstor: pstate},
			ArrayEnd: map[string]json.RawMessage{
				pflex: json.RawMessage(`{"sdcs":[{"id":"` + sdcID + `","connected":false}],"volumes":[{"id":"v1","mappedSdcInfo":[{"sdcId":"` + sdcID + `","accessMode":"ReadWrite"}]}]}`),
				pstor: pstate,
			},
			Placements: map[string][]Placement{cl: {
				{Time: at(-60000), Resource: "pods", Namespace: "db", Name: "web-0", Node: node},
				{Time: at(-60000), Resource: "pods", Namespace: "db", Name: "web-1", Node: "worker-2"},
				{Time: at(-50000), Resource: "volumeattachments", Name: fv[0].Attachment, Node: node},
				{Time: at(-50000), Resource: "volumeattachments", Name: fv[1].Attachment, Node: node},
				{Time: at(5600), Resource: "pods", Namespace: "db", Name: "web-0", Node: "worker-3"},
			}},
			Ledger: &History{
				Epochs: []ledger.Epoch{{Replica: "a", Term: 2, Index: 3, At: at(-120000)}},
				Fences: []*ledger.Fence{fence},
			},
			Timeline: []Event{
				{Time: at(-40000), Kind: NodeKill, Detail: cl + "/" + node},
				{Time: at(15000), Kind: NodeReboot, Detail: cl + "/" + node},
			},
		},
		opts: Options{
			FencedUsers: map[string]string{"fenced-a": "a", "fenced-b": "b", "fenced-c": "c"},
			Remotes:     map[string]string{"a": "a", "b": "b", "c": "c"},
		},
	}
	return r
}

// fence returns the run's only fence record.
func (r *run) fence() *ledger.Fence { return r.in.Ledger.Fences[0] }

// setStepAt moves the step entering state to ms.
func (r *run) setStepAt(to ledger.FenceState, ms int) {
	for i := range r.fence().Steps {
		if r.fence().Steps[i].To == to {
			r.fence().Steps[i].At = at(ms)
		}
	}
}

// truncateAfter drops the record's steps after the one entering state.
func (r *run) truncateAfter(to ledger.FenceState) {
	f := r.fence()
	for i, s := range f.Steps {
		if s.To == to {
			f.Steps = f.Steps[:i+1]
			f.State = to
			return
		}
	}
}

func (r *run) check() *Report { return Check(r.in, r.opts) }

func mkdirAll(dir string) error { return os.MkdirAll(dir, 0o755) }
