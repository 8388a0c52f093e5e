package powerscale

import "github.com/fenced-project/fenced/arrayclients"

import "fmt"

// Cover: PowerScale exports lose the node's client strings.
func (a *PowerScaleAdapter) Cover(_ arrayclients.Identity, v arrayclients.VolumeRef) (arrayclients.Cut, *arrayclients.Gap) {
	if v.Protocol != arrayclients.ProtocolNFS {
		return "", &arrayclients.Gap{Reason: arrayclients.GapBadHandle, Detail: fmt.Sprintf("%s: a PowerScale volume is an NFS export", v.Volume)}
	}
	return arrayclients.CutExportClients, nil
}

// Holds reports whether a volume at loc is on this array.
func (a *PowerScaleAdapter) Holds(loc arrayclients.VolumeLocation) bool { return a.cfg.Holds(loc) }

// HoldsArray reports whether a volume at loc is on this PowerScale
// cluster, whatever its access zone (ZoneHolder).
func (a *PowerScaleAdapter) HoldsArray(loc arrayclients.VolumeLocation) bool {
	return a.cfg.HoldsArray(loc)
}
