package replica

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/configs"
	"github.com/fenced-project/fenced/detector"
)

func TestDetectorPolicyFromConfig(t *testing.T) {
	c := configs.DefaultCluster()
	c.Name = "c1"
	p, err := detectorPolicy(c)
	require.NoError(t, err)
	assert.Equal(t, 40*time.Second, p.HeartbeatGrace)
	assert.Equal(t, 2*time.Second, p.PollInterval)
	assert.Equal(t, detector.CorroborateEither, p.Corroboration)
	assert.Equal(t, 30*time.Second, p.IOSampleWindow)
	assert.Equal(t, detector.Limit{Value: 33, Percent: true}, p.MaxUnhealthy)
	assert.Equal(t, 5*time.Minute, p.StormCooldown)
	assert.Equal(t, 2*time.Minute, p.SettlePeriod)
	assert.Equal(t, 20*time.Second, p.ProbeAfter)

	c.HeartbeatGrace, c.PollInterval, c.Corroboration = 10*time.Second, 500*time.Millisecond, configs.CorroborateKubelet
	c.StormLimit, c.StormCooldown, c.SettlePeriod = configs.Count(2), 0, 3*time.Second
	p, err = detectorPolicy(c)
	require.NoError(t, err)
	assert.Equal(t, 5*time.Second, p.ProbeAfter, "a short grace is probed from its middle")
	assert.Equal(t, detector.Limit{Value: 2}, p.MaxUnhealthy)
	assert.Equal(t, time.Duration(0), p.StormCooldown)
	assert.Equal(t, 500*time.Millisecond, p.ProbeTimeout)
	assert.Equal(t, time.Second, p.APICheckInterval)
	assert.Equal(t, detector.CorroborateKubelet, p.Corroboration)

	long := configs.DefaultCluster()
	long.Name, long.HeartbeatGrace = "c1", 100*time.Second
	p, err = detectorPolicy(long)
	require.NoError(t, err)
	assert.Equal(t, 50*time.Second, p.ProbeAfter,
		"a long grace (kubelets renewing every 25 s) is probed from its middle too, not while nodes renew on time")

	c.Corroboration = "maybe"
	_, err = detectorPolicy(c)
	require.ErrorContains(t, err, `cluster c1: policy corroboration: "maybe"`)

	c = configs.DefaultCluster()
	c.Name = "c1"
	p, err = detectorPolicy(c)
	require.NoError(t, err)
	assert.False(t, p.Early.Enabled, "the default is on only for a cluster with arrays to witness")
	c.Arrays = []string{"pflex-1"}
	p, err = detectorPolicy(c)
	require.NoError(t, err)
	assert.True(t, p.Early.Enabled, "early verdicts are on by default on a cluster with arrays")
	off := false
	c.EarlyVerdict.Enabled = &off
	p, err = detectorPolicy(c)
	require.NoError(t, err)
	assert.False(t, p.Early.Enabled, "turned off")
	on := true
	c.Arrays = nil
	c.EarlyVerdict.Enabled, c.EarlyVerdict.KubeletProbes = &on, 4
	p, err = detectorPolicy(c)
	require.NoError(t, err)
	assert.Equal(t, detector.EarlyPolicy{Enabled: true, After: 12 * time.Second, ProbeFrom: 11 * time.Second, KubeletProbes: 4, IOWindow: 6 * time.Second}, p.Early)
	// probeFrom unset follows a shorter after; set, it is taken as is.
	c.EarlyVerdict.After = 8 * time.Second
	p, err = detectorPolicy(c)
	require.NoError(t, err)
	assert.Equal(t, 8*time.Second, p.Early.ProbeFrom)
	c.EarlyVerdict.After, c.EarlyVerdict.ProbeFrom = 12*time.Second, 10500*time.Millisecond
	p, err = detectorPolicy(c)
	require.NoError(t, err)
	assert.Equal(t, 10500*time.Millisecond, p.Early.ProbeFrom)
	c.EarlyVerdict.After = time.Minute
	_, err = detectorPolicy(c)
	require.ErrorContains(t, err, "cluster c1: policy early.after")
}
