package replica

import (
	"fmt"
	"time"

	"github.com/fenced-project/fenced/configs"
	"github.com/fenced-project/fenced/detector"
)

// detectorPolicy maps a cluster's configuration onto the detector's policy.
// The configured keys map one to one (heartbeatGrace, pollInterval,
// corroboration, ioWindow, stormLimit, stormCooldown, settlePeriod,
// earlyVerdict); the
// detector's own timings that the configuration does not expose keep their
// defaults, shortened where a short grace or poll interval needs it:
// probeAfter is half the grace (a node is probed before its grace runs
// out, and not while it renews on time: kubelets whose Leases last longer
// than 40 s renew less often than every 10 s, and their grace is set
// longer), and the evidence age and probe timeout follow the poll
// interval.
func detectorPolicy(c configs.Cluster) (detector.Policy, error) {
	p := detector.DefaultPolicy()
	setDur := func(dst *time.Duration, v time.Duration) {
		if v > 0 {
			*dst = v
		}
	}
	setDur(&p.HeartbeatGrace, c.HeartbeatGrace)
	setDur(&p.PollInterval, c.PollInterval)
	setDur(&p.IOSampleWindow, c.IOWindow)
	setDur(&p.SettlePeriod, c.SettlePeriod)
	if c.StormCooldown >= 0 {
		p.StormCooldown = c.StormCooldown
	}
	if c.Corroboration != "" {
		p.Corroboration = detector.Corroboration(c.Corroboration)
	}
	if !c.StormLimit.IsZero() {
		l, err := detector.ParseLimit(c.StormLimit.String())
		if err != nil {
			return p, fmt.Errorf("cluster %s: stormLimit: %w", c.Name, err)
		}
		p.MaxUnhealthy = l
	}
	if on, _ := c.EarlyVerdictOn(); on {
		e := c.EarlyVerdict
		p.Early = detector.EarlyPolicy{Enabled: true, After: e.After, ProbeFrom: e.ProbeStart(), KubeletProbes: e.KubeletProbes, IOWindow: e.IOWindow}
	}
	// Half the grace, not at most 20 s: with kubelets renewing every 25 s
	// (a 100 s Lease) and a grace of 100 s, a node 20 s old is on time,
	// and counting it late had a fifth of the nodes probed at every
	// moment and counted towards the storm limit.
	p.ProbeAfter = p.HeartbeatGrace / 2
	// Evidence must outlive a few polls, and a probe must end within one.
	p.EvidenceMaxAge = max(p.EvidenceMaxAge, 3*p.PollInterval)
	p.ProbeTimeout = min(p.ProbeTimeout, max(p.PollInterval, 200*time.Millisecond))
	p.APICheckInterval = min(p.APICheckInterval, max(p.PollInterval, time.Second))
	p.APICheckMaxAge = max(p.APICheckMaxAge, 3*p.APICheckInterval)
	if err := p.Validate(); err != nil {
		return p, fmt.Errorf("cluster %s: %w", c.Name, err)
	}
	return p, nil
}
