package e2e

import (
	"testing"

	"github.com/fenced-project/fenced/tests/arraysim/powerstore"
	"github.com/fenced-project/fenced/tests/testbed"
)

// TestNFSVolumesAreFenced (invariants 1 and 5 over NFS): a node dies with
// an NFS volume of each family that exports file systems per node —
// PowerFlex and PowerStore (the node's IP in the export's host lists, as
// csi-vxflexos and csi-powerstore publish), Unity (the node's host in the
// share's host lists, csi-unity) and PowerScale (the node in the export's
// clients, csi-isilon). fenced cuts each and reads it back before the
// eviction; the pods move and the emulated drivers export the file
// systems to their new nodes; the old node reboots and is unfenced
// without being given back any of them; moved back, each pod's file
// system is exported to it again, and to it alone.
func TestNFSVolumesAreFenced(t *testing.T) {
	moveAndReturn(t, []setOf{
		{"flexnfs", testbed.DriverPowerFlex, true}, {"storenfs", testbed.DriverPowerStore, true},
		{"unitynfs", testbed.DriverUnity, true}, {"scale", testbed.DriverPowerScale, false},
	})
}

// TestPowerStoreNFSFencedUnderEitherPatchRule: no source says whether a
// PowerStore refuses an NFS export PATCH that removes an absent entry or
// skips that removal (tests/arraysim/CONFORMANCE.md); the default run's
// simulators refuse it, this one skips it, and the PowerStore NFS volume
// is fenced, held and given back the same way under both.
func TestPowerStoreNFSFencedUnderEitherPatchRule(t *testing.T) {
	t.Setenv(powerstore.EnvNFSRemoveAbsent, powerstore.NFSRemoveAbsentIgnore)
	moveAndReturn(t, []setOf{{"storenfs", testbed.DriverPowerStore, true}})
}
