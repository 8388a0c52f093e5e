// Package unity fences nodes at Dell Unity arrays: a fence removes the
// host of the node from the host access of its LUNs and from the host
// lists of the NFS shares of its file systems, and gives them back on undo.
// New is its arrayclients.Constructor; NewUnity returns the concrete
// adapter.
package unity

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/dell/gounity"
	unitytypes "github.com/dell/gounity/apitypes"

	"github.com/fenced-project/fenced/arrayclients"
)

// Unity error codes the adapter acts on.
const (
	unityNothingToModify = "0x6701020"
	unityNotFound        = "0x7d13005"
)

// unityPageSize is the page size for hostLUN lists; unityMaxPages bounds one.
const (
	unityPageSize = 500
	unityMaxPages = 1000
)

// UnityAdapter fences a node by removing its host from the host access of
// every LUN that grants it, and unfences by adding it back where the
// restore scope allows. It finds the host's LUNs by the host's hostLUN
// objects (one call, never a scan of every LUN) and reads each LUN by ID.
// gounity writes a LUN's whole host-access list (modifyLun replaces it), so
// each write is a read-modify-write of that LUN's current list, read right
// before.
type UnityAdapter struct {
	cfg  arrayclients.Config
	pool *unityPool
	log  *slog.Logger
	now  func() time.Time

	mu      sync.Mutex
	queryID int // real-time metrics query, 0 = none yet
}

var _ arrayclients.Adapter = (*UnityAdapter)(nil)

// UnityEntries is the Entries record of a Unity plan.
type UnityEntries struct {
	HostID   string `json:"hostId"`
	HostName string `json:"hostName"`
	// LUNs are the host-access entries the fence removes, in HLU order.
	LUNs []UnityLUNAccess `json:"luns"`
	// Shares are the NFS shares of footprint file systems whose host
	// lists named the host (nfs.go).
	Shares []UnityShareAccess `json:"shares,omitempty"`
}

// UnityLUNAccess is one LUN host-access entry of the fenced host.
type UnityLUNAccess struct {
	LUN  string `json:"lun"`
	Name string `json:"name,omitempty"`
	HLU  int    `json:"hlu"`
	// AccessMask is the mask gounity writes ("1", production access): its
	// LUN reads do not return the mask, and ModifyVolumeExport can set no
	// other.
	AccessMask string `json:"accessMask"`
	// OtherHosts had access too when the plan was made (evidence).
	OtherHosts []string `json:"otherHosts,omitempty"`
}

// New is the Unity family's arrayclients.Constructor (NewUnity as an
// arrayclients.Adapter).
func New(ctx context.Context, cfg arrayclients.Config, logger *slog.Logger) (arrayclients.Adapter, error) {
	return arrayclients.Adapt(NewUnity(ctx, cfg, logger))
}

// NewUnity builds a Unity adapter and its gounity clients. It sends nothing
// until first used.
func NewUnity(_ context.Context, cfg arrayclients.Config, logger *slog.Logger) (*UnityAdapter, error) {
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = arrayclients.DefaultRequestTimeout
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	pool, err := newUnityPool(cfg, logger)
	if err != nil {
		return nil, fmt.Errorf("unity %s: %w", cfg.Name, err)
	}
	return &UnityAdapter{cfg: cfg, pool: pool, log: logger, now: time.Now}, nil
}

// Name is the configured array name.
func (a *UnityAdapter) Name() string { return a.cfg.Name }

// Family is Unity.
func (a *UnityAdapter) Family() arrayclients.Family { return arrayclients.Unity }

func (a *UnityAdapter) errf(op, node string, err error) error {
	return fmt.Errorf("unity %s: %s %s: %w", a.cfg.Name, op, node, err)
}

// unityHostNames are the array host names the node may have: the
// override alone, or short and long from csi-unity's "<short>,<long>"
// node ID (short equals long for a dot-free name or an IP).
func unityHostNames(node arrayclients.Node) (short, long string, err error) {
	if node.Override != "" {
		short, long = node.Override, node.Override
	} else {
		id := node.CSINodeIDs[arrayclients.DriverUnity]
		if id == "" {
			return "", "", fmt.Errorf("%w: the node has no %s CSINode ID and no override", arrayclients.ErrNoIdentity, arrayclients.DriverUnity)
		}
		var ok bool
		short, long, ok = strings.Cut(id, ",")
		if !ok || short == "" || long == "" || strings.Contains(long, ",") {
			return "", "", fmt.Errorf("%s CSINode ID %q: want <short>,<long>", arrayclients.DriverUnity, id)
		}
	}
	for _, name := range []string{short, long} {
		if !unityNameRE.MatchString(name) {
			return "", "", fmt.Errorf("host name %q: want letters, digits, '.', '-', '_'", name)
		}
	}
	return short, long, nil
}

// unityHasIPPort reports whether one of the host's IP ports is address.
func unityHasIPPort(h *unitytypes.Host, address string) bool {
	for _, p := range h.HostContent.IPPorts {
		if p.Address == address {
			return true
		}
	}
	return false
}

// nodeHost finds the host csi-unity's controller publishes the node's
// volumes to (dell/csi-unity service/controller.go getHostID, called by
// ControllerPublishVolume with the two halves of the node ID): the host
// named short when one of its IP ports is long; otherwise the host named
// long. A short-named host without that IP port is passed over, as the
// driver does. The driver also wants the long-named host to have the IP
// port; a long-named host without it is still the node's (it is the name
// the node plugin creates, and cutting a host the driver would not
// publish to gives no node access back).
func (a *UnityAdapter) nodeHost(ctx context.Context, short, long string) (*unitytypes.Host, string, error) {
	if short != long {
		h, err := a.findHost(ctx, short)
		switch {
		case err == nil && unityHasIPPort(h, long):
			return h, short, nil
		case err != nil && !errors.Is(err, arrayclients.ErrNoIdentity):
			return nil, "", err
		}
	}
	h, err := a.findHost(ctx, long)
	if errors.Is(err, arrayclients.ErrNoIdentity) && short != long {
		return nil, "", fmt.Errorf("%w: no host named %q with an IP port %q, and no host named %q", arrayclients.ErrNoIdentity, short, long, long)
	}
	if err != nil {
		return nil, "", err
	}
	return h, long, nil
}

// findHost reads the host by exact name and checks the answer.
func (a *UnityAdapter) findHost(ctx context.Context, name string) (*unitytypes.Host, error) {
	var h *unitytypes.Host
	err := a.pool.call(ctx, func(ctx context.Context, c gounity.UnityClient) error {
		var err error
		h, err = c.FindHostByName(ctx, name)
		return err
	})
	switch {
	case errors.Is(err, gounity.ErrorHostNotFound):
		return nil, fmt.Errorf("%w: no host named %q", arrayclients.ErrNoIdentity, name)
	case errors.Is(err, gounity.ErrorMultipleHostFound):
		return nil, fmt.Errorf("%w: several hosts are named %q; set an override or remove the duplicate", arrayclients.ErrAmbiguousIdentity, name)
	case err != nil:
		return nil, fmt.Errorf("find host %q: %w", name, err)
	case h == nil || h.HostContent.Name != name || !unityIDRE.MatchString(h.HostContent.ID):
		return nil, fmt.Errorf("array answered host %+v for name %q", h, name)
	}
	return h, nil
}

// Resolve finds the host csi-unity publishes the node's volumes to
// (nodeHost): the short-named host when one of its IP ports is the long
// name, else the long-named host; an override names the host alone.
func (a *UnityAdapter) Resolve(ctx context.Context, node arrayclients.Node) (arrayclients.Identity, error) {
	short, long, err := unityHostNames(node)
	if err != nil {
		return arrayclients.Identity{}, a.errf("resolve", node.Name, err)
	}
	h, name, err := a.nodeHost(ctx, short, long)
	if err != nil {
		return arrayclients.Identity{}, a.errf("resolve", node.Name, err)
	}
	var keys []string
	for _, in := range append(slices.Clone(h.HostContent.FcInitiators), h.HostContent.IscsiInitiators...) {
		if !unityIDRE.MatchString(in.ID) {
			return arrayclients.Identity{}, a.errf("resolve", node.Name, fmt.Errorf("host %s lists initiator %q", h.HostContent.ID, in.ID))
		}
		var hi *unitytypes.HostInitiator
		err := a.pool.call(ctx, func(ctx context.Context, c gounity.UnityClient) error {
			var err error
			hi, err = c.FindHostInitiatorByID(ctx, in.ID)
			return err
		})
		if err != nil {
			return arrayclients.Identity{}, a.errf("resolve", node.Name, fmt.Errorf("read initiator %s: %w", in.ID, err))
		}
		if hi.HostInitiatorContent.InitiatorID != "" {
			keys = append(keys, hi.HostInitiatorContent.InitiatorID)
		}
	}
	sort.Strings(keys)
	return arrayclients.Identity{
		Array: a.cfg.Name, Family: arrayclients.Unity, Node: node.Name, ObjectID: h.HostContent.ID, ObjectName: name,
		Keys: keys, ResolvedAt: a.now().UTC(),
	}, nil
}

func (a *UnityAdapter) checkIdentity(id arrayclients.Identity) error {
	if id.Array != a.cfg.Name || id.Family != arrayclients.Unity || !unityIDRE.MatchString(id.ObjectID) || !unityNameRE.MatchString(id.ObjectName) {
		return fmt.Errorf("%w: identity of %s/%s host %q", arrayclients.ErrPlanMismatch, id.Family, id.Array, id.ObjectID)
	}
	return nil
}

// unityAccessOf returns the host's HLU on the LUN and the other hosts with access.
func unityAccessOf(v unitytypes.Volume, hostID string) (hlu int, has bool, others []string) {
	for _, ha := range v.VolumeContent.HostAccessResponse {
		if ha.HostContent.ID == hostID {
			hlu, has = ha.HLU, true
		} else if ha.HostContent.ID != "" {
			others = append(others, ha.HostContent.ID)
		}
	}
	return hlu, has, others
}

func (a *UnityAdapter) entries(p arrayclients.Plan) (UnityEntries, error) {
	var e UnityEntries
	if p.Array != a.cfg.Name || p.Family != arrayclients.Unity {
		return e, fmt.Errorf("%w: plan of %s/%s", arrayclients.ErrPlanMismatch, p.Family, p.Array)
	}
	if err := json.Unmarshal(p.Entries, &e); err != nil {
		return e, fmt.Errorf("%w: entries: %w", arrayclients.ErrPlanMismatch, err)
	}
	if e.HostID != p.Identity.ObjectID || !unityIDRE.MatchString(e.HostID) {
		return e, fmt.Errorf("%w: plan for host %q", arrayclients.ErrPlanMismatch, e.HostID)
	}
	for _, l := range e.LUNs {
		if !unityIDRE.MatchString(l.LUN) || l.HLU < 0 {
			return e, fmt.Errorf("%w: LUN entry %+v", arrayclients.ErrPlanMismatch, l)
		}
	}
	return e, checkShareEntries(e.Shares)
}

// readLUN reads one LUN right before a write; found is false when it is gone.
func (a *UnityAdapter) readLUN(ctx context.Context, id string) (v *unitytypes.Volume, found bool, err error) {
	err = a.pool.call(ctx, func(ctx context.Context, c gounity.UnityClient) error {
		var err error
		v, err = c.FindVolumeByID(ctx, id)
		return err
	})
	if errors.Is(err, gounity.ErrorVolumeNotFound) {
		return nil, false, nil
	}
	if err == nil && (v == nil || v.VolumeContent.ResourceID != id) {
		err = fmt.Errorf("array answered another LUN for %s", id)
	}
	return v, err == nil, err
}

// writeAccess replaces the LUN's host list. "Nothing to modify" means the
// list already is what we want.
func (a *UnityAdapter) writeAccess(ctx context.Context, lun string, hosts []string) error {
	err := a.pool.call(ctx, func(ctx context.Context, c gounity.UnityClient) error {
		return c.ModifyVolumeExport(ctx, lun, hosts)
	})
	if unityCode(err, unityNothingToModify) {
		return nil
	}
	return err
}

// Apply removes the host from each planned LUN, one LUN at a time, then
// from the planned NFS shares' lists (nfs.go applyNFS). A LUN that
// no longer lists the host (or no longer exists) is skipped.
func (a *UnityAdapter) Apply(ctx context.Context, p arrayclients.Plan) error {
	e, err := a.entries(p)
	if err != nil {
		return a.errf("apply", p.Identity.Node, err)
	}
	for _, l := range e.LUNs {
		v, found, err := a.readLUN(ctx, l.LUN)
		if err != nil {
			return a.errf("apply", p.Identity.Node, fmt.Errorf("read LUN %s: %w", l.LUN, err))
		}
		if !found {
			a.log.WarnContext(ctx, "planned LUN no longer exists", "node", p.Identity.Node, "lun", l.LUN)
			continue
		}
		_, has, others := unityAccessOf(*v, e.HostID)
		if !has {
			continue
		}
		if err := a.writeAccess(ctx, l.LUN, others); err != nil {
			return a.errf("apply", p.Identity.Node, fmt.Errorf("remove host %s from LUN %s: %w", e.HostID, l.LUN, err))
		}
		a.log.InfoContext(ctx, "host access removed", "node", p.Identity.Node, "host", e.HostID, "lun", l.LUN, "kept", len(others))
	}
	if err := a.applyNFS(ctx, p, e); err != nil {
		return a.errf("apply", p.Identity.Node, err)
	}
	return nil
}

// Check reaches the array (basicSystemInfo), then proves the session with
// the smallest authenticated read. gounity exposes no API version.
func (a *UnityAdapter) Check(ctx context.Context) arrayclients.CheckResult {
	r := arrayclients.CheckResult{Array: a.cfg.Name, Family: arrayclients.Unity, CheckedAt: a.now().UTC()}
	err := a.pool.call(ctx, func(ctx context.Context, c gounity.UnityClient) error {
		if err := c.BasicSystemInfo(ctx, a.pool.connect()); err != nil {
			return fmt.Errorf("basic system info: %w", err)
		}
		if _, _, err := c.ListVolumes(ctx, 1, 1); err != nil {
			return fmt.Errorf("list LUNs: %w", err)
		}
		return nil
	})
	if err != nil {
		r.Error = err.Error()
		return r
	}
	r.Reachable = true
	return r
}
