package configs

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/arrayclients"
)

// twoInstancesYAML has two PowerStore arrays in one cluster; %[2]s is
// the cluster's extra settings, %[3]s and %[4]s those of ps-a and ps-b.
const twoInstancesYAML = `replica:
  id: r1
  tls: {certFile: %[1]s/raft.pem, keyFile: %[1]s/raft.pem, caFile: %[1]s/raft.pem}
  raftBindAddress: 127.0.0.1:7441
clusters:
  - name: c1
    kubeconfig: %[1]s/kubeconfig
    arrays: [ps-a, ps-b]
%[2]s
arrays:
  - name: ps-a
    family: powerstore
    endpoint: https://127.0.0.1:9443
    username: admin
    passwordFile: %[1]s/pw
    powerstore: {globalID: PS000000000A}
%[3]s
  - name: ps-b
    family: powerstore
    endpoint: https://127.0.0.2:9443
    username: admin
    passwordFile: %[1]s/pw
    powerstore: {globalID: PS000000000B}
%[4]s
`

func twoInstances(dir, cluster, a, b string) []byte {
	r := strings.NewReplacer("%[1]s", dir, "%[2]s", cluster, "%[3]s", a, "%[4]s", b)
	return []byte(r.Replace(twoInstancesYAML))
}

// Two csi-powerstore instances, one per array: each array is resolved
// with the node IDs of its own driver, and the second driver's volumes
// are known to be PowerStore's without being listed in
// clusters[].drivers.
func TestArrayDriverNames(t *testing.T) {
	dir := fixtureDir(t)
	const second = "csi-powerstore-2.dellemc.com"
	cfg, err := Parse(twoInstances(dir, "", "", "    driverName: "+second), dir, Options{})
	require.NoError(t, err)
	cl := cfg.Clusters[0]
	assert.Equal(t, map[string][]string{"ps-a": {arrayclients.DriverPowerStore}, "ps-b": {second}}, cfg.ArrayDrivers(cl))
	assert.Equal(t, arrayclients.PowerStore, cl.DriverFamilies()[second])

	// Both named.
	cfg, err = Parse(twoInstances(dir, "", "    driverName: csi-powerstore.dellemc.com", "    driverName: "+second), dir, Options{})
	require.NoError(t, err)
	assert.Equal(t, map[string][]string{"ps-a": {arrayclients.DriverPowerStore}, "ps-b": {second}}, cfg.ArrayDrivers(cfg.Clusters[0]))

	// One driver installed under another name, listed in
	// clusters[].drivers as before driverName: the one array without a
	// driverName is resolved with the default name, else that one.
	// (Keys of the file hold no dots, so such a name has none.)
	const renamed = "csi-powerstore-b"
	one := strings.Replace(string(twoInstances(dir, "    drivers: {"+renamed+": powerstore}", "", "")),
		"    arrays: [ps-a, ps-b]\n", "    arrays: [ps-a]\n", 1)
	cfg, err = Parse([]byte(one), dir, Options{})
	require.NoError(t, err)
	assert.Equal(t, map[string][]string{"ps-a": {arrayclients.DriverPowerStore, renamed}}, cfg.ArrayDrivers(cfg.Clusters[0]))

	// Two arrays, one driver (the default): no driverName needed.
	cfg, err = Parse(twoInstances(dir, "", "", ""), dir, Options{})
	require.NoError(t, err)
	assert.Equal(t, map[string][]string{"ps-a": {arrayclients.DriverPowerStore}, "ps-b": {arrayclients.DriverPowerStore}},
		cfg.ArrayDrivers(cfg.Clusters[0]))
}

// A configuration where fenced could not tell which driver instance
// serves an array, or with a driver name that cannot be one, is refused
// naming the field.
func TestArrayDriverNameProblems(t *testing.T) {
	dir := fixtureDir(t)
	// Keys of the file hold no dots, so names in clusters[].drivers have
	// none.
	const second = "csi-powerstore-2"
	ambiguous := "required: cluster c1 knows the powerstore drivers csi-powerstore.dellemc.com, " + second +
		", and its powerstore arrays ps-a, ps-b name no driverName: which driver instance's node IDs identify a node on %s " +
		"is ambiguous; set driverName to the driver whose secret lists the array"
	tcs := []struct {
		name          string
		cluster, a, b string
		want          []string
	}{
		{
			name:    "two arrays and a second driver of the family, no driverName",
			cluster: "    drivers: {" + second + ": powerstore}",
			want: []string{
				"arrays[0].driverName: " + strings.ReplaceAll(ambiguous, "%s", "ps-a"),
				"arrays[1].driverName: " + strings.ReplaceAll(ambiguous, "%s", "ps-b"),
			},
		},
		{
			name:    "one array without driverName and two other drivers of the family",
			cluster: "    drivers: {" + second + ": powerstore, csi-powerstore-3: powerstore}",
			b:       "    driverName: csi-powerstore-4.dellemc.com",
			want: []string{"arrays[0].driverName: required: cluster c1 knows the powerstore drivers csi-powerstore.dellemc.com, " +
				second + ", csi-powerstore-3, and its powerstore arrays ps-a name no driverName: which driver " +
				"instance's node IDs identify a node on ps-a is ambiguous; set driverName to the driver whose secret lists the array"},
		},
		{
			name: "not a DNS name",
			a:    "    driverName: CSI_PowerStore",
			want: []string{`arrays[0].driverName: invalid CSI driver name "CSI_PowerStore": want a DNS subdomain of at most 63 characters (lower case)`},
		},
		{
			name: "another family's driver",
			a:    "    driverName: csi-unity.dellemc.com",
			want: []string{`arrays[0].driverName: "csi-unity.dellemc.com" is the unity driver's name, but the array is a powerstore array`},
		},
		{
			name:    "mapped to another family in clusters[].drivers",
			cluster: "    drivers: {" + second + ": unity}",
			b:       "    driverName: " + second,
			want: []string{"clusters[0].drivers." + second + ": maps the driver to unity, but arrays[1] (ps-b, a powerstore array) " +
				"names it as its driverName"},
		},
	}
	for _, tc := range tcs {
		t.Run(tc.name, func(t *testing.T) {
			got := problems(t, twoInstances(dir, tc.cluster, tc.a, tc.b), Options{})
			for i := range got {
				// Drop the line numbers: the fields are what is checked.
				if j := strings.LastIndex(got[i], " (line "); j > 0 {
					got[i] = got[i][:j]
				}
			}
			assert.ElementsMatch(t, tc.want, got)
		})
	}
}
