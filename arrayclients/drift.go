package arrayclients

import (
	"fmt"
	"slices"
	"strings"
)

// Configuration drift: a PersistentVolume of a Dell CSI driver whose
// handle names an array, PowerScale access zone or metro partner that no
// configured array holds. Attached to a node such a volume is a gap
// (GapArrayNotConfigured) and the node is unprotected; attached to nobody
// it is drift, reported before it reaches a node (docs/footprint.md,
// "Configuration drift").

// DriftReason is what a drifted volume's handle names that the
// configuration lacks. The values are metric labels: few and stable.
type DriftReason string

// Drift reasons.
const (
	// DriftArray: the handle names an array no configured array of the
	// family lists (arrays[].<family>.systemID, globalID, symmetrixID,
	// arrayID or clusterName).
	DriftArray DriftReason = "array"
	// DriftDefaultArray: the handle names no array (a legacy handle of the
	// driver's default array) and no configured array is marked as the
	// driver's default.
	DriftDefaultArray DriftReason = "default-array"
	// DriftZone: a configured PowerScale array is the handle's cluster but
	// exports from another access zone.
	DriftZone DriftReason = "zone"
	// DriftMetroPartner: the volume's local half is configured but the
	// metro (or SRDF) partner its handle names is not.
	DriftMetroPartner DriftReason = "metro-partner"
	// DriftAmbiguous: two configured arrays claim the volume.
	DriftAmbiguous DriftReason = "ambiguous"
)

// DriftReasons lists every reason (metric series are initialised from it).
func DriftReasons() []DriftReason {
	return []DriftReason{DriftArray, DriftDefaultArray, DriftZone, DriftMetroPartner, DriftAmbiguous}
}

// Drift is one PersistentVolume whose handle places it on no configured
// array.
type Drift struct {
	PV     string      `json:"pv"`
	Driver string      `json:"driver"`
	Handle string      `json:"handle"`
	Reason DriftReason `json:"reason"`
	// Missing says what the configuration lacks, for people.
	Missing string `json:"missing"`
}

// ZoneHolder is a Holder that can tell the array a PowerScale volume is on
// apart from its access zone (the PowerScale adapter).
type ZoneHolder interface {
	// HoldsArray is Holds without the access zone.
	HoldsArray(loc VolumeLocation) bool
}

// FindDrift returns, sorted by name, the PersistentVolumes (pvs, as
// KubeVolume with driver, handle and fsType) whose handle names an array,
// access zone or metro partner no array of arrays holds. drivers maps the
// CSI driver names the cluster uses to families: a volume of another
// driver is not Dell's and is skipped, and so is one whose handle does not
// parse (Place reports it as a gap when it is attached). It does no I/O.
func FindDrift(pvs []KubeVolume, drivers map[string]Family, arrays []Holder) []Drift {
	var out []Drift
	for _, v := range pvs {
		fam, ok := drivers[v.Driver]
		if !ok || v.Handle == "" {
			continue
		}
		loc, err := ParseVolumeHandle(fam, v.Handle, v.FSType)
		if err != nil {
			continue
		}
		if reason, missing, drifted := locationDrift(loc, arrays); drifted {
			out = append(out, Drift{PV: v.PV, Driver: v.Driver, Handle: v.Handle, Reason: reason, Missing: missing})
		}
	}
	slices.SortFunc(out, func(a, b Drift) int { return strings.Compare(a.PV, b.PV) })
	return out
}

// locationDrift classifies a parsed location: what no configured array
// holds, if anything.
func locationDrift(loc VolumeLocation, arrays []Holder) (DriftReason, string, bool) {
	for l := &loc; l != nil; l = l.Remote {
		var names []string
		for _, a := range arrays {
			if a.Holds(*l) {
				names = append(names, a.Name())
			}
		}
		switch {
		case len(names) > 1:
			return DriftAmbiguous, fmt.Sprintf("%s is claimed by arrays %s: give them distinct identifiers",
				l, strings.Join(names, " and ")), true
		case len(names) == 1:
			continue
		case l != &loc:
			return DriftMetroPartner, fmt.Sprintf("%s %s is not a configured array (arrays[].%s)",
				remoteKind(l.Family), l.ArrayID, arrayIDField(l.Family)), true
		case l.ArrayID == "":
			return DriftDefaultArray, fmt.Sprintf("the handle names no array and no configured %s array is the "+
				"driver's default (arrays[].csiDefault)", l.Family), true
		case l.Family == PowerScale && slices.ContainsFunc(arrays, func(a Holder) bool {
			z, ok := a.(ZoneHolder)
			return ok && a.Family() == PowerScale && z.HoldsArray(*l)
		}):
			return DriftZone, fmt.Sprintf("access zone %s of PowerScale cluster %s is not configured (arrays[].powerscale.zone)",
				l.Zone, l.ArrayID), true
		default:
			return DriftArray, fmt.Sprintf("%s array %s is not configured (arrays[].%s)", l.Family, l.ArrayID,
				arrayIDField(l.Family)), true
		}
	}
	return "", "", false
}
