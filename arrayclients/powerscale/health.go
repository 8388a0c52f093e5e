package powerscale

import (
	"context"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/dell/goisilon"

	"github.com/fenced-project/fenced/arrayclients"
)

// Health looks for the node's IPs in the cluster's NFS client statistics.
// Only traffic is a signal: an entry means I/O from the node (and so a
// working path). NFS keeps no session state, so absence says the node is
// idle, never that it is disconnected: connectivity stays unknown. When the
// array cannot be read, both are unknown and the error wraps
// ErrUnreachable.
func (a *PowerScaleAdapter) Health(ctx context.Context, id arrayclients.Identity) (arrayclients.Health, error) {
	ctx = arrayclients.WithIsilonLogger(ctx, a.logger)
	hl := arrayclients.Health{Array: a.cfg.Name, Node: id.Node, Connectivity: arrayclients.ConnectivityUnknown, IO: arrayclients.IOUnknown}
	keys, err := a.checkIdentity(id)
	if err != nil {
		hl.Reason = err.Error()
		return hl, fmt.Errorf("powerscale array %s: health of node %s: %w", a.cfg.Name, id.Node, err)
	}
	if len(keys.ips) == 0 {
		hl.Reason = "the identity has no IP address to look for in the client statistics"
		hl.SampledAt = time.Now().UTC()
		return hl, nil
	}
	err = a.with(ctx, func(c *goisilon.Client) error {
		stats, err := c.IsIOInProgress(ctx)
		if err != nil {
			return fmt.Errorf("read NFS client statistics: %w", err)
		}
		if stats == nil || stats.ClientsList == nil {
			return fmt.Errorf("read NFS client statistics: response without a client list (empty or truncated body)")
		}
		hl.SampledAt = time.Now().UTC()
		for _, s := range stats.ClientsList {
			if s == nil {
				continue
			}
			if ip := net.ParseIP(s.RemoteAddr); ip != nil && keys.hasIP(ip) {
				hl.Connectivity, hl.IO = arrayclients.Connected, arrayclients.IOActive
				hl.Reason = fmt.Sprintf("%s traffic from %s", s.Protocol, s.RemoteAddr)
				return nil
			}
		}
		hl.IO = arrayclients.IOIdle
		hl.Reason = fmt.Sprintf("no NFS client statistics from %s (NFS has no session state: absence is not disconnection)", ipList(keys.ips))
		return nil
	})
	if err != nil {
		err = scClassify(err)
		hl.Connectivity, hl.IO, hl.Reason = arrayclients.ConnectivityUnknown, arrayclients.IOUnknown, err.Error()
		return hl, fmt.Errorf("powerscale array %s: health of node %s: %w", a.cfg.Name, id.Node, err)
	}
	return hl, nil
}

// Check reads the cluster configuration: reachable, authenticated, the
// platform API version and the OneFS release.
func (a *PowerScaleAdapter) Check(ctx context.Context) arrayclients.CheckResult {
	ctx = arrayclients.WithIsilonLogger(ctx, a.logger)
	res := arrayclients.CheckResult{Array: a.cfg.Name, Family: arrayclients.PowerScale}
	err := a.with(ctx, func(c *goisilon.Client) error {
		cfg, err := c.GetClusterConfig(ctx)
		if err != nil {
			return err
		}
		release := ""
		if cfg != nil && cfg.OnefsVersion != nil {
			release = cfg.OnefsVersion.Release
		}
		if release == "" {
			return fmt.Errorf("cluster config has no OneFS release")
		}
		res.APIVersion = fmt.Sprintf("platform %d, OneFS %s", c.API.APIVersion(), release)
		return nil
	})
	res.CheckedAt = time.Now().UTC()
	if err != nil {
		res.Error = fmt.Sprintf("powerscale array %s: check: %v", a.cfg.Name, scClassify(err))
		return res
	}
	res.Reachable = true
	return res
}

// ipList renders IPs for messages.
func ipList(ips []net.IP) string {
	out := make([]string, 0, len(ips))
	for _, ip := range ips {
		out = append(out, ip.String())
	}
	return strings.Join(out, ", ")
}
