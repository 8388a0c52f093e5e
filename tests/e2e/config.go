package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"go.yaml.in/yaml/v3"
)

// ClusterTiming are the cluster settings scenarios tune; zero values keep
// fenced's defaults.
type ClusterTiming struct {
	HeartbeatGrace time.Duration
	PollInterval   time.Duration
	SettlePeriod   time.Duration
	StormCooldown  time.Duration
	// IOWindow is how long the arrays must see no I/O from a node before
	// they corroborate its death.
	IOWindow time.Duration
	// StormLimit is a count ("1") or a percentage ("33%").
	StormLimit    string
	Corroboration string
	DryRun        bool
	// EarlyVerdict sets clusters[].earlyVerdict.enabled: EarlyOn or
	// EarlyOff; EarlyDefault leaves it unset (the product's default: on
	// where it can apply, with after 12s, probeFrom 11s, kubeletProbes 3, ioWindow 6s).
	EarlyVerdict EarlyMode
	// EarlyAfter and EarlyProbeFrom set clusters[].earlyVerdict.after and
	// .probeFrom when not zero (a run whose kubelets renew less often than
	// every 10 s needs them later than the defaults).
	EarlyAfter, EarlyProbeFrom time.Duration
	// HeldPeriod is clusters[].heldPeriod: how often an open fence's cuts
	// are read back. The invariant checker's held rule uses it too.
	HeldPeriod time.Duration
	// NodeHealthCheck sets clusters[].nodeHealthCheck.enabled: fenced is
	// a remediator of medik8s NodeHealthCheck.
	NodeHealthCheck bool
	// NodeLeases sets clusters[].nodeHealthCheck.leases: fenced takes the
	// medik8s node Lease before fencing on its own verdict.
	NodeLeases bool
	// StatusObject sets clusters[].statusObject.
	StatusObject bool
}

// EarlyMode is how a run sets clusters[].earlyVerdict.enabled.
type EarlyMode int

// Early verdict settings of a run.
const (
	EarlyDefault EarlyMode = iota
	EarlyOn
	EarlyOff
)

// replicaConfig is what one replica's configuration file needs.
type replicaConfig struct {
	ID, DataDir, RaftBind  string
	TLSCert, TLSKey, TLSCA string
	HTTPListen             string
	TokenFile              string
	Pprof                  bool
	Peers                  []peerConfig
	Clusters               []clusterRef
	Timing                 ClusterTiming
	Arrays                 []arrayConfig
}

type peerConfig struct{ ID, RaftAddr, HTTPURL string }

// clusterRef is one protected cluster of a replica's configuration.
type clusterRef struct{ Name, Kubeconfig string }

type arrayConfig struct {
	Name, Family, Endpoint, Username, PasswordFile, CAFile string
	Options                                                map[string]any
}

func dur(d time.Duration) any {
	if d == 0 {
		return nil
	}
	return d.String()
}

// write writes the configuration file at path.
func (c replicaConfig) write(path string) error {
	peers := []map[string]any{}
	for _, p := range c.Peers {
		peers = append(peers, map[string]any{"id": p.ID, "raftAddress": p.RaftAddr, "httpAddress": p.HTTPURL})
	}
	var names []string
	for _, a := range c.Arrays {
		names = append(names, a.Name)
	}
	clusters := []any{}
	for _, ref := range c.Clusters {
		clusters = append(clusters, c.cluster(ref, names))
	}
	arrays := []map[string]any{}
	for _, a := range c.Arrays {
		m := map[string]any{"name": a.Name, "family": a.Family, "endpoint": a.Endpoint, "username": a.Username,
			"passwordFile": a.PasswordFile, "caFile": a.CAFile, "requestTimeout": "5s"}
		if len(a.Options) > 0 {
			m[a.Family] = a.Options
		}
		if a.Family == "powerscale" || a.Family == "unity" {
			// goisilon and gounity take no custom CA: the simulator's
			// certificate cannot be verified (the configuration allows
			// this for test arrays only).
			delete(m, "caFile")
			m["insecure"] = true
		}
		arrays = append(arrays, m)
	}
	httpSection := map[string]any{"listen": c.HTTPListen, "tokenFile": c.TokenFile}
	if c.Pprof {
		httpSection["pprof"] = true
	}
	doc := map[string]any{
		"replica": map[string]any{
			"id": c.ID, "dataDir": c.DataDir, "raftBindAddress": c.RaftBind,
			"tls": map[string]any{"certFile": c.TLSCert, "keyFile": c.TLSKey, "caFile": c.TLSCA},
		},
		"peers":    peers,
		"raft":     map[string]any{"heartbeatTimeout": "1s", "electionTimeout": "1s", "leaderLeaseTimeout": "500ms"},
		"http":     httpSection,
		"log":      map[string]any{"format": "json", "level": "debug"},
		"clusters": clusters,
		"arrays":   arrays,
	}
	b, err := yaml.Marshal(doc)
	if err != nil {
		return fmt.Errorf("encode configuration of %s: %w", c.ID, err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("write configuration of %s: %w", c.ID, err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return fmt.Errorf("write configuration of %s: %w", c.ID, err)
	}
	return nil
}

// cluster is one entry of the clusters section.
func (c replicaConfig) cluster(ref clusterRef, arrays []string) map[string]any {
	cluster := map[string]any{"name": ref.Name, "kubeconfig": ref.Kubeconfig, "arrays": arrays}
	set := func(k string, v any) {
		if v != nil && v != "" {
			cluster[k] = v
		}
	}
	set("heartbeatGrace", dur(c.Timing.HeartbeatGrace))
	set("pollInterval", dur(c.Timing.PollInterval))
	set("settlePeriod", dur(c.Timing.SettlePeriod))
	set("ioWindow", dur(c.Timing.IOWindow))
	set("stormCooldown", dur(c.Timing.StormCooldown))
	set("stormLimit", c.Timing.StormLimit)
	set("corroboration", c.Timing.Corroboration)
	set("heldPeriod", dur(c.Timing.HeldPeriod))
	if c.Timing.DryRun {
		cluster["dryRun"] = true
	}
	if c.Timing.StatusObject {
		cluster["statusObject"] = true
	}
	if c.Timing.NodeHealthCheck || c.Timing.NodeLeases {
		cluster["nodeHealthCheck"] = map[string]any{"enabled": c.Timing.NodeHealthCheck, "leases": c.Timing.NodeLeases}
	}
	early := map[string]any{}
	switch c.Timing.EarlyVerdict {
	case EarlyOn:
		early["enabled"] = true
	case EarlyOff:
		early["enabled"] = false
	}
	if c.Timing.EarlyAfter != 0 {
		early["after"] = dur(c.Timing.EarlyAfter)
	}
	if c.Timing.EarlyProbeFrom != 0 {
		early["probeFrom"] = dur(c.Timing.EarlyProbeFrom)
	}
	if len(early) > 0 {
		cluster["earlyVerdict"] = early
	}
	return cluster
}

// familyOptions returns the family section of an array's configuration
// from its fixture spec.
func familyOptions(a *Array) map[string]any {
	switch a.Family {
	case "powerflex":
		if systems, ok := a.Spec["systems"].([]any); ok && len(systems) > 0 {
			if s, ok := systems[0].(map[string]any); ok {
				return map[string]any{"systemID": s["id"]}
			}
		}
		if a.Driver != nil {
			return map[string]any{"systemID": a.Driver.ArrayID}
		}
	case "powerstore":
		// The driver's handles name the array by its global ID.
		if a.Driver != nil {
			return map[string]any{"globalID": a.Driver.ArrayID}
		}
	case "unity":
		// csi-unity's handles name the array by the secret's arrayId.
		if a.Driver != nil {
			return map[string]any{"arrayID": a.Driver.ArrayID}
		}
	case "powerscale":
		// csi-isilon's handles name the cluster by the secret's clusterName.
		if a.Driver != nil {
			return map[string]any{"clusterName": a.Driver.ArrayID}
		}
	case "powermax":
		opts := map[string]any{"symmetrixID": a.Spec["symmetrixID"]}
		if g, ok := a.Spec["generate"].(map[string]any); ok && g["clusterPrefix"] != nil {
			opts["clusterPrefix"] = g["clusterPrefix"]
		}
		return opts
	}
	return nil
}
