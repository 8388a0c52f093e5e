package configs

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/fenced-project/fenced/arrayclients"
	"github.com/fenced-project/fenced/arrayclients/powermax"
)

// checker collects problems.
type checker struct {
	probs []Problem
	warns []Problem
}

func (c *checker) add(path, format string, args ...any) {
	c.probs = append(c.probs, Problem{Path: path, Message: fmt.Sprintf(format, args...)})
}

// validate checks everything decoding cannot: required fields, names,
// addresses, references between sections, limits and referenced files. It
// is the one place where the configuration's rules live.
func validate(cfg *Config, root *yaml.Node, opts Options) (probs, warns []Problem) {
	c := &checker{}
	c.replica(cfg)
	c.peers(cfg)
	c.raft(cfg.Raft)
	c.http(cfg.HTTP, cfg)
	c.log(cfg.Log)
	arrays := c.arrays(cfg, root)
	c.clusters(cfg, root, arrays)
	if !opts.SkipFileChecks {
		cfg.unchecked = c.files(cfg, opts.CredentialsDir)
		if opts.CheckContents {
			c.contents(cfg, opts.CredentialsDir, opts.Now, opts.CheckKubeconfig)
		}
	}
	return c.probs, c.warns
}

// name checks a DNS-label name (replica ids, cluster and array names).
func (c *checker) name(path, v string) bool {
	if v == "" {
		c.add(path, "required")
		return false
	}
	if errs := validation.IsDNS1123Label(v); len(errs) > 0 {
		c.add(path, "invalid name %q: want lower-case letters, digits and '-', starting and ending with a letter or digit, at most 63 characters", v)
		return false
	}
	return true
}

// hostPort checks a host:port address.
func (c *checker) hostPort(path, v string, required bool) bool {
	if v == "" {
		if required {
			c.add(path, "required")
		}
		return false
	}
	host, port, err := net.SplitHostPort(v)
	if err != nil {
		c.add(path, "invalid address %q: want host:port", v)
		return false
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		c.add(path, "invalid port in %q: want 1-65535", v)
		return false
	}
	if host != "" && net.ParseIP(host) == nil && len(validation.IsDNS1123Subdomain(strings.ToLower(host))) > 0 {
		c.add(path, "invalid host in %q", v)
		return false
	}
	return true
}

// unspecifiedHost reports whether a host:port listens on all addresses.
func unspecifiedHost(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsUnspecified()
}

// loopbackHost reports whether a host:port is a loopback address.
func loopbackHost(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// httpURL checks an http(s) URL with a host.
func (c *checker) httpURL(path, v string, required bool) bool {
	if v == "" {
		if required {
			c.add(path, "required")
		}
		return false
	}
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		c.add(path, "invalid URL %q: want http:// or https:// with a host", v)
		return false
	}
	if u.User != nil {
		c.add(path, "the URL must not carry credentials")
		return false
	}
	return true
}

// positive checks a duration is at least min.
func (c *checker) atLeast(path string, d, minimum time.Duration) {
	if d < minimum {
		c.add(path, "%v is too short: want at least %v", d, minimum)
	}
}

func (c *checker) replica(cfg *Config) {
	r := cfg.Replica
	c.name("replica.id", r.ID)
	switch {
	case r.DataDir == "":
		c.add("replica.dataDir", "required")
	case !filepath.IsAbs(r.DataDir):
		c.add("replica.dataDir", "%q is not an absolute path", r.DataDir)
	}
	c.hostPort("replica.raftBindAddress", r.RaftBindAddress, true)
	switch {
	case r.RaftAdvertiseAddress == "" && r.RaftBindAddress != "":
		c.add("replica.raftAdvertiseAddress", "required when raftBindAddress %q listens on all addresses", r.RaftBindAddress)
	case r.RaftAdvertiseAddress != "":
		if c.hostPort("replica.raftAdvertiseAddress", r.RaftAdvertiseAddress, true) && unspecifiedHost(r.RaftAdvertiseAddress) {
			c.add("replica.raftAdvertiseAddress", "%q is not an address peers can reach", r.RaftAdvertiseAddress)
		}
	}
	if len(cfg.Peers) > 0 && !r.TLS.Enabled() {
		// cluster.Config.Validate refuses it when the group starts.
		c.add("replica.tls", "required with peers: replicas talk only over mutual TLS (certFile, keyFile and caFile)")
	}
	if t := r.TLS; t.Enabled() {
		for _, f := range []struct{ path, v string }{
			{"replica.tls.certFile", t.CertFile}, {"replica.tls.keyFile", t.KeyFile}, {"replica.tls.caFile", t.CAFile},
		} {
			if f.v == "" {
				c.add(f.path, "required when replica.tls is used (certFile, keyFile and caFile go together)")
			}
		}
	}
}

func (c *checker) peers(cfg *Config) {
	ids := map[string]string{cfg.Replica.ID: "replica.id"}
	addrs := map[string]string{}
	if cfg.Replica.RaftAdvertiseAddress != "" {
		addrs[cfg.Replica.RaftAdvertiseAddress] = "replica.raftAdvertiseAddress"
	}
	for i, p := range cfg.Peers {
		base := fmt.Sprintf("peers[%d]", i)
		if c.name(base+".id", p.ID) {
			if prev, dup := ids[p.ID]; dup {
				c.add(base+".id", "duplicate replica id %q (also %s)", p.ID, prev)
			} else {
				ids[p.ID] = base + ".id"
			}
		}
		if c.hostPort(base+".raftAddress", p.RaftAddress, true) {
			if unspecifiedHost(p.RaftAddress) {
				c.add(base+".raftAddress", "%q is not an address this replica can reach", p.RaftAddress)
			} else if prev, dup := addrs[p.RaftAddress]; dup {
				c.add(base+".raftAddress", "duplicate Raft address %q (also %s)", p.RaftAddress, prev)
			} else {
				addrs[p.RaftAddress] = base + ".raftAddress"
			}
		}
		c.httpURL(base+".httpAddress", p.HTTPAddress, true)
	}
}

func (c *checker) raft(r Raft) {
	// The bounds are hashicorp/raft's own, so a bad value is reported here
	// rather than when the group starts.
	c.atLeast("raft.heartbeatTimeout", r.HeartbeatTimeout, 5*time.Millisecond)
	c.atLeast("raft.electionTimeout", r.ElectionTimeout, 5*time.Millisecond)
	c.atLeast("raft.leaderLeaseTimeout", r.LeaderLeaseTimeout, 5*time.Millisecond)
	c.atLeast("raft.commitTimeout", r.CommitTimeout, time.Millisecond)
	c.atLeast("raft.snapshotInterval", r.SnapshotInterval, 5*time.Millisecond)
	c.atLeast("raft.storageFullHandover", r.StorageFullHandover, 5*time.Millisecond)
	if r.ElectionTimeout < r.HeartbeatTimeout {
		c.add("raft.electionTimeout", "%v is shorter than raft.heartbeatTimeout %v", r.ElectionTimeout, r.HeartbeatTimeout)
	}
	if r.LeaderLeaseTimeout > r.HeartbeatTimeout {
		c.add("raft.leaderLeaseTimeout", "%v is longer than raft.heartbeatTimeout %v", r.LeaderLeaseTimeout, r.HeartbeatTimeout)
	}
	if r.SnapshotThreshold < 1 {
		c.add("raft.snapshotThreshold", "want at least 1")
	}
}

func (c *checker) http(h HTTP, cfg *Config) {
	listenOK := c.hostPort("http.listen", h.Listen, true)
	c.httpURL("http.advertiseURL", h.AdvertiseURL, false)
	t := h.TLS
	if t.Enabled() && (t.CertFile == "" || t.KeyFile == "") {
		if t.CertFile == "" {
			c.add("http.tls.certFile", "required with http.tls.keyFile")
		} else {
			c.add("http.tls.keyFile", "required with http.tls.certFile")
		}
	}
	if t.ClientCAFile != "" && !t.Enabled() {
		c.add("http.tls.clientCAFile", "needs http.tls.certFile and keyFile: client certificates need HTTPS")
	}
	if t.OperatorCAFile != "" && !t.Enabled() {
		c.add("http.tls.operatorCAFile", "needs http.tls.certFile and keyFile: client certificates need HTTPS")
	}
	if len(t.Operators) > 0 && t.ClientCAFile == "" && t.OperatorCAFile == "" {
		c.add("http.tls.operators", "needs http.tls.clientCAFile or operatorCAFile: no client certificate is verified without a CA")
	}
	if t.OperatorCAFile != "" && t.OperatorCAFile == cfg.Replica.TLS.CAFile {
		c.add("http.tls.operatorCAFile", "is replica.tls.caFile: operator certificates need a CA of their own (or list operators by name in http.tls.operators)")
	}
	seen := map[string]bool{}
	for i, o := range t.Operators {
		field := fmt.Sprintf("http.tls.operators[%d]", i)
		switch {
		case strings.TrimSpace(o) == "":
			c.add(field, "empty operator name")
		case o != strings.TrimSpace(o) || strings.ContainsFunc(o, func(r rune) bool { return r < 0x20 || r == 0x7f }):
			c.add(field, "operator name %q has surrounding white space or control characters", o)
		case len(o) > 64:
			c.add(field, "operator name longer than 64 characters")
		case seen[o]:
			c.add(field, "operator %q is listed twice", o)
		case o == cfg.Replica.ID || slices.ContainsFunc(cfg.Peers, func(p Peer) bool { return p.ID == o }):
			c.add(field, "%q is a replica ID: a replica's certificate is never an operator", o)
		}
		seen[o] = true
	}
	if listenOK && !t.Enabled() && h.ReadOnlyLoopbackOnly && !loopbackHost(h.Listen) {
		c.add("http.listen", "plain HTTP on %q: without http.tls the endpoint must listen on a loopback address (or set readOnlyLoopbackOnly: false behind a TLS proxy)", h.Listen)
	}
}

func (c *checker) log(l Log) {
	if l.Format != LogFormatText && l.Format != LogFormatJSON {
		c.add("log.format", "unknown format %q: want text or json", l.Format)
	}
	switch strings.ToLower(l.Level) {
	case "debug", "info", "warn", "error":
	default:
		c.add("log.level", "unknown level %q: want debug, info, warn or error", l.Level)
	}
}

var symmetrixID = regexp.MustCompile(`^[0-9]{12}$`)

// powerMaxPrefix is csi-powermax's X_CSI_K8S_CLUSTER_PREFIX.
var powerMaxPrefix = regexp.MustCompile(`^[A-Za-z0-9]{1,3}$`)

// powerMaxHostName is a PowerMax host or host group name.
var powerMaxHostName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// arrays checks the arrays and returns the valid names.
func (c *checker) arrays(cfg *Config, root *yaml.Node) map[string]bool {
	names := map[string]bool{}
	where := map[string]string{}
	for i, a := range cfg.Arrays {
		base := fmt.Sprintf("arrays[%d]", i)
		if c.name(base+".name", a.Name) {
			if prev, dup := where[a.Name]; dup {
				c.add(base+".name", "duplicate array name %q (also %s)", a.Name, prev)
			} else {
				where[a.Name] = base + ".name"
				names[a.Name] = true
			}
		}
		if a.Family == "" {
			c.add(base+".family", "required: one of %s", familyList())
		} else if !slices.Contains(arrayclients.Families, a.Family) {
			c.add(base+".family", "unknown family %q: want one of %s", a.Family, familyList())
		}
		c.httpURL(base+".endpoint", a.Endpoint, true)
		if a.Username == "" {
			c.add(base+".username", "required")
		}
		switch {
		case a.Password != "" && !cfg.AllowInlineSecrets:
			c.add(base+".password", "inline passwords are refused: use passwordFile (a file or credential:NAME), or set allowInlineSecrets: true for a throw-away setup")
		case a.Password != "" && a.PasswordFile != "":
			c.add(base+".password", "give passwordFile or password, not both")
		case a.Password == "" && a.PasswordFile == "":
			c.add(base+".passwordFile", "required")
		}
		if a.Insecure && a.CAFile != "" {
			c.add(base+".insecure", "conflicts with caFile: verify with the CA or skip verification, not both")
		}
		if a.RequestTimeout < 100*time.Millisecond || a.RequestTimeout > 10*time.Minute {
			c.add(base+".requestTimeout", "%v is out of range: want 100ms to 10m", a.RequestTimeout)
		}
		if a.MaxConcurrentCalls < 1 || a.MaxConcurrentCalls > 256 {
			c.add(base+".maxConcurrentCalls", "%d is out of range: want 1 to 256", a.MaxConcurrentCalls)
		}
		c.driverName(base, a)
		c.familyOptions(base, a, root)
	}
	c.handleIDs(cfg)
	return names
}

// handleIDs checks that no two arrays of a family claim the same volume
// handles: one default array per family, and distinct identifiers (and
// PowerScale zones).
func (c *checker) handleIDs(cfg *Config) {
	defaults := map[arrayclients.Family]string{}
	claimed := map[string]string{}
	for i, a := range cfg.Arrays {
		base := fmt.Sprintf("arrays[%d]", i)
		if a.CSIDefault {
			if prev, dup := defaults[a.Family]; dup {
				c.add(base+".csiDefault", "%s is already the default %s array: at most one per family", prev, a.Family)
			} else {
				defaults[a.Family] = a.Name
			}
		}
		for _, id := range a.HandleIDs() {
			key := string(a.Family) + "/" + strings.ToLower(id)
			if a.Family == arrayclients.PowerScale {
				key += "/" + strings.ToLower(a.PowerScale.Zone)
			}
			if prev, dup := claimed[key]; dup && prev != a.Name {
				c.add(base, "volume handles naming %q would be placed on both %s and %s: give each array its own identifier", id, prev, a.Name)
			} else {
				claimed[key] = a.Name
			}
		}
	}
}

func familyList() string {
	s := make([]string, len(arrayclients.Families))
	for i, f := range arrayclients.Families {
		s[i] = string(f)
	}
	return strings.Join(s, ", ")
}

// familyOptions checks the family-specific blocks: only the array's own
// family's block may appear, and its required fields must be set.
func (c *checker) familyOptions(base string, a Array, root *yaml.Node) {
	for _, f := range arrayclients.Families {
		if f != a.Family && a.Family != "" && lookup(root, base+"."+string(f)) != nil {
			c.add(base+"."+string(f), "only for family %s; this array is %s", f, a.Family)
		}
	}
	switch a.Family {
	case arrayclients.PowerScale, arrayclients.Unity:
		// The adapters refuse a custom CA: goisilon and gounity trust only
		// the system certificate pool (arrayclients/powerscale/powerscale.go,
		// arrayclients/unity/client.go).
		if a.CAFile != "" {
			c.add(base+".caFile", "not supported for %s arrays: the Dell client library trusts only the system certificate pool; add the CA there (update-ca-certificates) and remove caFile", a.Family)
		}
	}
	switch a.Family {
	case arrayclients.PowerMax, arrayclients.Unity:
		// gopowermax and gounity strip the first "/api" from the URL and
		// append their own paths (arrayclients/powermax/client.go,
		// arrayclients/unity/client.go).
		if u, err := url.Parse(a.Endpoint); err == nil && u.Host != "" {
			switch {
			case strings.HasPrefix(u.Host, "api"):
				c.add(base+".endpoint", "%q: the %s client strips the first \"/api\" from the URL, which breaks a host name starting with \"api\"; use the IP address or another name", a.Endpoint, a.Family)
			case u.Path != "" && u.Path != "/":
				c.add(base+".endpoint", "%q: give scheme, host and port only for %s", a.Endpoint, a.Family)
			}
		}
	}
	switch a.Family {
	case arrayclients.PowerFlex:
		if a.PowerFlex.SystemID == "" && a.PowerFlex.SystemName == "" {
			c.add(base+".powerflex.systemID", "required: the PowerFlex system ID (or powerflex.systemName)")
		}
	case arrayclients.PowerMax:
		if !symmetrixID.MatchString(a.PowerMax.SymmetrixID) {
			if a.PowerMax.SymmetrixID == "" {
				c.add(base+".powermax.symmetrixID", "required: the 12-digit array ID")
			} else {
				c.add(base+".powermax.symmetrixID", "invalid ID %q: want 12 digits", a.PowerMax.SymmetrixID)
			}
		}
		if p := a.PowerMax.ClusterPrefix; p != "" && !powerMaxPrefix.MatchString(p) {
			c.add(base+".powermax.clusterPrefix", "invalid prefix %q: want 1 to 3 letters or digits", p)
		}
		if t := a.PowerMax.NodeNameTemplate; t != "" {
			if _, _, err := powermax.ParsePowerMaxNodeNameTemplate(t); err != nil {
				c.add(base+".powermax.nodeNameTemplate", "%v", err)
			}
		}
		if h := a.PowerMax.VSphereHost; h != "" && !powerMaxHostName.MatchString(h) {
			c.add(base+".powermax.vsphereHost", "invalid host or host group name %q: want 1 to 64 letters, digits, '-' or '_'", h)
		}
	case arrayclients.PowerScale:
		if a.PowerScale.Zone == "" {
			c.add(base+".powerscale.zone", "must not be empty")
		}
	case arrayclients.PowerStore:
		if m := a.PowerStore.FenceMode; m != FenceModeInitiators && m != FenceModeDetach {
			c.add(base+".powerstore.fenceMode", "unknown mode %q: want initiators or detach", m)
		}
		if a.PowerStore.ChapSecretsFile != "" {
			c.warn(base+".powerstore.chapSecretsFile", "deprecated and ignored: csi-powerstore's node plugin sets a new CHAP "+
				"secret at every start, so no configured secret can match; an unfence gives a CHAP initiator back for the node "+
				"plugin to set its own (docs/footprint.md, \"Unfence\"): remove the field and the file")
		}
	}
	if field, set := placementField(a); field != "" && len(a.HandleIDs()) == 0 && !a.CSIDefault {
		c.warn(base+"."+field, "array %s can place no volume: set %s (every node with a volume on it would be unprotected)", a.Name, set)
	}
	for key, list := range map[string][]string{"powerflex": a.PowerFlex.ExternalAccess, "powerstore": a.PowerStore.ExternalAccess} {
		for j, e := range list {
			if _, err := arrayclients.ParseExternalAccess([]string{e}); err != nil {
				c.add(fmt.Sprintf("%s.%s.externalAccess[%d]", base, key, j), "%q is not an IP address or a CIDR subnet", e)
			}
		}
	}
	if len(a.PowerFlex.ExternalAccess) > 0 && a.Family != arrayclients.PowerFlex {
		c.add(base+".powerflex.externalAccess", "set on a %s array", a.Family)
	}
	if len(a.PowerStore.ExternalAccess) > 0 && a.Family != arrayclients.PowerStore {
		c.add(base+".powerstore.externalAccess", "set on a %s array", a.Family)
	}
}

func (c *checker) clusters(cfg *Config, root *yaml.Node, arrays map[string]bool) {
	where := map[string]string{}
	for i, cl := range cfg.Clusters {
		base := fmt.Sprintf("clusters[%d]", i)
		if c.name(base+".name", cl.Name) {
			if prev, dup := where[cl.Name]; dup {
				c.add(base+".name", "duplicate cluster name %q (also %s)", cl.Name, prev)
			} else {
				where[cl.Name] = base + ".name"
			}
		}
		if cl.Kubeconfig == "" {
			c.add(base+".kubeconfig", "required")
		}
		c.atLeast(base+".pollInterval", cl.PollInterval, 100*time.Millisecond)
		c.atLeast(base+".heartbeatGrace", cl.HeartbeatGrace, time.Second)
		if cl.PollInterval >= cl.HeartbeatGrace && cl.PollInterval > 0 {
			c.add(base+".pollInterval", "%v is not shorter than heartbeatGrace %v", cl.PollInterval, cl.HeartbeatGrace)
		}
		if !slices.Contains(Corroborations(), cl.Corroboration) {
			c.add(base+".corroboration", "unknown policy %q: want kubelet, array, either, both or none", cl.Corroboration)
		}
		c.atLeast(base+".ioWindow", cl.IOWindow, time.Second)
		if cl.StormLimit.IsZero() {
			c.add(base+".stormLimit", "required: a count (\"3\") or a percentage (\"33%%\")")
		}
		c.atLeast(base+".stormCooldown", cl.StormCooldown, 0)
		c.atLeast(base+".settlePeriod", cl.SettlePeriod, time.Second)
		c.atLeast(base+".heldPeriod", cl.HeldPeriod, time.Second)
		c.atLeast(base+".gapScanPeriod", cl.GapScanPeriod, time.Second)
		if ns := cl.NodeHealthCheck.LeaseNamespace; ns != "" {
			c.name(base+".nodeHealthCheck.leaseNamespace", ns)
		}
		if cl.ProtectionSelector != "" {
			if _, err := labels.Parse(cl.ProtectionSelector); err != nil {
				c.add(base+".protectionSelector", "invalid label selector: %v", err)
			}
		}
		seen := map[string]int{}
		for j, name := range cl.Arrays {
			p := fmt.Sprintf("%s.arrays[%d]", base, j)
			switch prev, dup := seen[name]; {
			case !arrays[name]:
				c.add(p, "unknown array %q", name)
			case dup:
				c.add(p, "array %q listed twice (also %s.arrays[%d])", name, base, prev)
			default:
				seen[name] = j
			}
		}
		if len(cl.Arrays) == 0 && (cl.Corroboration == CorroborateArray || cl.Corroboration == CorroborateBoth) {
			c.add(base+".corroboration", "%q needs arrays: the cluster lists none", cl.Corroboration)
		}
		if s := cl.StoragePathLoss; s.Enabled {
			if len(cl.Arrays) == 0 {
				c.add(base+".storagePathLoss.enabled", "needs arrays: the cluster lists none")
			}
			c.atLeast(base+".storagePathLoss.grace", s.Grace, time.Second)
			if s.MaxDisconnected.IsZero() {
				c.add(base+".storagePathLoss.maxDisconnected", "required: a count or a percentage")
			}
		}
		if e := cl.EarlyVerdict; e.Enabled == nil || *e.Enabled {
			// Unset (the default), a cluster without arrays or with a
			// short grace simply has no early verdicts; asked for
			// explicitly, it is a mistake to name.
			explicit := e.Enabled != nil
			if explicit && len(cl.Arrays) == 0 {
				c.add(base+".earlyVerdict.enabled", "needs arrays: the cluster lists none (every array must agree the node is dead)")
			}
			c.atLeast(base+".earlyVerdict.after", e.After, time.Second)
			if e.ProbeFrom != 0 {
				c.atLeast(base+".earlyVerdict.probeFrom", e.ProbeFrom, time.Second)
				if e.ProbeFrom > e.After {
					c.add(base+".earlyVerdict.probeFrom", "%v is later than earlyVerdict.after %v: a node must be probed before it may be declared failed", e.ProbeFrom, e.After)
				}
			}
			if explicit && e.After >= cl.HeartbeatGrace && cl.HeartbeatGrace > 0 {
				c.add(base+".earlyVerdict.after", "%v is not shorter than heartbeatGrace %v", e.After, cl.HeartbeatGrace)
			}
			if e.KubeletProbes < 1 || e.KubeletProbes > 100 {
				c.add(base+".earlyVerdict.kubeletProbes", "%d: want 1 to 100", e.KubeletProbes)
			}
			c.atLeast(base+".earlyVerdict.ioWindow", e.IOWindow, time.Second)
		}
		for name, f := range cl.Drivers {
			p := base + ".drivers." + name
			if len(name) > 63 || len(validation.IsDNS1123Subdomain(name)) > 0 {
				c.add(p, "invalid CSI driver name %q: want a DNS subdomain of at most 63 characters", name)
			}
			if !slices.Contains(arrayclients.Families, f) {
				c.add(p, "unknown family %q: want one of %s", f, familyList())
			}
		}
		c.instances(base, cl, cfg)
		c.nodes(base, cl, root)
	}
}

// nodes checks per-node overrides. Array names are checked as the file
// spells them: the decoder folds map keys to lower case.
func (c *checker) nodes(base string, cl Cluster, root *yaml.Node) {
	names := map[string]string{}
	for j, n := range cl.Nodes {
		p := fmt.Sprintf("%s.nodes[%d]", base, j)
		switch {
		case n.Name == "":
			c.add(p+".name", "required")
		case len(validation.IsDNS1123Subdomain(n.Name)) > 0:
			c.add(p+".name", "invalid node name %q", n.Name)
		default:
			if prev, dup := names[n.Name]; dup {
				c.add(p+".name", "node %q given twice (also %s)", n.Name, prev)
			}
			names[n.Name] = p
		}
		if len(n.Arrays) == 0 {
			c.add(p+".arrays", "required: map an array name to the node's identity there")
		}
		if m := lookup(root, p+".arrays"); m != nil && m.Kind == yaml.MappingNode {
			for k := 0; k+1 < len(m.Content); k += 2 {
				key := m.Content[k].Value
				kp := p + ".arrays." + key
				switch {
				case key != strings.ToLower(key):
					c.probs = append(c.probs, Problem{Path: kp, Line: m.Content[k].Line, Message: fmt.Sprintf("array names are lower-case: write %q", strings.ToLower(key))})
				case !slices.Contains(cl.Arrays, key):
					c.probs = append(c.probs, Problem{Path: kp, Line: m.Content[k].Line, Message: fmt.Sprintf("array %q is not one of this cluster's arrays", key)})
				case strings.TrimSpace(m.Content[k+1].Value) == "":
					c.probs = append(c.probs, Problem{Path: kp, Line: m.Content[k].Line, Message: "the identity must not be empty"})
				}
			}
		}
	}
}

// files checks that referenced files exist and returns the credential
// references it could not check.
func (c *checker) files(cfg *Config, credDir string) []string {
	var unchecked []string
	for _, f := range cfg.fileRefs() {
		ref := *f.ref
		if ref == "" {
			continue
		}
		if IsCredential(ref) {
			if _, err := credentialName(ref); err != nil {
				c.add(f.path, "%v", err)
				continue
			}
			if credDir == "" {
				if !slices.Contains(unchecked, ref) {
					unchecked = append(unchecked, ref)
				}
				continue
			}
		}
		p, err := ResolveFile(ref, credDir)
		if err != nil {
			c.add(f.path, "%v", err)
			continue
		}
		if err := checkFile(p); err != nil {
			if maySecretBeValue(cfg, f.path, ref, p) {
				c.add(f.path, "no file by this name exists (the value is not repeated: this field takes a path or credential:NAME, and a secret pasted here by mistake must not reach logs)")
				continue
			}
			c.add(f.path, "%v", err)
		}
	}
	return unchecked
}

// maySecretBeValue reports whether a missing file named by a secret-bearing
// field could be the secret itself, pasted in place of a path: a plain
// name without a directory (made relative to the configuration's directory
// by Load). Such a value is not repeated in messages.
func maySecretBeValue(cfg *Config, field, ref, path string) bool {
	if !holdsSecret(field) || IsCredential(ref) {
		return false
	}
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		return false
	}
	dir := filepath.Dir(path)
	return dir == filepath.Clean(cfg.baseDir) || (cfg.baseDir == "" && dir == ".")
}

// placementField names, for an array whose volumes are placed by an
// identifier in the CSI driver's volume handles, the field that gives it
// and what to set: the array holds no volume until one of them is set (or
// csiDefault, for handles that name no array). PowerFlex and PowerMax
// need their identifier anyway (a problem, not a warning).
func placementField(a Array) (field, set string) {
	switch a.Family {
	case arrayclients.PowerStore:
		return "powerstore.globalID", "powerstore.globalID (globalID in csi-powerstore's secret), or an IP address in endpoint for old handles"
	case arrayclients.PowerScale:
		return "powerscale.clusterName", "powerscale.clusterName (clusterName in csi-isilon's secret)"
	case arrayclients.Unity:
		return "unity.arrayID", "unity.arrayID (arrayId in csi-unity's secret)"
	}
	return "", ""
}
