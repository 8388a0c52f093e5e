package stonith

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/arrayclients"
)

// pmaxArray is a fake array of the PowerMax family holding one symmetrix.
type pmaxArray struct {
	*fakeArray
	sym string
}

func (a pmaxArray) Family() arrayclients.Family { return arrayclients.PowerMax }

func (a pmaxArray) Holds(loc arrayclients.VolumeLocation) bool {
	return loc.Family == arrayclients.PowerMax && loc.ArrayID == a.sym
}

// TestCoverPowerMaxNFSNotFenceable: a PowerMax NFS volume is a
// not-fenceable gap whatever fenced knows of the node there; a node known
// only as an NFS client has no PowerMax host, which must not turn the gap
// into identity-not-found (the operator's remedy differs).
func TestCoverPowerMaxNFSNotFenceable(t *testing.T) {
	arr := pmaxArray{fakeArray: newFakeArray("pmax-1", &opLog{}), sym: "000197900123"}
	kv := arrayclients.KubeVolume{PV: "pv-files", Driver: "csi-powermax.dellemc.com", Attached: true,
		Handle: "csi-TB-pmax-files-000197900123-5f1a2b3c-4d5e-6f70-8192-a3b4c5d6e7f8"}
	for name, ids := range map[string]identityView{
		"no identity on the array": {Known: true, Identities: map[string]arrayclients.Identity{}},
		"identity not found":       {Known: true, NotFound: map[string]string{"pmax-1": "no host named worker-1"}},
		"a host on the array": {Known: true, Identities: map[string]arrayclients.Identity{
			"pmax-1": {Array: "pmax-1", Family: arrayclients.PowerMax, Node: "worker-1", ObjectID: "worker-1"}}},
	} {
		t.Run(name, func(t *testing.T) {
			cv := cover([]arrayclients.KubeVolume{kv}, arrayclients.DefaultDrivers(), []Array{arr}, ids)
			require.Len(t, cv.Gaps, 1, "%+v", cv.Gaps)
			assert.Equal(t, arrayclients.GapNotFenceable, cv.Gaps[0].Reason)
			assert.Equal(t, "pv-files", cv.Gaps[0].Volume)
			assert.Contains(t, cv.Gaps[0].Detail, "open to every host")
			assert.Empty(t, cv.Vols)
		})
	}
}
