package configs

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/arrayclients"
)

// arrayHolder places volumes on a configured array as the runtime does
// (arrayclients.Config.Holds with the array's handle IDs).
type arrayHolder struct{ cfg arrayclients.Config }

func (h arrayHolder) Name() string                               { return h.cfg.Name }
func (h arrayHolder) Family() arrayclients.Family                { return h.cfg.Family }
func (h arrayHolder) Holds(loc arrayclients.VolumeLocation) bool { return h.cfg.Holds(loc) }

func holdersOf(cfg *Config) []arrayclients.Holder {
	var out []arrayclients.Holder
	for _, a := range cfg.Arrays {
		out = append(out, arrayHolder{arrayclients.Config{Name: a.Name, Family: a.Family, ArrayIDs: a.HandleIDs(),
			CSIDefault: a.CSIDefault, Zone: a.PowerScale.Zone}})
	}
	return out
}

// TestShippedExampleProtects checks the production examples as the package
// installs them (the first is /etc/fenced/fenced.yaml): every cluster is in
// dry-run; validation warns, naming the field, about each array whose
// placeholder ID is empty ("can place no volume: set ..."); and with the
// placeholders filled as an operator would from the CSI drivers' secrets,
// the warnings are gone and a volume of every family is placed on its
// array.
func TestShippedExampleProtects(t *testing.T) {
	fill := map[string]string{
		"globalID: \"\"":    "globalID: PS4ebb8d4e8488",
		"clusterName: \"\"": "clusterName: isilon-1",
		"arrayID: \"\"":     "arrayID: APM00123456789",
	}
	volumes := map[string]arrayclients.KubeVolume{
		"powerflex-1":  {PV: "pv-flex", Driver: arrayclients.DriverPowerFlex, Handle: "7f5d8fc72e4a1c0f-3c1e0b7a00000001"},
		"powerstore-1": {PV: "pv-store", Driver: arrayclients.DriverPowerStore, Handle: "0b6b5a4e-5d2c-4a8e-9f0e-1c2d3e4f5a6b/PS4ebb8d4e8488/scsi"},
		"powerscale-1": {PV: "pv-scale", Driver: arrayclients.DriverPowerScale, Handle: "k8s-0a1b2c=_=_=12=_=_=System=_=_=isilon-1"},
		"powermax-1":   {PV: "pv-max", Driver: arrayclients.DriverPowerMax, Handle: "csi-CR1-pmax-0a1b2c3d4e-000197900123-00123"},
		"unity-1":      {PV: "pv-unity", Driver: arrayclients.DriverUnity, Handle: "csivol-0a1b2c-iSCSI-apm00123456789-sv_1"},
	}
	for _, f := range []string{"production-mgmt1.yaml", "production-mgmt2.yaml", "production-mgmt3.yaml"} {
		t.Run(f, func(t *testing.T) {
			cfg, err := Load(f, Options{})
			require.NoError(t, err)
			for _, c := range cfg.Clusters {
				assert.True(t, c.DryRun, "cluster %s of the shipped example must start in dry-run", c.Name)
			}
			got := map[string]string{}
			for _, w := range cfg.Warnings() {
				if strings.Contains(w.Message, "can place no volume") {
					got[w.Path] = w.Message
				}
			}
			assert.Equal(t, []string{"arrays[1].powerstore.globalID", "arrays[2].powerscale.clusterName", "arrays[4].unity.arrayID"},
				slices.Sorted(maps.Keys(got)), "placeholder warnings: %v", got)
			assert.Contains(t, got["arrays[1].powerstore.globalID"], "array powerstore-1 can place no volume: set powerstore.globalID")
			assert.Contains(t, got["arrays[2].powerscale.clusterName"], "array powerscale-1 can place no volume: set powerscale.clusterName")
			assert.Contains(t, got["arrays[4].unity.arrayID"], "array unity-1 can place no volume: set unity.arrayID")
			// As shipped, the volumes of those three arrays are gaps.
			for name, v := range volumes {
				fv := arrayclients.Place(v, arrayclients.DefaultDrivers(), holdersOf(cfg))
				if name == "powerflex-1" || name == "powermax-1" {
					assert.Nil(t, fv.Gap, name)
				} else {
					require.NotNil(t, fv.Gap, name)
					assert.Equal(t, arrayclients.GapArrayNotConfigured, fv.Gap.Reason, name)
				}
			}

			b, err := os.ReadFile(f)
			require.NoError(t, err)
			text := string(b)
			for from, to := range fill {
				require.Equal(t, 1, strings.Count(text, from), "placeholder %s", from)
				text = strings.Replace(text, from, to, 1)
			}
			filled := filepath.Join(t.TempDir(), f)
			require.NoError(t, os.WriteFile(filled, []byte(text), 0o644))
			cfg, err = Load(filled, Options{})
			require.NoError(t, err)
			for _, w := range cfg.Warnings() {
				assert.NotContains(t, w.Message, "can place no volume", w.Path)
			}
			for name, v := range volumes {
				fv := arrayclients.Place(v, arrayclients.DefaultDrivers(), holdersOf(cfg))
				require.Nil(t, fv.Gap, "%s: %+v", name, fv.Gap)
				require.Len(t, fv.Placements, 1, name)
				assert.Equal(t, name, fv.Placements[0].Array)
			}
		})
	}
}
