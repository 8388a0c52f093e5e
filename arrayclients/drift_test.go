package arrayclients_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/arrayclients"
)

// zoneHolder is a holder that tells a PowerScale cluster apart from its
// access zone, as the registry's adapters do.
type zoneHolder struct{ holder }

func (h zoneHolder) HoldsArray(loc arrayclients.VolumeLocation) bool { return h.cfg.HoldsArray(loc) }

func TestFindDrift(t *testing.T) {
	arrays := []arrayclients.Holder{
		holder{arrayclients.Config{Name: "pflex-1", Family: arrayclients.PowerFlex, ArrayIDs: []string{"7f5d8fa37e2a1c0f"}}},
		holder{arrayclients.Config{Name: "pstore-a", Family: arrayclients.PowerStore, ArrayIDs: []string{"PSabcdef0123"}}},
		zoneHolder{holder{arrayclients.Config{Name: "pscale-1", Family: arrayclients.PowerScale, ArrayIDs: []string{"cluster-a"}, Zone: "System"}}},
		holder{arrayclients.Config{Name: "unity-1", Family: arrayclients.Unity, ArrayIDs: []string{"APM00123456789"}}},
		holder{arrayclients.Config{Name: "unity-2", Family: arrayclients.Unity, ArrayIDs: []string{"apm00999"}}},
		holder{arrayclients.Config{Name: "unity-3", Family: arrayclients.Unity, ArrayIDs: []string{"APM00999"}}},
	}
	drivers := arrayclients.DefaultDrivers()
	drivers["csi-pflex-b.example.com"] = arrayclients.PowerFlex
	pv := func(name, driver, handle string) arrayclients.KubeVolume {
		return arrayclients.KubeVolume{PV: name, Driver: driver, Handle: handle}
	}
	pvs := []arrayclients.KubeVolume{
		pv("placed", arrayclients.DriverPowerFlex, "7f5d8fa37e2a1c0f-3c1e0b7a00000001"),
		pv("placed-metro", arrayclients.DriverPowerStore, "u/PSabcdef0123/scsi"),
		pv("placed-zone", arrayclients.DriverPowerScale, "k=_=_=12=_=_=System=_=_=cluster-a"),
		pv("not-dell", "ebs.csi.aws.com", "vol-0a"),
		pv("bad-handle", arrayclients.DriverUnity, "nonsense"),
		pv("no-handle", arrayclients.DriverUnity, ""),
		pv("z-array", "csi-pflex-b.example.com", "ffffeeeeddddcccc-3c1e0b7a00000002"),
		pv("b-default", arrayclients.DriverUnity, "sv_1"),
		pv("c-zone", arrayclients.DriverPowerScale, "k=_=_=13=_=_=tenant-b=_=_=cluster-a"),
		pv("d-metro", arrayclients.DriverPowerStore, "u/PSabcdef0123/scsi:r/PS0123abcdef"),
		pv("e-twice", arrayclients.DriverUnity, "v-iSCSI-APM00999-sv_2"),
		pv("f-cluster", arrayclients.DriverPowerScale, "k=_=_=14=_=_=System=_=_=cluster-z"),
	}
	got := arrayclients.FindDrift(pvs, drivers, arrays)
	require.Len(t, got, 6, "%+v", got)
	want := []struct {
		pv      string
		reason  arrayclients.DriftReason
		missing string
	}{
		{"b-default", arrayclients.DriftDefaultArray, "no configured unity array is the driver's default"},
		{"c-zone", arrayclients.DriftZone, "access zone tenant-b of PowerScale cluster cluster-a"},
		{"d-metro", arrayclients.DriftMetroPartner, "metro partner PS0123abcdef"},
		{"e-twice", arrayclients.DriftAmbiguous, "claimed by arrays unity-2 and unity-3"},
		{"f-cluster", arrayclients.DriftArray, "powerscale array cluster-z is not configured"},
		{"z-array", arrayclients.DriftArray, "powerflex array ffffeeeeddddcccc is not configured (arrays[].powerflex.systemID)"},
	}
	for i, w := range want {
		assert.Equal(t, w.pv, got[i].PV)
		assert.Equal(t, w.reason, got[i].Reason, w.pv)
		assert.Contains(t, got[i].Missing, w.missing, w.pv)
	}
	assert.Equal(t, "csi-pflex-b.example.com", got[5].Driver)
	assert.Equal(t, "ffffeeeeddddcccc-3c1e0b7a00000002", got[5].Handle)

	// A holder that cannot tell the zone apart reports the array.
	plain := []arrayclients.Holder{holder{arrayclients.Config{Name: "pscale-1", Family: arrayclients.PowerScale, ArrayIDs: []string{"cluster-a"}}}}
	got = arrayclients.FindDrift(pvs[8:9], drivers, plain)
	require.Len(t, got, 1)
	assert.Equal(t, arrayclients.DriftArray, got[0].Reason)

	// Every drifted volume is a gap when placed: the two agree.
	for _, d := range arrayclients.FindDrift(pvs, drivers, arrays) {
		for _, v := range pvs {
			if v.PV == d.PV {
				fv := arrayclients.Place(v, drivers, arrays)
				require.NotNil(t, fv.Gap, d.PV)
				assert.Equal(t, arrayclients.GapArrayNotConfigured, fv.Gap.Reason, d.PV)
			}
		}
	}
}
