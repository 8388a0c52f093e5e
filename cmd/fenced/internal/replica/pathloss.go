package replica

import (
	"fmt"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/fenced-project/fenced/configs"
	"github.com/fenced-project/fenced/detector"
	"github.com/fenced-project/fenced/kube"
)

var _ detector.ProtectedArrays = (*kube.VolumeArrays)(nil)

// pathLossPolicy maps clusters[].storagePathLoss onto the detector's
// storage path loss policy: enabled, grace and maxDisconnected map one to
// one; the sample interval and sample age follow the grace and the
// detection policy (detector.PathLossPolicy.WithDefaults).
func pathLossPolicy(c configs.Cluster, d detector.Policy) (detector.PathLossPolicy, error) {
	p := detector.DefaultPathLossPolicy()
	s := c.StoragePathLoss
	p.Enabled = s.Enabled
	if s.Grace > 0 {
		p.Grace = s.Grace
	}
	if !s.MaxDisconnected.IsZero() {
		l, err := detector.ParseLimit(s.MaxDisconnected.String())
		if err != nil {
			return p, fmt.Errorf("cluster %s: storagePathLoss.maxDisconnected: %w", c.Name, err)
		}
		p.MaxDisconnected = l
	}
	p = p.WithDefaults(d)
	if err := p.Validate(); err != nil {
		return p, fmt.Errorf("cluster %s: %w", c.Name, err)
	}
	return p, nil
}

// pathLoss turns the storage path loss path on in the runner's
// configuration when the cluster enables it.
func (f *fencing) pathLoss(cr *clusterRuntime, pol detector.Policy, rc *detector.RunnerConfig) error {
	p, err := pathLossPolicy(cr.cfg, pol)
	if err != nil || !p.Enabled {
		return err
	}
	if f.pathMetrics == nil {
		if f.pathMetrics, err = detector.NewPathMetrics(f.d.Registry()); err != nil {
			return err
		}
	}
	sel := labels.Nothing()
	if cr.cfg.ProtectionSelector != "" {
		if sel, err = labels.Parse(cr.cfg.ProtectionSelector); err != nil {
			return fmt.Errorf("cluster %s: protectionSelector: %w", cr.cfg.Name, err)
		}
	}
	pa := &kube.VolumeArrays{Writer: cr.writer, Selector: sel, ByDriver: map[string][]string{}}
	instances := f.d.Config().ArrayDrivers(cr.cfg)
	for _, name := range cr.cfg.Arrays {
		if _, ok := f.reg.Get(name); ok {
			// Each driver instance's volumes are on its own arrays.
			for _, d := range instances[name] {
				pa.ByDriver[d] = append(pa.ByDriver[d], name)
			}
		}
	}
	rc.PathLoss = &detector.PathLossConfig{Policy: p, Volumes: pa, Metrics: f.pathMetrics}
	f.log.Info("storage path loss verdicts on: a live node whose arrays report its paths lost is fenced",
		"cluster", cr.cfg.Name, "grace", p.Grace.String(), "maxDisconnected", p.MaxDisconnected.String(),
		"sampleInterval", p.SampleInterval.String())
	return nil
}
