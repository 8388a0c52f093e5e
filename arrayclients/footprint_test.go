package arrayclients_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/arrayclients"
)

// The handle forms come from each driver's own parser (see footprint.go);
// the examples are the ones in the drivers' comments and tests.
func TestParseVolumeHandle(t *testing.T) {
	tcs := []struct {
		name   string
		family arrayclients.Family
		handle string
		fsType string
		want   arrayclients.VolumeLocation
	}{
		{"powerflex block", arrayclients.PowerFlex, "7f5d8fa37e2a1c0f-3c1e0b7a00000001", "",
			arrayclients.VolumeLocation{ArrayID: "7f5d8fa37e2a1c0f", Object: "3c1e0b7a00000001", Protocol: arrayclients.ProtocolBlock}},
		{"powerflex bare id on the default system", arrayclients.PowerFlex, "3c1e0b7a00000001", "",
			arrayclients.VolumeLocation{Object: "3c1e0b7a00000001", Protocol: arrayclients.ProtocolBlock}},
		{"powerflex system named with dashes: default system", arrayclients.PowerFlex, "sys-a-3c1e0b7a00000001", "",
			arrayclients.VolumeLocation{Object: "3c1e0b7a00000001", Protocol: arrayclients.ProtocolBlock}},
		{"powerflex nfs", arrayclients.PowerFlex, "7f5d8fa37e2a1c0f/64b0b3a5-1f0b-4c5e-9f0e-0a1b2c3d4e5f", "",
			arrayclients.VolumeLocation{ArrayID: "7f5d8fa37e2a1c0f", Object: "64b0b3a5-1f0b-4c5e-9f0e-0a1b2c3d4e5f", Protocol: arrayclients.ProtocolNFS}},
		{"powerstore scsi", arrayclients.PowerStore, "9f840c56-96e6-4de9-b5a3-27e7c20eaa77/PSabcdef0123/scsi", "ext4",
			arrayclients.VolumeLocation{ArrayID: "PSabcdef0123", Object: "9f840c56-96e6-4de9-b5a3-27e7c20eaa77", Protocol: arrayclients.ProtocolBlock}},
		{"powerstore nfs by IP", arrayclients.PowerStore, "9f840c56-96e6-4de9-b5a3-27e7c20eaa77/10.0.0.5/nfs", "",
			arrayclients.VolumeLocation{ArrayID: "10.0.0.5", Object: "9f840c56-96e6-4de9-b5a3-27e7c20eaa77", Protocol: arrayclients.ProtocolNFS}},
		{"powerstore legacy nfs", arrayclients.PowerStore, "9f840c56-96e6-4de9-b5a3-27e7c20eaa77", "nfs",
			arrayclients.VolumeLocation{Object: "9f840c56-96e6-4de9-b5a3-27e7c20eaa77", Protocol: arrayclients.ProtocolNFS}},
		{"powerstore metro", arrayclients.PowerStore, "9f840c56-96e6-4de9-b5a3-27e7c20eaa77/PSabcdef0123/scsi:0a1b2c3d-96e6-4de9-b5a3-27e7c20eaa77/PS0123abcdef", "",
			arrayclients.VolumeLocation{ArrayID: "PSabcdef0123", Object: "9f840c56-96e6-4de9-b5a3-27e7c20eaa77", Protocol: arrayclients.ProtocolBlock,
				Remote: &arrayclients.VolumeLocation{Family: arrayclients.PowerStore, ArrayID: "PS0123abcdef", Object: "0a1b2c3d-96e6-4de9-b5a3-27e7c20eaa77", Protocol: arrayclients.ProtocolBlock}}},
		{"powermax block", arrayclients.PowerMax, "csi-ABC-pmax-260602731A-ns1-nsx-000120000548-011AB", "",
			arrayclients.VolumeLocation{ArrayID: "000120000548", Object: "011AB", Name: "csi-ABC-pmax-260602731A-ns1-nsx", Protocol: arrayclients.ProtocolBlock}},
		{"powermax file system", arrayclients.PowerMax, "csi-ABC-pmax-448c258b72-ns1-nsx-000120000549-649112ce-742b-b93a-abcd-026048200208", "",
			arrayclients.VolumeLocation{ArrayID: "000120000549", Object: "649112ce-742b-b93a-abcd-026048200208", Name: "csi-ABC-pmax-448c258b72-ns1-nsx", Protocol: arrayclients.ProtocolNFS}},
		{"powermax srdf", arrayclients.PowerMax, "csi-ABC-pmax-260602731A-000120000548:000120000549-011AB:022CD", "",
			arrayclients.VolumeLocation{ArrayID: "000120000548", Object: "011AB", Name: "csi-ABC-pmax-260602731A", Protocol: arrayclients.ProtocolBlock,
				Remote: &arrayclients.VolumeLocation{Family: arrayclients.PowerMax, ArrayID: "000120000549", Object: "022CD", Name: "csi-ABC-pmax-260602731A", Protocol: arrayclients.ProtocolBlock}}},
		{"unity iscsi", arrayclients.Unity, "csivol-3c1e0b7a-iSCSI-apm00123456789-sv_12", "",
			arrayclients.VolumeLocation{ArrayID: "apm00123456789", Object: "sv_12", Name: "csivol-3c1e0b7a", Protocol: arrayclients.ProtocolBlock}},
		{"unity fc", arrayclients.Unity, "vol-FC-apm00123456789-sv_3", "",
			arrayclients.VolumeLocation{ArrayID: "apm00123456789", Object: "sv_3", Name: "vol", Protocol: arrayclients.ProtocolBlock}},
		{"unity nfs", arrayclients.Unity, "csivol-1-NFS-apm00123456789-fs_4", "",
			arrayclients.VolumeLocation{ArrayID: "apm00123456789", Object: "fs_4", Name: "csivol-1", Protocol: arrayclients.ProtocolNFS}},
		{"unity legacy lun", arrayclients.Unity, "sv_12", "",
			arrayclients.VolumeLocation{Object: "sv_12", Protocol: arrayclients.ProtocolBlock}},
		{"powerscale", arrayclients.PowerScale, "k8s-7a0e4c1d=_=_=12=_=_=System=_=_=cluster-a", "",
			arrayclients.VolumeLocation{ArrayID: "cluster-a", Zone: "System", Object: "12", Name: "k8s-7a0e4c1d", Protocol: arrayclients.ProtocolNFS}},
		{"powerscale default cluster", arrayclients.PowerScale, "k8s-7a0e4c1d=_=_=12=_=_=tenant-b", "",
			arrayclients.VolumeLocation{Zone: "tenant-b", Object: "12", Name: "k8s-7a0e4c1d", Protocol: arrayclients.ProtocolNFS}},
	}
	for _, tc := range tcs {
		t.Run(tc.name, func(t *testing.T) {
			got, err := arrayclients.ParseVolumeHandle(tc.family, tc.handle, tc.fsType)
			require.NoError(t, err)
			tc.want.Family = tc.family
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestParseVolumeHandleRefusals(t *testing.T) {
	tcs := []struct {
		family arrayclients.Family
		handle string
		want   string
	}{
		{arrayclients.PowerFlex, "", "empty"},
		{arrayclients.PowerFlex, "sys/", "NFS handle"},
		{arrayclients.PowerFlex, "sys-", "block handle"},
		{arrayclients.PowerStore, "uuid/PS1/iscsi", "neither scsi nor nfs"},
		{arrayclients.PowerStore, "uuid/PS1", "a handle is"},
		{arrayclients.PowerStore, "uuid/PS1/scsi:remote", "metro"},
		{arrayclients.PowerMax, "a-b", "ends in"},
		{arrayclients.PowerMax, "x-000120000548-011AB", "no volume name"},
		{arrayclients.Unity, "a-b-c", "a handle is"},
		{arrayclients.Unity, "vol-SAS-apm1-sv_1", "not FC, iSCSI or NFS"},
		{arrayclients.Unity, "lun12", "legacy handle"},
		{arrayclients.PowerScale, "name=_=_=12", "a handle is"},
		{arrayclients.PowerScale, "name=_=_=x12=_=_=System", "not a number"},
		{arrayclients.PowerScale, "name=_=_=12=_=_=", "zone is empty"},
		{arrayclients.Family("hitachi"), "x", "unknown family"},
		{arrayclients.PowerFlex, "a b", "not a handle"},
	}
	for _, tc := range tcs {
		_, err := arrayclients.ParseVolumeHandle(tc.family, tc.handle, "")
		require.Error(t, err, "%s %q", tc.family, tc.handle)
		assert.Contains(t, err.Error(), tc.want, "%s %q", tc.family, tc.handle)
	}
}

// FuzzParseVolumeHandle: any handle either parses to a location of the
// family with an object, or is refused with an error naming the family;
// never a panic.
func FuzzParseVolumeHandle(f *testing.F) {
	for _, s := range []string{"7f5d8fa37e2a1c0f-3c1e0b7a00000001", "sys/fs", "uuid/PS1/scsi:r/PS2",
		"csi-ABC-pmax-448c258b72-ns1-nsx-000120000549-649112ce-742b-b93a-abcd-026048200208",
		"csivol-1-NFS-apm00123456789-fs_4", "k8s=_=_=12=_=_=System=_=_=c", "a:b:c/d/e", "-", "=_=_="} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, handle string) {
		for _, fam := range arrayclients.Families {
			loc, err := arrayclients.ParseVolumeHandle(fam, handle, "")
			if err != nil {
				if !strings.Contains(err.Error(), string(fam)) {
					t.Fatalf("%s %q: error %q does not name the family", fam, handle, err)
				}
				continue
			}
			if loc.Family != fam || loc.Object == "" || (loc.Protocol != arrayclients.ProtocolBlock && loc.Protocol != arrayclients.ProtocolNFS) {
				t.Fatalf("%s %q: incomplete location %+v", fam, handle, loc)
			}
		}
	})
}

type holder struct{ cfg arrayclients.Config }

func (h holder) Name() string                               { return h.cfg.Name }
func (h holder) Family() arrayclients.Family                { return h.cfg.Family }
func (h holder) Holds(loc arrayclients.VolumeLocation) bool { return h.cfg.Holds(loc) }

func TestPlaceVolumes(t *testing.T) {
	arrays := []arrayclients.Holder{
		holder{arrayclients.Config{Name: "pflex-1", Family: arrayclients.PowerFlex, ArrayIDs: []string{"7f5d8fa37e2a1c0f", "sys-1"}, CSIDefault: true}},
		holder{arrayclients.Config{Name: "pstore-a", Family: arrayclients.PowerStore, ArrayIDs: []string{"PSabcdef0123"}}},
		holder{arrayclients.Config{Name: "pscale-1", Family: arrayclients.PowerScale, ArrayIDs: []string{"cluster-a"}, Zone: "System"}},
		holder{arrayclients.Config{Name: "unity-1", Family: arrayclients.Unity, ArrayIDs: []string{"APM00123456789"}}},
	}
	drivers := arrayclients.DefaultDrivers()
	drivers["csi-powerstore-b.example.com"] = arrayclients.PowerStore
	kv := func(driver, handle string) arrayclients.KubeVolume {
		return arrayclients.KubeVolume{PV: "pv-1", Attachment: "csi-va-1", Driver: driver, Handle: handle, Attached: true}
	}
	tcs := []struct {
		name   string
		v      arrayclients.KubeVolume
		arrays []string
		gap    arrayclients.GapReason
		detail string
	}{
		{"by system id", kv(arrayclients.DriverPowerFlex, "7f5d8fa37e2a1c0f-3c1e0b7a00000001"), []string{"pflex-1"}, "", ""},
		{"by system name", kv(arrayclients.DriverPowerFlex, "sys-1-3c1e0b7a00000001"), []string{"pflex-1"}, "", ""},
		{"bare id on the default array", kv(arrayclients.DriverPowerFlex, "3c1e0b7a00000001"), []string{"pflex-1"}, "", ""},
		{"unity array id in another case", kv(arrayclients.DriverUnity, "v-iSCSI-apm00123456789-sv_1"), []string{"unity-1"}, "", ""},
		{"driver under another name", kv("csi-powerstore-b.example.com", "u/PSabcdef0123/scsi"), []string{"pstore-a"}, "", ""},
		{"unknown driver", kv("ebs.csi.aws.com", "vol-0a"), nil, arrayclients.GapUnknownDriver, "ebs.csi.aws.com"},
		{"bad handle", kv(arrayclients.DriverUnity, "nonsense"), nil, arrayclients.GapBadHandle, "legacy handle"},
		{"no handle", kv(arrayclients.DriverUnity, ""), nil, arrayclients.GapBadHandle, "no CSI volume handle"},
		{"array not configured", kv(arrayclients.DriverPowerStore, "u/PSffffffffff/scsi"), nil, arrayclients.GapArrayNotConfigured, "powerstore.globalID"},
		{"no default array", kv(arrayclients.DriverUnity, "sv_1"), nil, arrayclients.GapArrayNotConfigured, "default array"},
		{"zone not configured", kv(arrayclients.DriverPowerScale, "k=_=_=12=_=_=tenant-b=_=_=cluster-a"), nil, arrayclients.GapArrayNotConfigured, "zone tenant-b"},
		{"metro partner not configured", kv(arrayclients.DriverPowerStore, "u/PSabcdef0123/scsi:r/PS0123abcdef"), nil,
			arrayclients.GapArrayNotConfigured, "metro partner"},
	}
	for _, tc := range tcs {
		t.Run(tc.name, func(t *testing.T) {
			fv := arrayclients.Place(tc.v, drivers, arrays)
			if tc.gap != "" {
				require.NotNil(t, fv.Gap)
				assert.Equal(t, tc.gap, fv.Gap.Reason)
				assert.Contains(t, fv.Gap.Detail, tc.detail)
				assert.Empty(t, fv.Placements)
				return
			}
			require.Nil(t, fv.Gap)
			var got []string
			for _, p := range fv.Placements {
				got = append(got, p.Array)
				assert.Equal(t, "pv-1", p.Volume)
				assert.True(t, p.Attached)
			}
			assert.Equal(t, tc.arrays, got)
		})
	}

	// Both halves of a metro volume are placed when both arrays are configured.
	withPartner := append(arrays, holder{arrayclients.Config{Name: "pstore-b", Family: arrayclients.PowerStore, ArrayIDs: []string{"PS0123abcdef"}}})
	fv := arrayclients.Place(kv(arrayclients.DriverPowerStore, "u/PSabcdef0123/scsi:r/PS0123abcdef"), drivers, withPartner)
	require.Nil(t, fv.Gap)
	require.Len(t, fv.Placements, 2)
	assert.Equal(t, "pstore-a", fv.Placements[0].Array)
	assert.Equal(t, "u", fv.Placements[0].Object)
	assert.Equal(t, "pstore-b", fv.Placements[1].Array)
	assert.Equal(t, "r", fv.Placements[1].Object)

	// Two arrays claiming one handle is a gap, not a guess.
	twice := append(arrays, holder{arrayclients.Config{Name: "pflex-2", Family: arrayclients.PowerFlex, ArrayIDs: []string{"7F5D8FA37E2A1C0F"}}})
	fv = arrayclients.Place(kv(arrayclients.DriverPowerFlex, "7f5d8fa37e2a1c0f-1"), drivers, twice)
	require.NotNil(t, fv.Gap)
	assert.Contains(t, fv.Gap.Detail, "claimed by arrays pflex-1 and pflex-2")
}
