package replica

import (
	"context"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/fenced-project/fenced/arrayclients"
	"github.com/fenced-project/fenced/configs"
	"github.com/fenced-project/fenced/detector"
	"github.com/fenced-project/fenced/kube"
)

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

// csiDriver names the CSI driver whose volumes live on arrays of a family.
func csiDriver(f arrayclients.Family) string {
	switch f {
	case arrayclients.PowerFlex:
		return arrayclients.DriverPowerFlex
	case arrayclients.PowerStore:
		return arrayclients.DriverPowerStore
	case arrayclients.PowerScale:
		return arrayclients.DriverPowerScale
	case arrayclients.PowerMax:
		return arrayclients.DriverPowerMax
	case arrayclients.Unity:
		return arrayclients.DriverUnity
	}
	return ""
}

// protectedArrays finds the arrays holding a node's protected volumes: a
// volume is on every array of the cluster whose family's CSI driver
// provisioned it (with one array per family, exactly that array).
type protectedArrays struct {
	w        *kube.Writer
	sel      labels.Selector
	byDriver map[string][]string
}

var _ detector.ProtectedArrays = (*protectedArrays)(nil)

func (p *protectedArrays) ProtectedArrays(ctx context.Context, node string) ([]string, error) {
	vols, err := p.w.ProtectedVolumes(ctx, node, p.sel)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, v := range vols {
		for _, a := range p.byDriver[v.Driver] {
			if !slices.Contains(out, a) {
				out = append(out, a)
			}
		}
	}
	slices.Sort(out)
	return out, nil
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
	pa := &protectedArrays{w: cr.writer, sel: sel, byDriver: map[string][]string{}}
	for _, name := range cr.cfg.Arrays {
		if a, ok := f.reg.Get(name); ok {
			d := csiDriver(a.Family())
			pa.byDriver[d] = append(pa.byDriver[d], name)
		}
	}
	rc.PathLoss = &detector.PathLossConfig{Policy: p, Volumes: pa, Metrics: f.pathMetrics}
	f.log.Info("storage path loss verdicts on: a live node whose arrays report its paths lost is fenced",
		"cluster", cr.cfg.Name, "grace", p.Grace.String(), "maxDisconnected", p.MaxDisconnected.String(),
		"sampleInterval", p.SampleInterval.String())
	return nil
}
