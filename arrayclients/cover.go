package arrayclients

import (
	"fmt"
)

// Each family's Cover (in its own package) decides which cut it uses for a
// footprint volume from the identity and the volume alone (no I/O); Plan
// then reads the volume to confirm the cut or find a gap (not on the
// array, given to another identity). What no family can cut is decided
// here, before any identity is looked for.

// NotFenceable returns the gap of a volume that no identity's access can
// be cut from on its family, whatever the node's identities there (it is
// decided before any identity is looked for, so a node with no identity
// on the array gets this gap, not identity-not-found), or nil. PowerMax
// NFS exports are created open to every host.
func NotFenceable(f Family, v VolumeRef) *Gap {
	if f == PowerMax && v.Protocol != ProtocolBlock {
		return &Gap{Reason: GapNotFenceable, Detail: fmt.Sprintf("%s: csi-powermax creates NFS exports open to every "+
			"host (DefaultAccess ReadWrite), so one node's access to them cannot be removed", v.Volume)}
	}
	return nil
}
