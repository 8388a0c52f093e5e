package configs

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// pmaxYAML is validYAML with the array turned into a PowerMax.
func pmaxYAML(dir, options string) []byte {
	s := strings.Replace(string(render(validYAML, dir)), "family: powerstore", "family: powermax", 1)
	return []byte(s + "    powermax:\n      symmetrixID: \"000197900123\"\n" + options)
}

func TestPowerMaxClusterPrefix(t *testing.T) {
	dir := fixtureDir(t)
	cfg, err := Parse(pmaxYAML(dir, "      clusterPrefix: CR1\n"), dir, Options{})
	require.NoError(t, err)
	cc, err := cfg.Arrays[0].ClientConfig("")
	require.NoError(t, err)
	assert.Equal(t, "CR1", cc.PowerMaxClusterPrefix)

	assert.Equal(t, []string{`arrays[0].powermax.clusterPrefix: invalid prefix "CR-1": want 1 to 3 letters or digits (line 21)`},
		problems(t, pmaxYAML(dir, "      clusterPrefix: CR-1\n"), Options{}))
}

func TestPowerMaxNodeNameTemplateAndVSphereHost(t *testing.T) {
	dir := fixtureDir(t)
	cfg, err := Parse(pmaxYAML(dir, "      nodeNameTemplate: \"k8s-%node%-host\"\n      vsphereHost: esx-cluster-1\n"), dir, Options{})
	require.NoError(t, err)
	cc, err := cfg.Arrays[0].ClientConfig("")
	require.NoError(t, err)
	assert.Equal(t, "k8s-%node%-host", cc.PowerMaxNodeNameTemplate)
	assert.Equal(t, "esx-cluster-1", cc.PowerMaxVSphereHost)

	ps := problems(t, pmaxYAML(dir, "      nodeNameTemplate: \"k8s-%node\"\n"), Options{})
	require.Len(t, ps, 1)
	assert.Contains(t, ps[0], `arrays[0].powermax.nodeNameTemplate: node name template "k8s-%node" has no %...% placeholder`)
	ps = problems(t, pmaxYAML(dir, "      nodeNameTemplate: \"k8s.%node%\"\n"), Options{})
	require.Len(t, ps, 1)
	assert.Contains(t, ps[0], "arrays[0].powermax.nodeNameTemplate: ")
	ps = problems(t, pmaxYAML(dir, "      vsphereHost: \"esx/1\"\n"), Options{})
	require.Len(t, ps, 1)
	assert.Contains(t, ps[0], `arrays[0].powermax.vsphereHost: invalid host or host group name "esx/1"`)
}

func TestReplicaJoinExisting(t *testing.T) {
	dir := fixtureDir(t)
	cfg, err := Parse(render(validYAML, dir), dir, Options{})
	require.NoError(t, err)
	assert.False(t, cfg.Replica.JoinExisting)
	doc := strings.Replace(string(render(validYAML, dir)), "  raftBindAddress: 127.0.0.1:7441\n",
		"  raftBindAddress: 127.0.0.1:7441\n  joinExisting: true\n", 1)
	cfg, err = Parse([]byte(doc), dir, Options{})
	require.NoError(t, err)
	assert.True(t, cfg.Replica.JoinExisting)
}

func TestArrayMaxConcurrentCalls(t *testing.T) {
	dir := fixtureDir(t)
	cfg, err := Parse(render(validYAML, dir), dir, Options{})
	require.NoError(t, err)
	assert.Equal(t, DefaultMaxConcurrentCalls, cfg.Arrays[0].MaxConcurrentCalls)

	withCalls := func(v string) []byte {
		return []byte(strings.Replace(string(render(validYAML, dir)), "family: powerstore",
			"family: powerstore\n    maxConcurrentCalls: "+v, 1))
	}
	cfg, err = Parse(withCalls("2"), dir, Options{})
	require.NoError(t, err)
	assert.Equal(t, 2, cfg.Arrays[0].MaxConcurrentCalls)

	for _, bad := range []string{"0", "-1", "257"} {
		ps := problems(t, withCalls(bad), Options{})
		require.Len(t, ps, 1, bad)
		assert.Contains(t, ps[0], "arrays[0].maxConcurrentCalls: "+bad+" is out of range: want 1 to 256", bad)
	}
	ps := problems(t, withCalls("many"), Options{})
	require.Len(t, ps, 1)
	assert.Contains(t, ps[0], "arrays[0].maxConcurrentCalls")
}
