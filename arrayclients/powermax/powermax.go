// Package powermax fences nodes at Dell PowerMax arrays: a fence removes
// the node's initiators from its host (the initiator group csi-powermax
// made for it), and gives them back on undo. New is its
// arrayclients.Constructor; NewPowerMax returns the concrete adapter.
package powermax

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	pmaxtypes "github.com/dell/gopowermax/v2/types/v100"

	"github.com/fenced-project/fenced/arrayclients"
)

// PowerMaxAdapter fences a node by removing its initiators from its host (the
// initiator group csi-powermax created for it) and unfences by adding them
// back. The host's masking view, storage group and volumes are untouched:
// without initiators the view grants the node no path. An array that
// refuses to empty an initiator group in a masking view gets the fallback
// cut instead: the host's masking views are deleted (see Apply).
type PowerMaxAdapter struct {
	cfg      arrayclients.Config
	prefixes PowerMaxPrefixes
	// template is csi-powermax's node name template, if configured.
	template *pmaxNameTemplate
	conn     *pmaxConn
	log      *slog.Logger
	now      func() time.Time
}

var _ arrayclients.Adapter = (*PowerMaxAdapter)(nil)

// PowerMaxPrefixes gives csi-powermax's cluster prefix
// (X_CSI_K8S_CLUSTER_PREFIX) per configured cluster name; the key "" is the
// default for clusters not listed.
type PowerMaxPrefixes map[string]string

// powerMaxHostSuffixes are what csi-powermax appends to a node's host ID per
// protocol: iSCSI (none), Fibre Channel and NVMe/TCP.
var powerMaxHostSuffixes = []string{"", "-FC", "-NVMETCP"}

// PowerMaxEntries is the Entries record of a PowerMax plan.
type PowerMaxEntries struct {
	SymmetrixID string `json:"symmetrixId"`
	HostID      string `json:"hostId"`
	HostType    string `json:"hostType,omitempty"`
	// Initiators are the bare IQNs/WWNs/NQNs the fence removes from the host.
	Initiators []string `json:"initiators"`
	// MaskingViews are evidence: what the host's initiators gave access to.
	MaskingViews []PowerMaxView `json:"maskingViews,omitempty"`
}

// PowerMaxView is one masking view of the fenced host.
type PowerMaxView struct {
	ID           string `json:"id"`
	StorageGroup string `json:"storageGroup,omitempty"`
	PortGroup    string `json:"portGroup,omitempty"`
}

// New is the PowerMax family's arrayclients.Constructor (NewPowerMax as an
// arrayclients.Adapter).
func New(ctx context.Context, cfg arrayclients.Config, logger *slog.Logger) (arrayclients.Adapter, error) {
	return arrayclients.Adapt(NewPowerMax(ctx, cfg, logger))
}

// NewPowerMax builds a PowerMax adapter. cfg.PowerMaxClusterPrefix, when set, is the prefix for every
// cluster; without it nodes resolve only through per-node overrides (or
// prefixes given with NewPowerMaxWithPrefixes). It sends nothing until
// first used.
func NewPowerMax(ctx context.Context, cfg arrayclients.Config, logger *slog.Logger) (*PowerMaxAdapter, error) {
	var prefixes PowerMaxPrefixes
	if cfg.PowerMaxClusterPrefix != "" {
		prefixes = PowerMaxPrefixes{"": cfg.PowerMaxClusterPrefix}
	}
	return NewPowerMaxWithPrefixes(ctx, cfg, prefixes, logger)
}

// NewPowerMaxWithPrefixes builds a PowerMax adapter that names each node's
// host csi-node-<prefix>-<nodeID>[-FC|-NVMETCP] with its cluster's prefix.
func NewPowerMaxWithPrefixes(_ context.Context, cfg arrayclients.Config, prefixes PowerMaxPrefixes, logger *slog.Logger) (*PowerMaxAdapter, error) {
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = arrayclients.DefaultRequestTimeout
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	for cluster, p := range prefixes {
		if p == "" || len(p) > 3 || !pmaxHostIDRE.MatchString(p) {
			return nil, fmt.Errorf("powermax %s: cluster prefix %q for cluster %q: want 1..3 letters or digits", cfg.Name, p, cluster)
		}
	}
	var tmpl *pmaxNameTemplate
	if cfg.PowerMaxNodeNameTemplate != "" {
		prefix, suffix, err := ParsePowerMaxNodeNameTemplate(cfg.PowerMaxNodeNameTemplate)
		if err != nil {
			return nil, fmt.Errorf("powermax %s: %w", cfg.Name, err)
		}
		tmpl = &pmaxNameTemplate{prefix: prefix, suffix: suffix}
	}
	if v := cfg.PowerMaxVSphereHost; v != "" && !pmaxHostIDRE.MatchString(v) {
		return nil, fmt.Errorf("powermax %s: vSphere host %q is not a PowerMax host or host group name (letters, digits, '-', '_', at most 64)", cfg.Name, v)
	}
	conn, err := newPmaxConn(cfg)
	if err != nil {
		return nil, fmt.Errorf("powermax %s: %w", cfg.Name, err)
	}
	return &PowerMaxAdapter{cfg: cfg, prefixes: prefixes, template: tmpl, conn: conn, log: logger, now: time.Now}, nil
}

// Name is the configured array name.
func (a *PowerMaxAdapter) Name() string { return a.cfg.Name }

// Family is PowerMax.
func (a *PowerMaxAdapter) Family() arrayclients.Family { return arrayclients.PowerMax }

func (a *PowerMaxAdapter) errf(op, node string, err error) error {
	return fmt.Errorf("powermax %s: %s %s: %w", a.cfg.Name, op, node, err)
}

// candidates lists the host IDs that can be this node, exactly: the
// override, or csi-powermax's csi-node-<prefix>-<nodeID>[-FC|-NVMETCP]
// (<template host>[-FC|-NVMETCP] with a node name template).
func (a *PowerMaxAdapter) candidates(node arrayclients.Node) ([]string, error) {
	if node.Override != "" {
		if !pmaxHostIDRE.MatchString(node.Override) {
			return nil, fmt.Errorf("override %q is not a PowerMax host name (letters, digits, '-', '_', at most 64)", node.Override)
		}
		return []string{node.Override}, nil
	}
	nodeID := node.CSINodeIDs[arrayclients.DriverPowerMax]
	if nodeID == "" {
		return nil, fmt.Errorf("%w: the node has no %s CSINode ID and no override", arrayclients.ErrNoIdentity, arrayclients.DriverPowerMax)
	}
	base, err := a.baseHostID(node.Cluster, nodeID)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, suffix := range powerMaxHostSuffixes {
		id := base + suffix
		if !pmaxHostIDRE.MatchString(id) {
			return nil, fmt.Errorf("csi-powermax node ID %q gives host ID %q, which is not a PowerMax host name", nodeID, id)
		}
		out = append(out, id)
	}
	return out, nil
}

// baseHostID is the host name csi-powermax gives the node ID before any
// protocol suffix: the node name template's, or csi-node-<prefix>-<nodeID>
// (service/controller.go GetHostIDFromTemplate, which falls back to the
// default name when the template's does not pass its check).
func (a *PowerMaxAdapter) baseHostID(cluster, nodeID string) (string, error) {
	if a.template != nil {
		if id, ok := a.template.hostID(nodeID); ok {
			return id, nil
		}
	}
	prefix, ok := a.prefixes[cluster]
	if !ok {
		prefix, ok = a.prefixes[""]
	}
	if !ok {
		// Not ErrNoIdentity: a missing setting must not read as "nothing to fence here".
		return "", fmt.Errorf("no csi-powermax cluster prefix is configured for cluster %q: cannot name the node's host (set a per-node override)", cluster)
	}
	return "csi-node-" + prefix + "-" + nodeID, nil
}

// Resolve finds the one host that is this node. A node with hosts for two
// protocols is ambiguous: fencing one would leave the other's paths.
//
// In vSphere mode (Config.PowerMaxVSphereHost) csi-powermax makes no host
// per node: every node resolves to the shared host (or host group) unless
// an override names another host. A host that is the shared one (the
// configured name, or in csi-powermax's vSphere masking view) is also
// given as a shared host, never as the node's own.
func (a *PowerMaxAdapter) Resolve(ctx context.Context, node arrayclients.Node) (arrayclients.Identity, error) {
	if v := a.cfg.PowerMaxVSphereHost; v != "" && (node.Override == "" || strings.EqualFold(node.Override, v)) {
		return a.resolveShared(ctx, node)
	}
	cands, err := a.candidates(node)
	if err != nil {
		return arrayclients.Identity{}, a.errf("resolve", node.Name, err)
	}
	var found []*pmaxtypes.Host
	for _, id := range cands {
		h, err := a.conn.getHost(ctx, id)
		if pmaxtypes.IsNotFoundError(err) {
			continue
		}
		if err != nil {
			return arrayclients.Identity{}, a.errf("resolve", node.Name, fmt.Errorf("read host %s: %w", id, err))
		}
		found = append(found, h)
	}
	switch len(found) {
	case 0:
		return arrayclients.Identity{}, a.errf("resolve", node.Name, fmt.Errorf("%w: no host %s", arrayclients.ErrNoIdentity, strings.Join(cands, " or ")))
	case 1:
	default:
		var ids []string
		for _, h := range found {
			ids = append(ids, h.HostID)
		}
		return arrayclients.Identity{}, a.errf("resolve", node.Name, fmt.Errorf("%w: hosts %s all match; set an override naming one", arrayclients.ErrAmbiguousIdentity, strings.Join(ids, ", ")))
	}
	h := found[0]
	if a.vsphereHost(h) {
		return a.sharedIdentity(node, h.HostID), nil
	}
	return arrayclients.Identity{
		Array: a.cfg.Name, Family: arrayclients.PowerMax, Node: node.Name,
		ObjectID: h.HostID, ObjectName: h.HostID, Keys: slices.Sorted(slices.Values(h.Initiators)),
		ResolvedAt: a.now().UTC(),
	}, nil
}

func (a *PowerMaxAdapter) checkIdentity(id arrayclients.Identity) error {
	if id.Array != a.cfg.Name || id.Family != arrayclients.PowerMax || !pmaxHostIDRE.MatchString(id.ObjectID) {
		return fmt.Errorf("%w: identity of %s/%s host %q", arrayclients.ErrPlanMismatch, id.Family, id.Array, id.ObjectID)
	}
	return nil
}

// planIdentity records the host's initiators (and its masking views as evidence).
func (a *PowerMaxAdapter) planIdentity(ctx context.Context, id arrayclients.Identity) (arrayclients.Plan, error) {
	if err := a.checkIdentity(id); err != nil {
		return arrayclients.Plan{}, a.errf("plan", id.Node, err)
	}
	h, err := a.conn.getHost(ctx, id.ObjectID)
	if err != nil {
		return arrayclients.Plan{}, a.errf("plan", id.Node, fmt.Errorf("read host %s: %w", id.ObjectID, err))
	}
	e := PowerMaxEntries{
		SymmetrixID: a.cfg.SymmetrixID, HostID: h.HostID, HostType: h.HostType,
		Initiators: slices.Sorted(slices.Values(h.Initiators)),
	}
	c, err := a.conn.get(ctx)
	if err != nil {
		return arrayclients.Plan{}, a.errf("plan", id.Node, err)
	}
	for _, mvID := range h.MaskingviewIDs {
		rctx, cancel := arrayclients.WithRequestTimeout(ctx, a.cfg.RequestTimeout)
		mv, err := c.GetMaskingViewByID(rctx, a.cfg.SymmetrixID, mvID)
		cancel()
		if err != nil {
			return arrayclients.Plan{}, a.errf("plan", id.Node, fmt.Errorf("read masking view %s: %w", mvID, classifyPmax(err)))
		}
		e.MaskingViews = append(e.MaskingViews, PowerMaxView{ID: mvID, StorageGroup: mv.StorageGroupID, PortGroup: mv.PortGroupID})
	}
	raw, err := json.Marshal(e)
	if err != nil {
		return arrayclients.Plan{}, a.errf("plan", id.Node, err)
	}
	views := make([]string, 0, len(e.MaskingViews))
	for _, v := range e.MaskingViews {
		views = append(views, v.ID)
	}
	return arrayclients.Plan{
		Array: a.cfg.Name, Family: arrayclients.PowerMax, Identity: id, Entries: raw,
		Summary: fmt.Sprintf("remove %d initiator(s) %s from host %s (masking views %s)",
			len(e.Initiators), strings.Join(e.Initiators, ", "), h.HostID, strings.Join(views, ", ")),
		CreatedAt: a.now().UTC(),
	}, nil
}

func (a *PowerMaxAdapter) entries(p arrayclients.Plan) (PowerMaxEntries, error) {
	var e PowerMaxEntries
	if p.Array != a.cfg.Name || p.Family != arrayclients.PowerMax {
		return e, fmt.Errorf("%w: plan of %s/%s", arrayclients.ErrPlanMismatch, p.Family, p.Array)
	}
	if err := json.Unmarshal(p.Entries, &e); err != nil {
		return e, fmt.Errorf("%w: entries: %w", arrayclients.ErrPlanMismatch, err)
	}
	if e.SymmetrixID != a.cfg.SymmetrixID || e.HostID != p.Identity.ObjectID || !pmaxHostIDRE.MatchString(e.HostID) {
		return e, fmt.Errorf("%w: plan for Symmetrix %s host %q", arrayclients.ErrPlanMismatch, e.SymmetrixID, e.HostID)
	}
	for _, in := range e.Initiators {
		if !pmaxInitiatorRE.MatchString(in) {
			return e, fmt.Errorf("%w: initiator %q", arrayclients.ErrPlanMismatch, in)
		}
	}
	return e, nil
}

// Apply removes the plan's initiators that the host still has, reading the
// host right before the write. Nothing left to remove means no write.
//
// That cut empties an initiator group that is still in masking views, and
// no Dell document says a PowerMax accepts it. When the array refuses the
// edit (an answered 400, 409 or 422), Apply falls back to deleting the
// host's masking views: a host in no masking view reaches no volume, and
// deleting the view is what csi-powermax's own unpublish does when a
// storage group's last volumes leave it (dell/csi-powermax
// service/storage_group_svc.go removeVolumesFromSGMV). The initiators stay.
// The fallback is refused for a host that is in a host group, whose views
// would keep giving it volumes.
func (a *PowerMaxAdapter) Apply(ctx context.Context, p arrayclients.Plan) error {
	if p.Identity.Kind == PowerMaxKindSharedHost {
		if _, err := a.entries(p); err != nil {
			return a.errf("apply", p.Identity.Node, err)
		}
		a.log.InfoContext(ctx, "nothing to remove: the node's host is the shared vSphere host", "node", p.Identity.Node, "host", p.Identity.ObjectID)
		return nil
	}
	err := a.edit(ctx, p, "apply", func(current, planned []string) []string {
		return slices.DeleteFunc(slices.Clone(current), func(in string) bool { return slices.Contains(planned, in) })
	})
	if err == nil || !pmaxRefused(err) {
		return err
	}
	a.log.WarnContext(ctx, "the array refused to remove the host's initiators; deleting its masking views instead",
		"node", p.Identity.Node, "host", p.Identity.ObjectID, "refusal", err.Error())
	if ferr := a.deleteViews(ctx, p); ferr != nil {
		return errors.Join(err, ferr)
	}
	return nil
}

// pmaxRefused reports an edit the array answered and refused (not an
// authentication, a missing object or a transport failure).
func pmaxRefused(err error) bool {
	var pe *pmaxtypes.Error
	if errors.Is(err, arrayclients.ErrUnreachable) || !errors.As(err, &pe) {
		return false
	}
	switch pe.HTTPStatusCode {
	case http.StatusBadRequest, http.StatusConflict, http.StatusUnprocessableEntity:
		return true
	}
	return false
}

// deleteViews deletes every masking view of the plan's host (the fallback
// cut), after checking the host is in no host group.
func (a *PowerMaxAdapter) deleteViews(ctx context.Context, p arrayclients.Plan) error {
	e, err := a.entries(p)
	if err != nil {
		return a.errf("apply", p.Identity.Node, err)
	}
	h, err := a.conn.getHost(ctx, e.HostID)
	if err != nil {
		return a.errf("apply", p.Identity.Node, fmt.Errorf("read host %s: %w", e.HostID, err))
	}
	if h.NumberHostGroups > 0 {
		return a.errf("apply", p.Identity.Node, fmt.Errorf("host %s is in %d host group(s): deleting its own masking views would leave the groups' views; not fenced",
			e.HostID, h.NumberHostGroups))
	}
	c, err := a.conn.get(ctx)
	if err != nil {
		return a.errf("apply", p.Identity.Node, err)
	}
	for _, mvID := range slices.Sorted(slices.Values(h.MaskingviewIDs)) {
		rctx, cancel := arrayclients.WithRequestTimeout(ctx, a.cfg.RequestTimeout)
		err := c.DeleteMaskingView(rctx, a.cfg.SymmetrixID, mvID)
		cancel()
		if err != nil && !pmaxtypes.IsNotFoundError(err) {
			return a.errf("apply", p.Identity.Node, fmt.Errorf("delete masking view %s of host %s: %w", mvID, e.HostID, classifyPmax(err)))
		}
		a.log.InfoContext(ctx, "masking view deleted", "node", p.Identity.Node, "host", e.HostID, "maskingView", mvID)
	}
	return nil
}

// edit sets the host's initiators to want(current, planned) with
// UpdateHostInitiators, which diffs against the host it is given.
func (a *PowerMaxAdapter) edit(ctx context.Context, p arrayclients.Plan, op string, want func(current, planned []string) []string) error {
	e, err := a.entries(p)
	if err != nil {
		return a.errf(op, p.Identity.Node, err)
	}
	h, err := a.conn.getHost(ctx, e.HostID)
	if err != nil {
		return a.errf(op, p.Identity.Node, fmt.Errorf("read host %s: %w", e.HostID, err))
	}
	target := want(h.Initiators, e.Initiators)
	if pmaxSameSet(target, h.Initiators) {
		a.log.DebugContext(ctx, "nothing to change", "op", op, "node", p.Identity.Node, "host", e.HostID)
		return nil
	}
	c, err := a.conn.get(ctx)
	if err != nil {
		return a.errf(op, p.Identity.Node, err)
	}
	rctx, cancel := arrayclients.WithRequestTimeout(ctx, a.cfg.RequestTimeout)
	defer cancel()
	if _, err := c.UpdateHostInitiators(rctx, a.cfg.SymmetrixID, h, target); err != nil {
		return a.errf(op, p.Identity.Node, fmt.Errorf("update initiators of host %s: %w", e.HostID, classifyPmax(err)))
	}
	a.log.InfoContext(ctx, "host initiators changed", "op", op, "node", p.Identity.Node, "host", e.HostID,
		"before", len(h.Initiators), "after", len(target))
	return nil
}

// Check authenticates and reads the API version and the Symmetrix.
func (a *PowerMaxAdapter) Check(ctx context.Context) arrayclients.CheckResult {
	r := arrayclients.CheckResult{Array: a.cfg.Name, Family: arrayclients.PowerMax, CheckedAt: a.now().UTC()}
	c, err := a.conn.get(ctx)
	if err != nil {
		r.Error = err.Error()
		return r
	}
	rctx, cancel := arrayclients.WithRequestTimeout(ctx, a.cfg.RequestTimeout)
	defer cancel()
	v, err := c.GetVersionDetails(rctx)
	if err != nil {
		r.Error = fmt.Sprintf("read version: %v", classifyPmax(err))
		return r
	}
	if _, err := c.GetSymmetrixByID(rctx, a.cfg.SymmetrixID); err != nil {
		r.Error = fmt.Sprintf("read Symmetrix %s: %v", a.cfg.SymmetrixID, classifyPmax(err))
		return r
	}
	r.Reachable = true
	r.APIVersion = v.Version + " (api " + v.APIVersion + ")"
	return r
}

func pmaxSameSet(a, b []string) bool {
	return slices.Equal(slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b)))
}

func pmaxPrefixAll(prefix string, items []string) []string {
	out := make([]string, 0, len(items))
	for _, s := range items {
		out = append(out, prefix+s)
	}
	return out
}
