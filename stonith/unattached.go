package stonith

import (
	"github.com/fenced-project/fenced/arrayclients"
	"github.com/fenced-project/fenced/cluster/ledger"
)

// withUnattached sets, on the PowerFlex NFS volumes among a node's
// footprint volumes (vols, by array, as Plan takes them), the identity
// keys on their array of the cluster's other nodes that have no
// VolumeAttachment to the volume (VolumeRef.Unattached). The PowerFlex
// plan needs them to tell an export that lists nodes not using it, the
// mark of csi-vxflexos with interfaceNames, which gives a fenced node its
// access back on the next publish anywhere (GapDriverRegrant). When the
// attachments cannot be read nothing is set, and the plan finds no such
// gap.
func (c *Controller) withUnattached(cl *clusterRuntime, node string, vols map[string][]arrayclients.VolumeRef) {
	wanted := func(array string, r arrayclients.VolumeRef) bool {
		a := c.cfg.Arrays[array]
		return a != nil && a.Family() == arrayclients.PowerFlex && r.Protocol == arrayclients.ProtocolNFS
	}
	need := false
	for array, refs := range vols {
		for _, r := range refs {
			need = need || wanted(array, r)
		}
	}
	if !need {
		return
	}
	holders := map[string]map[string]bool{} // PV -> nodes with a VolumeAttachment to it
	for _, n := range cl.Footprints.Nodes() {
		kvols, err := cl.Footprints.Volumes(n)
		if err != nil {
			return
		}
		for _, kv := range kvols {
			if holders[kv.PV] == nil {
				holders[kv.PV] = map[string]bool{}
			}
			holders[kv.PV][n] = true
		}
	}
	keys := map[string]map[string][]string{} // array -> node -> identity keys
	c.cfg.Ledger.Read(func(s *ledger.State) {
		cs := s.Clusters[cl.Name]
		if cs == nil {
			return
		}
		for n, ns := range cs.Nodes {
			for array := range vols {
				if id, ok := ns.Identities[array]; ok && n != node {
					if keys[array] == nil {
						keys[array] = map[string][]string{}
					}
					keys[array][n] = append([]string(nil), id.Keys...)
				}
			}
		}
	})
	for array, refs := range vols {
		for i, r := range refs {
			if !wanted(array, r) {
				continue
			}
			m := map[string]string{}
			for n, ks := range keys[array] {
				if holders[r.Volume][n] {
					continue
				}
				for _, k := range ks {
					m[k] = n
				}
			}
			refs[i].Unattached = m
		}
	}
}
