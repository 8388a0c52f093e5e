package e2e

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fenced-project/fenced/arrayclients"
	"github.com/fenced-project/fenced/tests/invariants"
	"github.com/fenced-project/fenced/tests/testbed"
)

// podVolume is the volume of a StatefulSet pod, as Kubernetes and the
// array know it.
type podVolume struct {
	PV, Driver, Handle string
	Family             arrayclients.Family
	Object             string
	// NFS: a file system exported over NFS (Object is its ID).
	NFS bool
}

// volumeOf returns the volume of a StatefulSet pod (its one claim, data).
func volumeOf(t *testing.T, h *Harness, p corev1.Pod) podVolume {
	t.Helper()
	i := strings.LastIndexByte(p.Name, '-')
	ord, err := strconv.Atoi(p.Name[i+1:])
	require.NoError(t, err, "pod %s", p.Name)
	pv, err := h.CP.Client.CoreV1().PersistentVolumes().Get(h.ctx, testbed.PVName(p.Namespace, p.Name[:i], ord), metav1.GetOptions{})
	require.NoError(t, err)
	require.NotNil(t, pv.Spec.CSI)
	v := podVolume{PV: pv.Name, Driver: pv.Spec.CSI.Driver, Handle: pv.Spec.CSI.VolumeHandle}
	v.Family = arrayclients.DefaultDrivers()[v.Driver]
	loc, err := arrayclients.ParseVolumeHandle(v.Family, v.Handle, pv.Spec.CSI.FSType)
	require.NoError(t, err)
	v.Object, v.NFS = loc.Object, loc.Protocol == arrayclients.ProtocolNFS
	return v
}

// waitAttached waits until Kubernetes shows each pod's volume attached to
// its node (the emulated driver published it), as a kubelet waits before
// it starts the pod.
func waitAttached(t *testing.T, h *Harness, pods map[string]corev1.Pod) {
	t.Helper()
	for node, p := range pods {
		v := volumeOf(t, h, p)
		waitVA(t, h, v, node)
	}
}

// waitVA waits until the VolumeAttachment of the volume to the node is
// attached, failing at once on an attach error that persists.
func waitVA(t *testing.T, h *Harness, v podVolume, node string) {
	t.Helper()
	name := invariants.AttachmentName(v.Handle, v.Driver, node)
	h.wait(waitRecovery, "volume "+v.PV+" attached to "+node, func() (bool, string) {
		va, err := h.CP.Client.StorageV1().VolumeAttachments().Get(h.ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		msg := fmt.Sprintf("attached=%v", va.Status.Attached)
		if e := va.Status.AttachError; e != nil {
			msg += " error: " + e.Message
		}
		return va.Status.Attached, msg
	})
}

// csiNodeID is the node ID the driver reported for the node.
func csiNodeID(t *testing.T, h *Harness, node, driver string) string {
	t.Helper()
	cn, err := h.CP.Client.StorageV1().CSINodes().Get(h.ctx, node, metav1.GetOptions{})
	require.NoError(t, err)
	for _, d := range cn.Spec.Drivers {
		if d.Name == driver {
			return d.NodeID
		}
	}
	t.Fatalf("CSINode %s has no driver %s", node, driver)
	return ""
}

// givenTo returns the identities (SDC and NVMe host IDs, host IDs, CSI
// node IDs of the NFS clients) the array's state
// gives the volume to, and the identity the driver's node ID names on it.
func givenTo(t *testing.T, h *Harness, v podVolume, node string) (holders []string, nodeIdentity string) {
	t.Helper()
	nodeID := csiNodeID(t, h, node, v.Driver)
	if v.NFS && (v.Family == arrayclients.PowerFlex || v.Family == arrayclients.PowerStore) {
		return exportedTo(t, h, v), nodeID
	}
	for _, a := range h.Arrays {
		raw, err := a.State()
		require.NoError(t, err)
		switch {
		case v.Family == arrayclients.PowerFlex && a.Family == "powerflex":
			var st struct {
				Sdcs []struct {
					ID       string `json:"id"`
					Name     string `json:"name"`
					GUID     string `json:"sdcGuid"`
					HostType string `json:"hostType"`
				} `json:"sdcs"`
				Volumes []struct {
					ID     string `json:"id"`
					Mapped []struct {
						SdcID string `json:"sdcId"`
					} `json:"mappedSdcInfo"`
				} `json:"volumes"`
			}
			require.NoError(t, json.Unmarshal(raw, &st))
			for _, s := range st.Sdcs {
				// An SDC by GUID; an NVMe/TCP node's NVMe host by its name
				// (csi-vxflexos: FindSdc("Name", nodeID)).
				if (s.GUID != "" && strings.EqualFold(s.GUID, nodeID)) || (s.HostType == "NVMeHost" && s.Name == nodeID) {
					nodeIdentity = s.ID
				}
			}
			for _, vol := range st.Volumes {
				if vol.ID == v.Object {
					for _, m := range vol.Mapped {
						holders = append(holders, m.SdcID)
					}
					return holders, nodeIdentity
				}
			}
		case v.Family == arrayclients.PowerStore && a.Family == "powerstore":
			var st struct {
				Hosts []struct {
					ID   string `json:"id"`
					Name string `json:"name"`
				} `json:"hosts"`
				Mappings []struct {
					HostID   string `json:"hostId"`
					VolumeID string `json:"volumeId"`
				} `json:"mappings"`
			}
			require.NoError(t, json.Unmarshal(raw, &st))
			found := false
			for _, m := range st.Mappings {
				if m.VolumeID == v.Object {
					holders = append(holders, m.HostID)
				}
			}
			for _, hs := range st.Hosts {
				if hs.Name == nodeID {
					nodeIdentity = hs.ID
					found = true
				}
			}
			if found || len(holders) > 0 {
				return holders, nodeIdentity
			}
		case v.Family == arrayclients.Unity && a.Family == "unity":
			// Hosts are named by the node's long name, with an IP port
			// for it (fixture and csi-unity service/node.go).
			var st struct {
				Hosts []struct {
					ID   string `json:"id"`
					Name string `json:"name"`
				} `json:"hosts"`
				LUNs []struct {
					ID         string `json:"id"`
					HostAccess []struct {
						Host string `json:"host"`
					} `json:"hostAccess"`
				} `json:"luns"`
			}
			require.NoError(t, json.Unmarshal(raw, &st))
			short, long, _ := strings.Cut(nodeID, ",")
			for _, hs := range st.Hosts {
				if hs.Name == long || hs.Name == short {
					nodeIdentity = hs.ID
				}
			}
			if v.NFS {
				// csi-unity exports a file system through its shares'
				// host lists (service/controller.go exportFilesystem).
				var fs struct {
					Shares []struct {
						Filesystem string   `json:"filesystem"`
						RO         []string `json:"readOnlyHosts"`
						RW         []string `json:"readWriteHosts"`
						RORoot     []string `json:"readOnlyRootAccessHosts"`
						Root       []string `json:"rootAccessHosts"`
					} `json:"nfsShares"`
				}
				require.NoError(t, json.Unmarshal(raw, &fs))
				found := false
				for _, sh := range fs.Shares {
					if sh.Filesystem == v.Object {
						found = true
						holders = append(holders, slices.Concat(sh.RO, sh.RW, sh.RORoot, sh.Root)...)
					}
				}
				if found {
					slices.Sort(holders)
					return slices.Compact(holders), nodeIdentity
				}
				continue
			}
			for _, l := range st.LUNs {
				if l.ID == v.Object {
					for _, acc := range l.HostAccess {
						holders = append(holders, acc.Host)
					}
					return holders, nodeIdentity
				}
			}
		case v.Family == arrayclients.PowerMax && a.Family == "powermax":
			// The hosts of the masking views of the volume's storage
			// groups; the node's is csi-node-<prefix>-<node ID>.
			var st struct {
				Views []struct {
					Host         string `json:"hostId"`
					StorageGroup string `json:"storageGroupId"`
				} `json:"maskingViews"`
				Volumes []struct {
					ID     string   `json:"volumeId"`
					Groups []string `json:"storageGroupId"`
				} `json:"volumes"`
			}
			require.NoError(t, json.Unmarshal(raw, &st))
			prefix, _ := a.Spec["generate"].(map[string]any)["clusterPrefix"].(string)
			node, _, _ := strings.Cut(nodeID, ".")
			nodeIdentity = "csi-node-" + prefix + "-" + node
			for _, vol := range st.Volumes {
				if vol.ID == v.Object {
					for _, mv := range st.Views {
						if slices.Contains(vol.Groups, mv.StorageGroup) {
							holders = append(holders, mv.Host)
						}
					}
					return holders, nodeIdentity
				}
			}
		case v.Family == arrayclients.PowerScale && a.Family == "powerscale":
			// Clients are nodes by IP, name or FQDN: each node the export
			// lists in any form is named by its CSI node ID (localhost,
			// which csi-isilon adds to every export, is nobody).
			var st struct {
				Exports []struct {
					ID               int      `json:"id"`
					Clients          []string `json:"clients"`
					RootClients      []string `json:"root_clients"`
					ReadWriteClients []string `json:"read_write_clients"`
					ReadOnlyClients  []string `json:"read_only_clients"`
				} `json:"exports"`
			}
			require.NoError(t, json.Unmarshal(raw, &st))
			nodeIdentity = nodeID
			for _, ex := range st.Exports {
				if strconv.Itoa(ex.ID) != v.Object {
					continue
				}
				all := slices.Concat(ex.Clients, ex.RootClients, ex.ReadWriteClients, ex.ReadOnlyClients)
				for _, n := range h.NodesOf(ClusterName) {
					id := csiNodeID(t, h, n, v.Driver)
					forms := strings.Split(id, "=#=#=")
					if slices.ContainsFunc(forms, func(f string) bool { return slices.Contains(all, f) }) {
						holders = append(holders, id)
					}
				}
				return holders, nodeIdentity
			}
		}
	}
	t.Fatalf("no array of family %s holds volume %s (%s)", v.Family, v.PV, v.Object)
	return nil, ""
}

// requireGivenOnlyTo asserts that the array gives the volume to the node
// and to nothing else.
func requireGivenOnlyTo(t *testing.T, h *Harness, v podVolume, node string) {
	t.Helper()
	holders, id := givenTo(t, h, v, node)
	require.NotEmpty(t, id, "node %s has no identity on the array of %s", node, v.PV)
	slices.Sort(holders)
	require.Equal(t, []string{id}, holders, "volume %s (%s) should be given only to %s (%s)", v.PV, v.Object, node, id)
}

// exportedTo returns the CSI node IDs of the cluster's nodes that an NFS
// export of the PowerFlex or PowerStore file system v lists in any of its
// host lists, by the node's InternalIP in any mask form (the drivers add
// "<ip>/255.255.255.255"; csi-vxflexos service/controller.go,
// csi-powerstore pkg/controller/controller.go).
func exportedTo(t *testing.T, h *Harness, v podVolume) []string {
	t.Helper()
	family := map[arrayclients.Family]string{arrayclients.PowerFlex: "powerflex", arrayclients.PowerStore: "powerstore"}[v.Family]
	var entries []string
	found := false
	for _, a := range h.Arrays {
		if a.Family != family {
			continue
		}
		raw, err := a.State()
		require.NoError(t, err)
		var st struct {
			Exports []struct {
				FS1    string   `json:"file_system_id"`
				FS2    string   `json:"fileSystemId"`
				RO     []string `json:"read_only_hosts"`
				RORoot []string `json:"read_only_root_hosts"`
				RW     []string `json:"read_write_hosts"`
				RWRoot []string `json:"read_write_root_hosts"`
			} `json:"nfsExports"`
			FileSystems []struct {
				ID string `json:"id"`
			} `json:"fileSystems"`
		}
		require.NoError(t, json.Unmarshal(raw, &st))
		for _, fs := range st.FileSystems {
			found = found || fs.ID == v.Object
		}
		for _, ex := range st.Exports {
			if ex.FS1 == v.Object || ex.FS2 == v.Object {
				entries = append(entries, slices.Concat(ex.RO, ex.RORoot, ex.RW, ex.RWRoot)...)
			}
		}
	}
	require.True(t, found, "no %s array holds file system %s (%s)", v.Family, v.Object, v.PV)
	var holders []string
	for _, n := range h.NodesOf(ClusterName) {
		ip := nodeIP(t, h, n)
		if slices.ContainsFunc(entries, func(e string) bool { host, _, _ := strings.Cut(e, "/"); return host == ip }) {
			holders = append(holders, csiNodeID(t, h, n, v.Driver))
		}
	}
	return holders
}

// nodeIP returns a node's InternalIP.
func nodeIP(t *testing.T, h *Harness, node string) string {
	t.Helper()
	n, err := h.CP.Client.CoreV1().Nodes().Get(h.ctx, node, metav1.GetOptions{})
	require.NoError(t, err)
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			return a.Address
		}
	}
	t.Fatalf("node %s has no InternalIP", node)
	return ""
}
