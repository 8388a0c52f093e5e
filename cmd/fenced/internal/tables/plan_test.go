package tables

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/arrayclients"
	"github.com/fenced-project/fenced/stonith"
)

func TestWritePlanNamesCutsAndGaps(t *testing.T) {
	ref := arrayclients.VolumeRef{Volume: "pvc-1", Object: "0a6e2b34", Protocol: arrayclients.ProtocolBlock, Attached: true}
	p := stonith.NodePlan{Cluster: "prod", Node: "w-3", ReadAt: time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC),
		Footprint: []arrayclients.FootprintVolume{
			{KubeVolume: arrayclients.KubeVolume{PV: "pvc-1", Driver: arrayclients.DriverPowerStore, Handle: "0a6e2b34/PS1/scsi", Attached: true},
				Placements: []arrayclients.Placement{{Array: "pstore-1", VolumeRef: ref}}},
			{KubeVolume: arrayclients.KubeVolume{PV: "pvc-2", Driver: "nfs.example.com", Handle: "h"},
				Gap: &arrayclients.Gap{Reason: arrayclients.GapUnknownDriver, Detail: "driver nfs.example.com"}},
		},
		Arrays: []stonith.ArrayPlan{{Array: "pstore-1", Identity: "host w-3 (h1)", Summary: "remove 2 initiators of host w-3",
			Volumes: []arrayclients.VolumeCut{{VolumeRef: ref, Cut: arrayclients.CutHostInitiators}}}},
		Gaps: []stonith.VolumeGap{{Volume: "pvc-2", Reason: arrayclients.GapUnknownDriver, Detail: "driver nfs.example.com"}},
	}
	var b bytes.Buffer
	require.NoError(t, Plan(&b, p))
	out := b.String()
	assert.Contains(t, out, "Node w-3 (cluster prod): UNPROTECTED")
	assert.Regexp(t, `pvc-1\s+csi-powerstore.dellemc.com\s+0a6e2b34/PS1/scsi\s+yes\s+pstore-1\s+host-initiators`, out)
	assert.Regexp(t, `pvc-2\s+nfs.example.com\s+h\s+no\s+-\s+gap: unknown-driver`, out)
	assert.Regexp(t, `pstore-1\s+host w-3 \(h1\)\s+remove 2 initiators of host w-3`, out)
	assert.Regexp(t, `pvc-2\s+-\s+unknown-driver\s+driver nfs.example.com`, out)

	p.Protected, p.Gaps, p.Footprint = true, nil, p.Footprint[:1]
	b.Reset()
	require.NoError(t, Plan(&b, p))
	assert.Contains(t, b.String(), "PROTECTED: a fence would cut every volume")
	assert.NotContains(t, b.String(), "Gaps")
	assert.NotContains(t, b.String(), "Configuration drift")

	// The cluster's drift is listed whatever the node.
	p.Drift = []arrayclients.Drift{{PV: "pvc-7", Driver: arrayclients.DriverPowerStore, Handle: "u/PSffff/scsi",
		Reason: arrayclients.DriftArray, Missing: "powerstore array PSffff is not configured"}}
	b.Reset()
	require.NoError(t, Plan(&b, p))
	assert.Contains(t, b.String(), "Configuration drift in cluster prod")
	assert.Regexp(t, `pvc-7\s+csi-powerstore.dellemc.com\s+u/PSffff/scsi\s+powerstore array PSffff is not configured`, b.String())
}
