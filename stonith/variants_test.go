package stonith

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/arrayclients"
	"github.com/fenced-project/fenced/arrayclients/powerscale"
)

// TestDriverNamingVariants drives every node-ID and host-naming variant of
// Dell's CSI drivers (shared reference csi-drivers.md, read from each
// driver's source) through the simulators, the real adapters, the real
// ledger and Controller.PlanNode: each row either plans the family's cut
// for the node's volume (protected) or names the gap that leaves the node
// unprotected. No row is allowed to come out silently protected, and a row
// the simulators cannot hold skips naming exactly what they lack.
//
// Expected outcomes are the design's (docs/footprint.md): what this version
// cannot cut is a named gap; issue 18 turns most of them into cuts.
func TestDriverNamingVariants(t *testing.T) {
	for _, r := range variantRows() {
		t.Run(r.name, func(t *testing.T) {
			if r.skip != "" {
				t.Skip(r.skip)
			}
			b := newVariantBed(t, r.fixture)
			r.build(b)
			p := b.plan()
			r.want.check(t, p)
		})
	}
}

// variantRow is one naming variant.
type variantRow struct {
	// name is <family>/<variant>.
	name string
	// fixture holds the arrays as the driver leaves them for the variant.
	fixture string
	// build names the node as its CSINode shows it, attaches its volume
	// with the handle the driver writes, and adjusts the configuration.
	build func(b *variantBed)
	want  variantWant
	// skip names what the simulators lack to hold the variant.
	skip string
}

// variantWant is a row's expected plan for its one volume, vbPV: protected
// with Cut on Arrays arrays (default 1), or unprotected by Gap.
type variantWant struct {
	cut    arrayclients.Cut
	arrays int
	gap    arrayclients.GapReason
	// note says which later change turns a gap into a cut, for the report.
	note string
}

// vbPV is the PersistentVolume every row attaches to its node.
const vbPV = "pvc-variant"

func (w variantWant) check(t *testing.T, p NodePlan) {
	t.Helper()
	if w.gap != "" {
		require.False(t, p.Protected, "a node whose volume fenced cannot cut must not be protected: %+v", p)
		require.Len(t, p.Gaps, 1, "gaps %v", p.Gaps)
		g := p.Gaps[0]
		assert.Equal(t, vbPV, g.Volume, "the gap names the volume")
		assert.Equal(t, w.gap, g.Reason, "gap %s", g)
		assert.NotEmpty(t, g.Detail)
		t.Logf("named gap: %s; later: %s", g, w.note)
		return
	}
	require.Empty(t, p.Gaps, "unexpected gaps")
	require.True(t, p.Protected, "plan %+v", p)
	want := max(w.arrays, 1)
	got := 0
	for _, a := range p.Arrays {
		assert.Empty(t, a.Error, a.Array)
		for _, vc := range a.Volumes {
			if vc.Volume == vbPV {
				got++
				assert.Equal(t, w.cut, vc.Cut, "cut on %s", a.Array)
				assert.Nil(t, vc.Gap)
				t.Logf("cut on %s (%s): %s", a.Array, a.Identity, vc.Cut)
			}
		}
	}
	assert.Equal(t, want, got, "arrays planning a cut of the volume: %+v", p.Arrays)
}

func cut(c arrayclients.Cut) variantWant { return variantWant{cut: c} }

func gap(r arrayclients.GapReason, note string) variantWant { return variantWant{gap: r, note: note} }

// Node IDs as each driver's node plugin reports them in CSINode.

// vbNode is a Kubernetes node with one driver's CSINode ID.
func vbNode(name, ip, driver, nodeID string) arrayclients.Node {
	return arrayclients.Node{Cluster: "c1", Name: name, Addresses: []string{ip},
		CSINodeIDs: map[string]string{driver: nodeID}}
}

// pflexNVMeNodeID is csi-vxflexos's NVMe/TCP node ID: "<node IP>-<hex
// sha256 of the Node UID>" cut to 31 characters (service/service.go
// generateNodeID).
func pflexNVMeNodeID(ip, uid string) string {
	sum := sha256.Sum256([]byte(uid))
	return (ip + "-" + hex.EncodeToString(sum[:]))[:31]
}

// psNodeID is csi-powerstore's node ID: <prefix>-<machine ID>-<IP>
// (pkg/node/node.go).
func psNodeID(machineID, ip string) string { return "csi-node-" + machineID + "-" + ip }

// pmaxNodeID is csi-powermax's node ID: the node name cut at the first dot
// (service/service.go).
func pmaxNodeID(name string) string {
	short, _, _ := strings.Cut(name, ".")
	return short
}

// unityNodeID is csi-unity's node ID: <short>,<long>, long the node name,
// short long cut at the first dot, or the IP itself when long is an IP
// (service/node.go, service/service.go).
func unityNodeID(name string) string {
	short := name
	if net.ParseIP(name) == nil {
		short, _, _ = strings.Cut(name, ".")
	}
	return short + "," + name
}

// pscaleNodeID is csi-isilon's node ID: <name>=#=#=<FQDN>=#=#=<IP>, the FQDN
// part being the IP when reverse DNS fails (service/node.go).
func pscaleNodeID(name, fqdn, ip string) string { return name + "=#=#=" + fqdn + "=#=#=" + ip }

// ---- PowerFlex -------------------------------------------------------

const (
	vbPFlexGUID = "6A1B0001-0000-4000-8000-000000000001"
	vbPFlexUID  = "5f1c9a4e-7b2d-4c3e-9f10-2a6b8c0d4e71" // worker-2's Node UID
)

// vbPFlexFixture: worker-1 runs an SDC (node ID = its GUID); worker-2 is an
// NVMe/TCP node whose NVMe host csi-vxflexos created under its node ID;
// worker-3 has neither (NFS-only: node ID = Node UID). Volume and file
// system IDs are fixed so handles can name them; each file system's export
// lists one node's IP as csi-vxflexos adds it.
var vbPFlexFixture = fmt.Sprintf(`
arrays:
  - name: pflex-1
    family: powerflex
    spec:
      systems: [{id: %[1]s, name: pflexsys}]
      sdcs:
        - {name: worker-1, guid: %[2]s, ips: [127.0.10.1]}
        - {name: %[3]s, hostType: NVMeHost, nqn: "nqn.2014-08.org.nvmexpress:uuid:worker-2"}
      volumes:
        - {id: "0000000000000101", name: k8s-sdc, mappings: [{sdc: worker-1}]}
        - {id: "0000000000000102", name: k8s-nvme, mappings: [{sdc: %[3]s}]}
        - {id: "0000000000000103", name: k8s-unmapped}
      fileSystems:
        - id: 64a1f0e2-3b4c-5d6e-7f80-91a2b3c4d5e6
          name: k8s-nfs-w3
          export: {readWriteRootHosts: [127.0.10.3/255.255.255.255]}
        - id: 74a1f0e2-3b4c-5d6e-7f80-91a2b3c4d5e6
          name: k8s-nfs-w1
          export: {readWriteRootHosts: [127.0.10.1/255.255.255.255]}
`, vbPFlexSystem, vbPFlexGUID, pflexNVMeNodeID("127.0.10.2", vbPFlexUID))

func pflexRows() []variantRow {
	sdcNode := func(b *variantBed) {
		b.node = vbNode("worker-1", "127.0.10.1", arrayclients.DriverPowerFlex, vbPFlexGUID)
	}
	return []variantRow{
		{name: "powerflex/sdc-guid", fixture: vbPFlexFixture, want: cut(arrayclients.CutSDCUnmap), build: func(b *variantBed) {
			sdcNode(b)
			b.attach(vbPV, arrayclients.DriverPowerFlex, vbPFlexSystem+"-0000000000000101")
		}},
		{name: "powerflex/handle-names-system-by-name", fixture: vbPFlexFixture, want: cut(arrayclients.CutSDCUnmap), build: func(b *variantBed) {
			sdcNode(b)
			b.cfgs["pflex-1"].ArrayIDs = []string{vbPFlexSystem, "pflexsys"}
			b.attach(vbPV, arrayclients.DriverPowerFlex, "pflexsys-0000000000000101")
		}},
		{name: "powerflex/legacy-bare-volume-id-on-default-system", fixture: vbPFlexFixture, want: cut(arrayclients.CutSDCUnmap), build: func(b *variantBed) {
			sdcNode(b)
			b.cfgs["pflex-1"].CSIDefault = true
			b.attach(vbPV, arrayclients.DriverPowerFlex, "0000000000000101")
		}},
		{name: "powerflex/nvme-tcp-host", fixture: vbPFlexFixture, want: cut(arrayclients.CutNVMeUnmap),
			build: func(b *variantBed) {
				// The node ID names the NVMe host: its volume is unmapped
				// from that host (RemoveMappedHost).
				b.node = vbNode("worker-2", "127.0.10.2", arrayclients.DriverPowerFlex, pflexNVMeNodeID("127.0.10.2", vbPFlexUID))
				b.attach(vbPV, arrayclients.DriverPowerFlex, vbPFlexSystem+"-0000000000000102")
			}},
		{name: "powerflex/nfs-only-node-uid", fixture: vbPFlexFixture, want: cut(arrayclients.CutNFSExportHosts),
			build: func(b *variantBed) {
				// No SDC: the node is known by its IP, which csi-vxflexos
				// put on the file system's export.
				b.node = vbNode("worker-3", "127.0.10.3", arrayclients.DriverPowerFlex, "0c6e2f4a-1d3b-4a5c-8e7f-9b0a1c2d3e4f")
				b.attach(vbPV, arrayclients.DriverPowerFlex, vbPFlexSystem+"/64a1f0e2-3b4c-5d6e-7f80-91a2b3c4d5e6")
			}},
		{name: "powerflex/nfs-volume-on-sdc-node", fixture: vbPFlexFixture, want: cut(arrayclients.CutNFSExportHosts),
			build: func(b *variantBed) {
				// The export lists the SDC's IP (the driver's fallback
				// when the ConfigMap names no interfaces).
				sdcNode(b)
				b.attach(vbPV, arrayclients.DriverPowerFlex, vbPFlexSystem+"/74a1f0e2-3b4c-5d6e-7f80-91a2b3c4d5e6")
			}},
		{name: "powerflex/system-not-configured", fixture: vbPFlexFixture,
			want: gap(arrayclients.GapArrayNotConfigured, "configuration drift: stays a gap"),
			build: func(b *variantBed) {
				sdcNode(b)
				b.attach(vbPV, arrayclients.DriverPowerFlex, "7f6e5d4c3b2a1908-0000000000000101")
			}},
		{name: "powerflex/attach-not-reached-the-array", fixture: vbPFlexFixture, want: cut(arrayclients.CutNotMapped), build: func(b *variantBed) {
			sdcNode(b)
			b.attach(vbPV, arrayclients.DriverPowerFlex, vbPFlexSystem+"-0000000000000103")
			b.vols[0].Attached = false
		}},
	}
}

// ---- PowerStore ------------------------------------------------------

const (
	vbPSMachine  = "0a1b2c3d4e5f60718293a4b5c6d7e8f9"
	vbPSMachine2 = "1a1b2c3d4e5f60718293a4b5c6d7e8f9"
)

// vbPSHosts is a PowerStore spec's hosts: worker-1's host named by its node
// ID with the volume attached; worker-2's host named by the node ID without
// the IP (the controller's fallback); worker-5 came back with a new IP: the
// driver registered a new host with its initiators and left the old one
// (whose initiators a fence had removed) behind, empty. File systems are
// NFS volumes csi-powerstore published to worker-1 and worker-6 (its IP in
// RWRootHosts), and one an operator opened to the nodes' subnet.
func vbPSHosts(volume string) string {
	return fmt.Sprintf(`
      fileSystems:
        - {name: k8s-nfs-1, readWriteRootHosts: [127.0.10.1]}
        - {name: k8s-nfs-6, readWriteRootHosts: [127.0.10.6]}
        - {name: k8s-nfs-subnet, readWriteRootHosts: [127.0.10.1], readWriteHosts: [127.0.10.0/24]}
      hosts:
        - name: %[1]s
          initiators: [{portName: "iqn.1994-05.com.redhat:worker-1", portType: iSCSI}]
          volumes: [{volume: %[3]s, lun: 1}]
        - name: csi-node-%[2]s
          initiators: [{portName: "iqn.1994-05.com.redhat:worker-2", portType: iSCSI}]
          volumes: [{volume: %[3]s-2, lun: 1}]
        - name: %[4]s
        - name: %[5]s
          initiators: [{portName: "iqn.1994-05.com.redhat:worker-5", portType: iSCSI}]
          volumes: [{volume: %[3]s-5, lun: 1}]`,
		psNodeID(vbPSMachine, "127.0.10.1"), vbPSMachine2, volume,
		psNodeID("5a1b2c3d4e5f60718293a4b5c6d7e8f9", "127.0.10.5"), psNodeID("5a1b2c3d4e5f60718293a4b5c6d7e8f9", "127.0.20.5"))
}

// vbPSFixture: two arrays, a metro pair; csi-powerstore registers the node's
// host on every array of its secret.
var vbPSFixture = `
arrays:
  - name: pstore-1
    family: powerstore
    spec:` + vbPSHosts("k8s-vol") + `
  - name: pstore-2
    family: powerstore
    spec:` + vbPSHosts("k8s-vol-metro")

func psRows() []variantRow {
	w1 := func(b *variantBed) {
		b.node = vbNode("worker-1", "127.0.10.1", arrayclients.DriverPowerStore, psNodeID(vbPSMachine, "127.0.10.1"))
	}
	vol := func(b *variantBed, array, name string) string { return b.objectID(array, "volumes", name) }
	only1 := func(b *variantBed) { delete(b.cfgs, "pstore-2") }
	return []variantRow{
		{name: "powerstore/host-named-by-node-id", fixture: vbPSFixture, want: cut(arrayclients.CutHostInitiators), build: func(b *variantBed) {
			w1(b)
			b.attach(vbPV, arrayclients.DriverPowerStore, vol(b, "pstore-1", "k8s-vol")+"/"+vbPSGlobal1+"/scsi")
		}},
		{name: "powerstore/host-named-without-ip", fixture: vbPSFixture, want: cut(arrayclients.CutHostInitiators), build: func(b *variantBed) {
			only1(b)
			b.node = vbNode("worker-2", "127.0.10.2", arrayclients.DriverPowerStore, psNodeID(vbPSMachine2, "127.0.10.2"))
			b.attach(vbPV, arrayclients.DriverPowerStore, vol(b, "pstore-1", "k8s-vol-2")+"/"+vbPSGlobal1+"/scsi")
		}},
		{name: "powerstore/node-back-with-new-ip", fixture: vbPSFixture, want: cut(arrayclients.CutHostInitiators), build: func(b *variantBed) {
			only1(b)
			b.node = vbNode("worker-5", "127.0.20.5", arrayclients.DriverPowerStore, psNodeID("5a1b2c3d4e5f60718293a4b5c6d7e8f9", "127.0.20.5"))
			b.attach(vbPV, arrayclients.DriverPowerStore, vol(b, "pstore-1", "k8s-vol-5")+"/"+vbPSGlobal1+"/scsi")
		}},
		{name: "powerstore/handle-names-array-by-ip", fixture: vbPSFixture, want: cut(arrayclients.CutHostInitiators), build: func(b *variantBed) {
			w1(b)
			only1(b)
			b.cfgs["pstore-1"].ArrayIDs = append(b.cfgs["pstore-1"].ArrayIDs, "127.0.0.1")
			b.attach(vbPV, arrayclients.DriverPowerStore, vol(b, "pstore-1", "k8s-vol")+"/127.0.0.1/scsi")
		}},
		{name: "powerstore/legacy-bare-uuid-on-default-array", fixture: vbPSFixture, want: cut(arrayclients.CutHostInitiators), build: func(b *variantBed) {
			w1(b)
			b.cfgs["pstore-1"].CSIDefault = true
			b.attach(vbPV, arrayclients.DriverPowerStore, vol(b, "pstore-1", "k8s-vol"))
		}},
		{name: "powerstore/detach-mode", fixture: vbPSFixture, want: cut(arrayclients.CutHostDetach), build: func(b *variantBed) {
			w1(b)
			b.cfgs["pstore-1"].PowerStoreFenceMode = arrayclients.PowerStoreModeDetach
			b.attach(vbPV, arrayclients.DriverPowerStore, vol(b, "pstore-1", "k8s-vol")+"/"+vbPSGlobal1+"/scsi")
		}},
		{name: "powerstore/metro-volume", fixture: vbPSFixture, want: variantWant{cut: arrayclients.CutHostInitiators, arrays: 2}, build: func(b *variantBed) {
			w1(b)
			b.attach(vbPV, arrayclients.DriverPowerStore, vol(b, "pstore-1", "k8s-vol")+"/"+vbPSGlobal1+"/scsi:"+
				vol(b, "pstore-2", "k8s-vol-metro")+"/"+vbPSGlobal2)
		}},
		{name: "powerstore/metro-partner-not-configured", fixture: vbPSFixture,
			want: gap(arrayclients.GapArrayNotConfigured, "configuration drift: stays a gap"),
			build: func(b *variantBed) {
				w1(b)
				metro := vol(b, "pstore-2", "k8s-vol-metro")
				only1(b)
				b.attach(vbPV, arrayclients.DriverPowerStore, vol(b, "pstore-1", "k8s-vol")+"/"+vbPSGlobal1+"/scsi:"+metro+"/"+vbPSGlobal2)
			}},
		{name: "powerstore/nfs-only-node-without-host", fixture: vbPSFixture, want: cut(arrayclients.CutNFSExportHosts),
			build: func(b *variantBed) {
				// No block initiator, so csi-powerstore made no host: the
				// node is an NFS client, its IP in the export's
				// RWRootHosts as ip/255.255.255.255.
				only1(b)
				b.node = vbNode("worker-6", "127.0.10.6", arrayclients.DriverPowerStore, psNodeID("6a1b2c3d4e5f60718293a4b5c6d7e8f9", "127.0.10.6"))
				b.attach(vbPV, arrayclients.DriverPowerStore, b.objectID("pstore-1", "fileSystems", "k8s-nfs-6")+"/"+vbPSGlobal1+"/nfs")
			}},
		{name: "powerstore/nfs-volume-on-block-node", fixture: vbPSFixture, want: cut(arrayclients.CutNFSExportHosts),
			build: func(b *variantBed) {
				w1(b)
				only1(b)
				b.attach(vbPV, arrayclients.DriverPowerStore, b.objectID("pstore-1", "fileSystems", "k8s-nfs-1")+"/"+vbPSGlobal1+"/nfs")
			}},
		{name: "powerstore/nfs-export-open-to-a-subnet", fixture: vbPSFixture,
			want: gap(arrayclients.GapNotFenceable, "a subnet entry covers the node: removing its own entry cannot cut it"),
			build: func(b *variantBed) {
				w1(b)
				only1(b)
				b.attach(vbPV, arrayclients.DriverPowerStore, b.objectID("pstore-1", "fileSystems", "k8s-nfs-subnet")+"/"+vbPSGlobal1+"/nfs")
			}},
		{name: "powerstore/driver-renamed-and-mapped", fixture: vbPSFixture, want: cut(arrayclients.CutHostInitiators), build: func(b *variantBed) {
			w1(b)
			only1(b)
			// X_CSI_DRIVER_NAME: the CSINode ID and the PV carry the other name.
			const renamed = "csi-powerstore-b.dellemc.com"
			b.node.CSINodeIDs = map[string]string{renamed: psNodeID(vbPSMachine, "127.0.10.1")}
			b.drivers = arrayclients.DefaultDrivers()
			b.drivers[renamed] = arrayclients.PowerStore
			b.attach(vbPV, renamed, vol(b, "pstore-1", "k8s-vol")+"/"+vbPSGlobal1+"/scsi")
		}},
		{name: "powerstore/driver-renamed-not-mapped", fixture: vbPSFixture,
			want: gap(arrayclients.GapUnknownDriver, "configuration: map it with clusters[].drivers"),
			build: func(b *variantBed) {
				w1(b)
				only1(b)
				const renamed = "csi-powerstore-b.dellemc.com"
				b.node.CSINodeIDs = map[string]string{renamed: psNodeID(vbPSMachine, "127.0.10.1")}
				b.attach(vbPV, renamed, vol(b, "pstore-1", "k8s-vol")+"/"+vbPSGlobal1+"/scsi")
			}},
	}
}

// ---- PowerMax --------------------------------------------------------

// vbPMaxFixture holds the hosts csi-powermax creates (service/controller.go
// GetHostSGAndMVIDFromNodeID): csi-node-TST-<nodeID> for iSCSI, -FC and
// -NVMETCP suffixes, the host of worker-4.example.com under its node ID
// worker-4, the host of worker-5 named by X_CSI_IG_NODENAME_TEMPLATE
// "k8s-%node%-host" (prefix + nodeID + suffix, storage group and view keep
// the default names), and in vSphere mode the one ESXi host every node
// shares, with storage group and view csi-...-TST-VSPHERE; worker-7 has
// hosts for two protocols (its transport protocol changed: the driver made
// the -FC host and left the iSCSI one).
var vbPMaxFixture = `
arrays:
  - name: pmax-1
    family: powermax
    spec:
      symmetrixID: "000197900046"
      hosts:
        - {id: csi-node-TST-worker-1, initiators: [{id: "iqn.1994-05.com.redhat:worker-1", paths: ["SE-1E:000"]}],
           maskingView: csi-mv-TST-worker-1, storageGroup: csi-no-srp-sg-TST-worker-1, portGroup: csi-TST-iscsi-PG, volumes: ["00101"]}
        - {id: csi-node-TST-worker-2-FC, type: Fibre, initiators: [{id: "10000000c9a0b002", paths: ["FA-1D:4"]}],
           maskingView: csi-mv-TST-worker-2-FC, storageGroup: csi-no-srp-sg-TST-worker-2-FC, portGroup: csi-TST-fc-PG, volumes: ["00102"]}
        - {id: csi-node-TST-worker-3-NVMETCP, type: NVMe/TCP, initiators: [{id: "nqn.2014-08.org.nvmexpress:uuid:worker-3", paths: ["OR-1C:1"]}],
           maskingView: csi-mv-TST-worker-3-NVMETCP, storageGroup: csi-no-srp-sg-TST-worker-3-NVMETCP, portGroup: csi-TST-nvme-PG, volumes: ["00103"]}
        - {id: csi-node-TST-worker-4, initiators: [{id: "iqn.1994-05.com.redhat:worker-4", paths: ["SE-1E:000"]}],
           maskingView: csi-mv-TST-worker-4, storageGroup: csi-no-srp-sg-TST-worker-4, portGroup: csi-TST-iscsi-PG, volumes: ["00104"]}
        - {id: k8s-worker-5-host, initiators: [{id: "iqn.1994-05.com.redhat:worker-5", paths: ["SE-1E:000"]}],
           maskingView: csi-mv-TST-worker-5, storageGroup: csi-no-srp-sg-TST-worker-5, portGroup: csi-TST-iscsi-PG, volumes: ["00105"]}
        - {id: csi-node-TST-worker-7, initiators: [{id: "iqn.1994-05.com.redhat:worker-7", paths: ["SE-1E:000"]}],
           maskingView: csi-mv-TST-worker-7, storageGroup: csi-no-srp-sg-TST-worker-7, portGroup: csi-TST-iscsi-PG, volumes: ["00107"]}
        - {id: csi-node-TST-worker-7-FC, type: Fibre, initiators: [{id: "10000000c9a0b007", paths: ["FA-1D:4"]}],
           maskingView: csi-mv-TST-worker-7-FC, storageGroup: csi-no-srp-sg-TST-worker-7-FC, portGroup: csi-TST-fc-PG, volumes: ["00108"]}
        - {id: esx-cluster-1, type: Fibre, initiators: [{id: "10000000c9a0b0e1", paths: ["FA-2D:4"]}],
           maskingView: csi-mv-TST-VSPHERE, storageGroup: csi-no-srp-sg-TST-VSPHERE, portGroup: csi-TST-vsphere-PG, volumes: ["00106"]}
`

func pmaxRows() []variantRow {
	node := func(b *variantBed, name, ip string) {
		b.node = vbNode(name, ip, arrayclients.DriverPowerMax, pmaxNodeID(name))
	}
	handle := func(dev string) string { return "csi-" + vbPMaxPrefix + "-pmax-0a1b2c3d4e-" + vbPMaxSym + "-" + dev }
	return []variantRow{
		{name: "powermax/iscsi-host", fixture: vbPMaxFixture, want: cut(arrayclients.CutHostInitiators), build: func(b *variantBed) {
			node(b, "worker-1", "127.0.10.1")
			b.attach(vbPV, arrayclients.DriverPowerMax, handle("00101"))
		}},
		{name: "powermax/fc-host-suffix", fixture: vbPMaxFixture, want: cut(arrayclients.CutHostInitiators), build: func(b *variantBed) {
			node(b, "worker-2", "127.0.10.2")
			b.attach(vbPV, arrayclients.DriverPowerMax, handle("00102"))
		}},
		{name: "powermax/nvmetcp-host-suffix", fixture: vbPMaxFixture, want: cut(arrayclients.CutHostInitiators), build: func(b *variantBed) {
			node(b, "worker-3", "127.0.10.3")
			b.attach(vbPV, arrayclients.DriverPowerMax, handle("00103"))
		}},
		{name: "powermax/node-id-cut-at-first-dot", fixture: vbPMaxFixture, want: cut(arrayclients.CutHostInitiators), build: func(b *variantBed) {
			node(b, "worker-4.example.com", "127.0.10.4")
			b.attach(vbPV, arrayclients.DriverPowerMax, handle("00104"))
		}},
		{name: "powermax/node-name-template", fixture: vbPMaxFixture, want: cut(arrayclients.CutHostInitiators), build: func(b *variantBed) {
			node(b, "worker-5", "127.0.10.5")
			b.cfgs["pmax-1"].PowerMaxNodeNameTemplate = "k8s-%node%-host"
			b.attach(vbPV, arrayclients.DriverPowerMax, handle("00105"))
		}},
		{name: "powermax/vsphere-shared-host", fixture: vbPMaxFixture,
			want: gap(arrayclients.GapNotFenceable, "stays a gap: the shared host serves every node"),
			build: func(b *variantBed) {
				node(b, "worker-6", "127.0.10.6")
				b.cfgs["pmax-1"].PowerMaxVSphereHost = "esx-cluster-1"
				b.attach(vbPV, arrayclients.DriverPowerMax, handle("00106"))
			}},
		{name: "powermax/vsphere-host-named-by-override", fixture: vbPMaxFixture,
			want: gap(arrayclients.GapNotFenceable, "stays a gap: the shared host serves every node"),
			build: func(b *variantBed) {
				// No vSphere setting: the override's host is in the
				// driver's csi-mv-<prefix>-VSPHERE masking view.
				node(b, "worker-6", "127.0.10.6")
				b.node.Override = "esx-cluster-1"
				b.attach(vbPV, arrayclients.DriverPowerMax, handle("00106"))
			}},
		{name: "powermax/hosts-for-two-protocols", fixture: vbPMaxFixture,
			want: gap(arrayclients.GapIdentityAmbiguous, "operator: per-node override naming the host in use"),
			build: func(b *variantBed) {
				node(b, "worker-7", "127.0.10.7")
				b.attach(vbPV, arrayclients.DriverPowerMax, handle("00108"))
			}},
		{name: "powermax/nfs-export-open-to-every-host", fixture: vbPMaxFixture,
			want: gap(arrayclients.GapNotFenceable, "stays a gap: exports are created open to every host"),
			build: func(b *variantBed) {
				// The simulator holds no file systems or NFS exports; the
				// gap rests on csi-powermax creating them open to every host.
				node(b, "worker-1", "127.0.10.1")
				b.attach(vbPV, arrayclients.DriverPowerMax, "csi-"+vbPMaxPrefix+"-pmax-fs-"+vbPMaxSym+"-6f1e2d3c-4b5a-4968-8776-a5b4c3d2e1f0")
			}},
		{name: "powermax/srdf-remote-not-configured", fixture: vbPMaxFixture,
			want: gap(arrayclients.GapArrayNotConfigured, "configuration drift: stays a gap"),
			build: func(b *variantBed) {
				node(b, "worker-1", "127.0.10.1")
				b.attach(vbPV, arrayclients.DriverPowerMax, "csi-"+vbPMaxPrefix+"-pmax-0a1b2c3d4e-"+vbPMaxSym+":000197900099-00101:00201")
			}},
	}
}

// ---- Unity -----------------------------------------------------------

// vbUnityFixture holds the hosts csi-unity names: worker-1.example.com by
// its long name (the name the node plugin creates), worker-2.example.com's
// host by its short name with an IP port holding the long name (found
// first by the driver), dot-free worker-3, and a node named by its IP.
const vbUnityFixture = `
arrays:
  - name: unity-1
    family: unity
    spec:
      hosts:
        - {name: worker-1.example.com, iqns: ["iqn.1994-05.com.redhat:worker-1"], ipPorts: [worker-1.example.com, 127.0.10.1]}
        - {name: worker-2, iqns: ["iqn.1994-05.com.redhat:worker-2"], ipPorts: [worker-2.example.com, 127.0.10.2]}
        - {name: worker-3, iqns: ["iqn.1994-05.com.redhat:worker-3"], ipPorts: [worker-3, 127.0.10.3]}
        - {name: 127.0.10.4, iqns: ["iqn.1994-05.com.redhat:worker-4"], ipPorts: [127.0.10.4]}
      luns:
        - {name: csivol-w1, hostAccess: [{host: worker-1.example.com, hlu: 1}]}
        - {name: csivol-w2, hostAccess: [{host: worker-2, hlu: 1}]}
        - {name: csivol-w3, hostAccess: [{host: worker-3, hlu: 1}]}
        - {name: csivol-w4, hostAccess: [{host: 127.0.10.4, hlu: 1}]}
      filesystems:
        - {name: csivol-nfs, shares: [{rootAccessHosts: [worker-3]}]}
`

func unityRows() []variantRow {
	node := func(b *variantBed, name, ip string) {
		b.node = vbNode(name, ip, arrayclients.DriverUnity, unityNodeID(name))
	}
	lun := func(b *variantBed, name string) string { return b.objectID("unity-1", "luns", name) }
	handle := func(b *variantBed, name string) string {
		return name + "-iSCSI-" + vbUnityArray + "-" + lun(b, name)
	}
	return []variantRow{
		{name: "unity/host-named-long", fixture: vbUnityFixture, want: cut(arrayclients.CutLUNHostAccess), build: func(b *variantBed) {
			node(b, "worker-1.example.com", "127.0.10.1")
			b.attach(vbPV, arrayclients.DriverUnity, handle(b, "csivol-w1"))
		}},
		{name: "unity/host-named-short", fixture: vbUnityFixture, want: cut(arrayclients.CutLUNHostAccess), build: func(b *variantBed) {
			node(b, "worker-2.example.com", "127.0.10.2")
			b.attach(vbPV, arrayclients.DriverUnity, handle(b, "csivol-w2"))
		}},
		{name: "unity/dot-free-node-name", fixture: vbUnityFixture, want: cut(arrayclients.CutLUNHostAccess), build: func(b *variantBed) {
			node(b, "worker-3", "127.0.10.3")
			b.attach(vbPV, arrayclients.DriverUnity, handle(b, "csivol-w3"))
		}},
		{name: "unity/node-named-by-ip", fixture: vbUnityFixture, want: cut(arrayclients.CutLUNHostAccess), build: func(b *variantBed) {
			node(b, "127.0.10.4", "127.0.10.4")
			b.attach(vbPV, arrayclients.DriverUnity, handle(b, "csivol-w4"))
		}},
		{name: "unity/legacy-bare-lun-id-on-default-array", fixture: vbUnityFixture, want: cut(arrayclients.CutLUNHostAccess), build: func(b *variantBed) {
			node(b, "worker-3", "127.0.10.3")
			b.cfgs["unity-1"].CSIDefault = true
			b.attach(vbPV, arrayclients.DriverUnity, lun(b, "csivol-w3"))
		}},
		{name: "unity/nfs-share", fixture: vbUnityFixture, want: cut(arrayclients.CutNFSShareHosts), build: func(b *variantBed) {
			// csi-unity's publish put the host into the share's
			// rootAccessHosts (service/controller.go exportFilesystem).
			node(b, "worker-3", "127.0.10.3")
			b.attach(vbPV, arrayclients.DriverUnity, "csivol-nfs-NFS-"+vbUnityArray+"-"+b.objectID("unity-1", "filesystems", "csivol-nfs"))
		}},
		{name: "unity/array-not-configured", fixture: vbUnityFixture,
			want: gap(arrayclients.GapArrayNotConfigured, "configuration drift: stays a gap"),
			build: func(b *variantBed) {
				node(b, "worker-3", "127.0.10.3")
				b.attach(vbPV, arrayclients.DriverUnity, "csivol-w3-iSCSI-APM00999999999-"+lun(b, "csivol-w3"))
			}},
	}
}

// ---- PowerScale ------------------------------------------------------

// vbPScaleFixture holds exports as csi-isilon publishes them
// (service/controller.go): the node's FQDN in clients, its IP when the FQDN
// did not resolve, root_clients plus clients with RootClientEnabled,
// read_only_clients for ROX, an AzNetwork IP from a node label, and an
// export in a second access zone; localhost is always in clients.
const vbPScaleFixture = `
arrays:
  - name: pscale-1
    family: powerscale
    spec:
      zones: [tenant-b]
      exports:
        - {paths: [/ifs/data/csi/k8s-fqdn], clients: [localhost, worker-1.example.com]}
        - {paths: [/ifs/data/csi/k8s-ip], clients: [localhost, 127.0.10.2]}
        - {paths: [/ifs/data/csi/k8s-root], clients: [localhost, worker-1.example.com], rootClients: [worker-1.example.com]}
        - {paths: [/ifs/data/csi/k8s-rox], clients: [localhost], readOnlyClients: [worker-1.example.com]}
        - {paths: [/ifs/data/csi/k8s-az], clients: [localhost, 127.0.20.1]}
        - {paths: [/ifs/data/tenant-b/k8s-zone], zone: tenant-b, clients: [localhost, worker-1.example.com]}
`

func pscaleRows() []variantRow {
	fqdnNode := func(b *variantBed) {
		b.node = vbNode("worker-1", "127.0.10.1", arrayclients.DriverPowerScale,
			pscaleNodeID("worker-1", "worker-1.example.com", "127.0.10.1"))
	}
	handle := func(b *variantBed, path, zone, cluster string) string {
		h := "k8s-vol=_=_=" + b.objectID("pscale-1", "exports", path) + "=_=_=" + zone
		if cluster != "" {
			h += "=_=_=" + cluster
		}
		return h
	}
	return []variantRow{
		{name: "powerscale/export-client-fqdn", fixture: vbPScaleFixture, want: cut(arrayclients.CutExportClients), build: func(b *variantBed) {
			fqdnNode(b)
			b.attach(vbPV, arrayclients.DriverPowerScale, handle(b, "/ifs/data/csi/k8s-fqdn", "System", vbPScale))
		}},
		{name: "powerscale/export-client-ip-without-reverse-dns", fixture: vbPScaleFixture, want: cut(arrayclients.CutExportClients), build: func(b *variantBed) {
			b.node = vbNode("worker-2", "127.0.10.2", arrayclients.DriverPowerScale, pscaleNodeID("worker-2", "127.0.10.2", "127.0.10.2"))
			b.attach(vbPV, arrayclients.DriverPowerScale, handle(b, "/ifs/data/csi/k8s-ip", "System", vbPScale))
		}},
		{name: "powerscale/root-clients", fixture: vbPScaleFixture, want: cut(arrayclients.CutExportClients), build: func(b *variantBed) {
			fqdnNode(b)
			b.attach(vbPV, arrayclients.DriverPowerScale, handle(b, "/ifs/data/csi/k8s-root", "System", vbPScale))
		}},
		{name: "powerscale/read-only-clients", fixture: vbPScaleFixture, want: cut(arrayclients.CutExportClients), build: func(b *variantBed) {
			fqdnNode(b)
			b.attach(vbPV, arrayclients.DriverPowerScale, handle(b, "/ifs/data/csi/k8s-rox", "System", vbPScale))
		}},
		{name: "powerscale/aznetwork-label-ip", fixture: vbPScaleFixture, want: cut(arrayclients.CutExportClients), build: func(b *variantBed) {
			// The export lists 127.0.20.1, taken by the driver from the
			// node label csi-isilon.dellemc.com/az-<net>-<len>-127.0.20.1;
			// the CSINode ID does not name it, the label does.
			fqdnNode(b)
			b.node.LabelIPs = powerscale.PowerScaleLabelIPs(map[string]string{
				"csi-isilon.dellemc.com/az-127.0.20.0-24-127.0.20.1": "true", "kubernetes.io/hostname": "worker-1"})
			b.attach(vbPV, arrayclients.DriverPowerScale, handle(b, "/ifs/data/csi/k8s-az", "System", vbPScale))
		}},
		{name: "powerscale/override-with-several-ips", fixture: vbPScaleFixture, want: cut(arrayclients.CutExportClients), build: func(b *variantBed) {
			// clusters[].nodes names the node's IPs and FQDN itself.
			fqdnNode(b)
			b.node.Override = "127.0.10.1,127.0.20.1,worker-1.example.com"
			b.attach(vbPV, arrayclients.DriverPowerScale, handle(b, "/ifs/data/csi/k8s-az", "System", vbPScale))
		}},
		{name: "powerscale/second-access-zone-configured", fixture: vbPScaleFixture, want: cut(arrayclients.CutExportClients), build: func(b *variantBed) {
			fqdnNode(b)
			zb := *b.cfgs["pscale-1"]
			zb.Name, zb.Zone = "pscale-1-tenant-b", "tenant-b"
			b.cfgs[zb.Name] = &zb
			b.attach(vbPV, arrayclients.DriverPowerScale, handle(b, "/ifs/data/tenant-b/k8s-zone", "tenant-b", vbPScale))
		}},
		{name: "powerscale/access-zone-not-configured", fixture: vbPScaleFixture,
			want: gap(arrayclients.GapArrayNotConfigured, "configuration drift: stays a gap"),
			build: func(b *variantBed) {
				fqdnNode(b)
				b.attach(vbPV, arrayclients.DriverPowerScale, handle(b, "/ifs/data/tenant-b/k8s-zone", "tenant-b", vbPScale))
			}},
		{name: "powerscale/handle-without-cluster-on-default", fixture: vbPScaleFixture, want: cut(arrayclients.CutExportClients), build: func(b *variantBed) {
			fqdnNode(b)
			b.cfgs["pscale-1"].CSIDefault = true
			b.attach(vbPV, arrayclients.DriverPowerScale, handle(b, "/ifs/data/csi/k8s-fqdn", "System", ""))
		}},
	}
}

func variantRows() []variantRow {
	var rows []variantRow
	for _, f := range []func() []variantRow{pflexRows, psRows, pmaxRows, unityRows, pscaleRows} {
		rows = append(rows, f()...)
	}
	return rows
}
