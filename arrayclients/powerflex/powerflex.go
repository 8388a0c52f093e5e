// Package powerflex fences nodes at Dell PowerFlex (VxFlex OS) systems: a
// fence unmaps the node's volumes from its SDC (or NVMe host), and removes
// the node's IPs from the exports of its NFS file systems, and gives them
// back on undo. NewPowerFlex is its arrayclients.Constructor.
package powerflex

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	siotypes "github.com/dell/goscaleio/types/v1"

	"github.com/fenced-project/fenced/arrayclients"
)

// PowerFlexAdapter fences a node by unmapping every volume from its SDC and
// unfences by mapping them back with the recorded access modes and limits.
// The SDC is the node's identity: csi-vxflexos reports the SDC GUID as the
// node's CSI node ID.
type PowerFlexAdapter struct {
	cfg    arrayclients.Config
	logger *slog.Logger
	pool   *powerFlexPool

	mu     sync.Mutex // guards system and statsReadAt
	system *siotypes.System
	// statsReadAt is when a sweep last read each SDC's statistics, for the
	// SDCs the last sweep with I/O listed Disconnected (sweepStatistics).
	statsReadAt map[string]time.Time
	// statsBatchRefused is set once the gateway refused
	// querySelectedStatistics (sweepBatch).
	statsBatchRefused atomic.Bool
	// resolveLists shares SDC listings among Resolve calls (see
	// resolveListingAge).
	resolveLists arrayclients.Listings[siotypes.Sdc]
}

var _ arrayclients.Adapter = (*PowerFlexAdapter)(nil)

// PowerFlexEntries is Plan.Entries for PowerFlex: the SDC (or NVMe host)
// and every volume mapping a fence removes.
type PowerFlexEntries struct {
	SystemID string `json:"systemID"`
	// SdcID is the SDC's ID, or the NVMe host's (the MDM lists NVMe hosts
	// among the SDCs).
	SdcID   string `json:"sdcID"`
	SdcGUID string `json:"sdcGUID"`
	// HostType is NVMeHost for an NVMe/TCP host (nvme.go), empty
	// for an SDC; HostName is the NVMe host's name, read back to make sure
	// the ID still names the node's host.
	HostType string             `json:"hostType,omitempty"`
	HostName string             `json:"hostName,omitempty"`
	Mappings []PowerFlexMapping `json:"mappings"`
	// HoldersRecorded: each mapping lists the other SDCs the volume was
	// mapped to when the plan was read. Plans written before footprints
	// (ledger v1) did not record them.
	HoldersRecorded bool `json:"holdersRecorded,omitempty"`
	// NFSExports are the host entries naming the node in the NFS exports
	// of the footprint volumes (nfs.go). SdcID is empty for an
	// identity of kind PowerFlexKindNFSClient.
	NFSExports []PowerFlexNFSExport `json:"nfsExports,omitempty"`
}

// PowerFlexMapping is one volume's mapping to the SDC, with what Undo needs
// to restore it exactly.
type PowerFlexMapping struct {
	VolumeID   string `json:"volumeID"`
	VolumeName string `json:"volumeName,omitempty"`
	// AccessMode is ReadWrite, ReadOnly or NoAccess.
	AccessMode string `json:"accessMode"`
	// LimitIops and LimitBwInMbps are the mapping's limits (0 = unlimited).
	LimitIops     int `json:"limitIops"`
	LimitBwInMbps int `json:"limitBwInMbps"`
	// Holders are the IDs of the other SDCs the volume was mapped to when
	// the plan was read: a volume that was shared then is mapped back with
	// multiple mappings allowed, and one that another SDC holds now but
	// did not then has moved.
	Holders []string `json:"holders,omitempty"`
}

func (m PowerFlexMapping) String() string {
	name := m.VolumeID
	if m.VolumeName != "" {
		name = m.VolumeName + " (" + m.VolumeID + ")"
	}
	return fmt.Sprintf("volume %s %s iops=%d bw=%dMBps", name, m.AccessMode, m.LimitIops, m.LimitBwInMbps)
}

// NewPowerFlex builds a PowerFlex adapter over goscaleio. It does no I/O:
// the first call logs in (and learns the API version), later calls reuse
// the session and log in again when the gateway answers 401.
func NewPowerFlex(_ context.Context, cfg arrayclients.Config, logger *slog.Logger) (arrayclients.Adapter, error) {
	return newPowerFlex(cfg, logger)
}

func newPowerFlex(cfg arrayclients.Config, logger *slog.Logger) (*PowerFlexAdapter, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Endpoint == "" {
		return nil, fmt.Errorf("powerflex array %s: endpoint: required", cfg.Name)
	}
	if cfg.Username == "" || cfg.Password == "" {
		return nil, fmt.Errorf("powerflex array %s: username and password: required", cfg.Name)
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = arrayclients.DefaultRequestTimeout
	}
	return &PowerFlexAdapter{cfg: cfg, logger: logger, pool: newPowerFlexPool(cfg)}, nil
}

// Name is the configured array name.
func (a *PowerFlexAdapter) Name() string { return a.cfg.Name }

// Family is PowerFlex.
func (a *PowerFlexAdapter) Family() arrayclients.Family { return arrayclients.PowerFlex }

// findSystem returns the configured system (read once, then cached).
func (a *PowerFlexAdapter) findSystem(k powerFlexCall) (*siotypes.System, error) {
	a.mu.Lock()
	sys := a.system
	a.mu.Unlock()
	if sys != nil {
		return sys, nil
	}
	all, err := k.systems()
	if err != nil {
		return nil, fmt.Errorf("list systems: %w", err)
	}
	sys, err = a.selectSystem(all)
	if err != nil {
		return nil, err
	}
	a.mu.Lock()
	a.system = sys
	a.mu.Unlock()
	return sys, nil
}

// selectSystem picks the configured system: by SystemID, or by SystemName
// when set; with neither, the gateway's only system.
func (a *PowerFlexAdapter) selectSystem(all []*siotypes.System) (*siotypes.System, error) {
	var match []*siotypes.System
	var ids []string
	for _, s := range all {
		ids = append(ids, s.ID)
		switch {
		case a.cfg.SystemID == "" && a.cfg.SystemName == "":
			match = append(match, s)
		case a.cfg.SystemID != "" && s.ID == a.cfg.SystemID:
			match = append(match, s)
		case a.cfg.SystemName != "" && s.Name == a.cfg.SystemName:
			match = append(match, s)
		}
	}
	switch len(match) {
	case 1:
		return match[0], nil
	case 0:
		return nil, fmt.Errorf("system %q (name %q) not found; the gateway has %s",
			a.cfg.SystemID, a.cfg.SystemName, strings.Join(ids, ", "))
	default:
		return nil, fmt.Errorf("the gateway has %d systems (%s): set systemID", len(match), strings.Join(ids, ", "))
	}
}

// resolveListingAge is how old a shared SDC listing (arrayclients.Listings)
// may be for Resolve to take a match from it. Learning the identities of
// thousands of nodes at a cold start resolved each one from a listing of
// its own, every listing carrying every SDC: quadratic in the nodes (the
// identities of 2,000 nodes were learned 230 s after a cold start, 93 s
// with shared listings). A node's SDC ID for its GUID does not change
// while the SDC stays registered, and an
// identity is learned minutes to months before any fence uses it, so a
// match from a listing a few seconds old is as good as one from a fresh
// listing. No match, or more than one, is decided on a listing begun
// after the call's start (a newly registered SDC is not missed for it).
const resolveListingAge = 5 * time.Second

// Resolve finds the SDC whose GUID is the node's csi-vxflexos node ID, or
// the NVMe host whose name is exactly the node ID (an NVMe/TCP node,
// nvme.go), or, with an override, the SDC or NVMe host whose ID,
// name, GUID or one of whose IPs is exactly the override. Exactly one must
// match. The identity's Keys are the GUID, the SDC's IPs and the node's
// addresses (what NFS exports name it by); an NVMe host's identity, of
// kind PowerFlexKindNVMeHost, has the node's addresses only. A node ID
// that names neither is a node without one (csi-vxflexos reports the
// Node UID then): its identity, of kind PowerFlexKindNFSClient, is its
// addresses.
func (a *PowerFlexAdapter) Resolve(ctx context.Context, node arrayclients.Node) (arrayclients.Identity, error) {
	key, byOverride := node.Override, node.Override != ""
	if !byOverride {
		key = node.CSINodeIDs[arrayclients.DriverPowerFlex]
	}
	if key == "" {
		return arrayclients.Identity{}, fmt.Errorf("%w: node has no %s node ID and no override", arrayclients.ErrNoIdentity, arrayclients.DriverPowerFlex)
	}
	var id arrayclients.Identity
	start := time.Now()
	err := a.pool.with(ctx, func(k powerFlexCall) error {
		sys, err := a.findSystem(k)
		if err != nil {
			return err
		}
		fetch := func(context.Context) ([]siotypes.Sdc, error) { return k.sdcs(sys) }
		matches := func(since time.Time) ([]siotypes.Sdc, error) {
			sdcs, err := a.resolveLists.List(ctx, since, fetch)
			if err != nil {
				return nil, fmt.Errorf("list SDCs: %w", err)
			}
			var match []siotypes.Sdc
			for _, s := range sdcs {
				if strings.EqualFold(s.SdcGUID, key) || (!byOverride && nvmeHostMatches(s, key)) ||
					(byOverride && (s.ID == key || s.Name == key || slices.Contains(sdcIPs(s), key))) {
					match = append(match, s)
				}
			}
			return match, nil
		}
		// A match from a listing up to resolveListingAge old; anything
		// else is decided on a listing begun after this call's start.
		match, err := matches(start.Add(-resolveListingAge))
		if err == nil && len(match) != 1 {
			match, err = matches(start)
		}
		if err != nil {
			return err
		}
		what := "GUID " + key + " nor NVMe host named so"
		if byOverride {
			what = "ID, name, GUID or IP " + key
		}
		switch len(match) {
		case 0:
			if ips := nodeIPs(node); !byOverride && len(ips) > 0 {
				id = arrayclients.Identity{Array: a.cfg.Name, Family: arrayclients.PowerFlex, Node: node.Name, Kind: PowerFlexKindNFSClient,
					ObjectName: node.Name, Keys: ips, ResolvedAt: time.Now().UTC()}
				return nil
			}
			return fmt.Errorf("%w: no SDC with %s in system %s", arrayclients.ErrNoIdentity, what, sys.ID)
		case 1:
		default:
			ids := make([]string, len(match))
			for i, s := range match {
				ids[i] = fmt.Sprintf("%s (%s, GUID %s)", s.ID, s.Name, s.SdcGUID)
			}
			return fmt.Errorf("%w: %d SDCs match %s: %s", arrayclients.ErrAmbiguousIdentity, len(match), what, strings.Join(ids, "; "))
		}
		s := match[0]
		if s.HostType == pflexHostTypeNVMe {
			id = a.nvmeIdentity(node, s)
			id.ResolvedAt = time.Now().UTC()
			return nil
		}
		id = arrayclients.Identity{
			Array: a.cfg.Name, Family: arrayclients.PowerFlex, Node: node.Name, ObjectID: s.ID, ObjectName: s.Name,
			Keys: append([]string{s.SdcGUID}, addIPs(sdcIPs(s), nodeIPs(node))...), ResolvedAt: time.Now().UTC(),
		}
		return nil
	})
	return id, err
}

// nodeIPs returns the node's addresses that are IPs.
func nodeIPs(n arrayclients.Node) []string {
	return addIPs(nil, n.Addresses)
}

// addIPs appends to ips each of more that is an IP and not in it yet.
func addIPs(ips, more []string) []string {
	for _, m := range more {
		if net.ParseIP(m) != nil && !slices.Contains(ips, m) {
			ips = append(ips, m)
		}
	}
	return ips
}

// sdcIPs returns the SDC's IPs (sdcIps, else sdcIp).
func sdcIPs(s siotypes.Sdc) []string {
	if len(s.SdcIPs) > 0 {
		return slices.Clone(s.SdcIPs)
	}
	if s.SdcIP != "" {
		return []string{s.SdcIP}
	}
	return nil
}

// mappingsOf lists the volumes mapped to sdcID, sorted by volume ID.
func mappingsOf(vols []*siotypes.Volume, sdcID string) []PowerFlexMapping {
	var out []PowerFlexMapping
	for _, v := range vols {
		for _, m := range v.MappedSdcInfo {
			if m != nil && m.SdcID == sdcID {
				out = append(out, PowerFlexMapping{
					VolumeID: v.ID, VolumeName: v.Name, AccessMode: m.AccessMode,
					LimitIops: m.LimitIops, LimitBwInMbps: m.LimitBwInMbps, Holders: otherSdcs(v, sdcID),
				})
			}
		}
	}
	slices.SortFunc(out, func(x, y PowerFlexMapping) int { return strings.Compare(x.VolumeID, y.VolumeID) })
	return out
}

// otherSdcs lists the IDs of the SDCs other than sdcID the volume is
// mapped to, sorted.
func otherSdcs(v *siotypes.Volume, sdcID string) []string {
	var out []string
	for _, m := range v.MappedSdcInfo {
		if m != nil && m.SdcID != sdcID && m.SdcID != "" {
			out = append(out, m.SdcID)
		}
	}
	slices.Sort(out)
	return out
}

// current reads the volumes mapped to the SDC. found is false when the
// SDC no longer exists.
func (a *PowerFlexAdapter) current(k powerFlexCall, sdcID, guid string) (vols []*siotypes.Volume, found bool, err error) {
	sdc, err := k.sdcByID(sdcID)
	if powerFlexIs(err, pflexMsgNoSdc) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("read SDC %s: %w", sdcID, err)
	}
	if guid != "" && !strings.EqualFold(sdc.Sdc.SdcGUID, guid) {
		return nil, false, fmt.Errorf("%w: SDC %s now has GUID %s, not %s", arrayclients.ErrNoIdentity, sdcID, sdc.Sdc.SdcGUID, guid)
	}
	vols, err = k.sdcVolumes(sdc)
	if err != nil {
		return nil, false, fmt.Errorf("list volumes of SDC %s: %w", sdcID, err)
	}
	return vols, true, nil
}

// planEntries records every volume mapped to the identity's SDC with its
// access mode, limits and other holders, and returns the volumes it read.
func (a *PowerFlexAdapter) planEntries(k powerFlexCall, id arrayclients.Identity) (PowerFlexEntries, pflexListing, error) {
	if id.Kind == PowerFlexKindNVMeHost {
		return a.planEntriesNVMe(k, id)
	}
	guid := ""
	if len(id.Keys) > 0 {
		guid = id.Keys[0]
	}
	sys, err := a.findSystem(k)
	if err != nil {
		return PowerFlexEntries{}, pflexListing{}, err
	}
	e := PowerFlexEntries{SystemID: sys.ID, SdcID: id.ObjectID, SdcGUID: guid, HoldersRecorded: true}
	l, found, err := a.hostVolumes(k, e)
	if err != nil {
		return PowerFlexEntries{}, pflexListing{}, err
	}
	if !found {
		return PowerFlexEntries{}, pflexListing{}, fmt.Errorf("%w: SDC %s no longer exists", arrayclients.ErrNoIdentity, id.ObjectID)
	}
	e.Mappings = l.mappings(id.ObjectID)
	if e.Mappings == nil {
		e.Mappings = []PowerFlexMapping{}
	}
	return e, l, nil
}

// entries decodes a plan of this array.
func (a *PowerFlexAdapter) entries(p arrayclients.Plan) (PowerFlexEntries, error) {
	var e PowerFlexEntries
	if p.Array != a.cfg.Name || p.Family != arrayclients.PowerFlex {
		return e, fmt.Errorf("%w: plan is for %s array %q", arrayclients.ErrPlanMismatch, p.Family, p.Array)
	}
	if err := json.Unmarshal(p.Entries, &e); err != nil {
		return e, fmt.Errorf("%w: entries: %w", arrayclients.ErrPlanMismatch, err)
	}
	nfsOnly := p.Identity.Kind == PowerFlexKindNFSClient
	if (e.SdcID == "" && !nfsOnly) || e.SdcID != p.Identity.ObjectID {
		return e, fmt.Errorf("%w: entries name SDC %q, identity %q", arrayclients.ErrPlanMismatch, e.SdcID, p.Identity.ObjectID)
	}
	if e.isNVMe() != (p.Identity.Kind == PowerFlexKindNVMeHost) {
		return e, fmt.Errorf("%w: entries name host type %q, identity kind %q", arrayclients.ErrPlanMismatch, e.HostType, p.Identity.Kind)
	}
	return e, nil
}

// Apply unmaps every planned volume still mapped to the SDC (or NVMe
// host), and removes
// the node's entries from the NFS footprint volumes' exports (applyNFS).
// A mapping that is already gone (or whose volume is gone) counts as done.
func (a *PowerFlexAdapter) Apply(ctx context.Context, p arrayclients.Plan) error {
	e, err := a.entries(p)
	if err != nil {
		return err
	}
	return a.pool.with(ctx, func(k powerFlexCall) error {
		if e.SdcID != "" {
			if err := a.applySDC(k, p, e); err != nil {
				return err
			}
		}
		return a.applyNFS(k, p, e)
	})
}

// applySDC unmaps the plan's volumes from the SDC (or NVMe host).
func (a *PowerFlexAdapter) applySDC(k powerFlexCall, p arrayclients.Plan, e PowerFlexEntries) error {
	cur, found, err := a.hostMappings(k, e)
	if err != nil {
		return err
	}
	if !found {
		a.logger.Info("host no longer exists: nothing to unmap", "node", p.Identity.Node, "host", e.hostLabel())
		return nil
	}
	// The plan's mappings, and each footprint volume with a cut that
	// the driver mapped after the plan was read.
	unmap := map[string]string{}
	for _, m := range e.Mappings {
		unmap[m.VolumeID] = m.String()
	}
	for _, vc := range pflexBlockCuts(p) {
		if _, ok := unmap[vc.Object]; !ok {
			unmap[vc.Object] = "footprint volume " + vc.Volume + " (" + vc.Object + ")"
		}
	}
	var vols []string
	for _, vol := range slices.Sorted(maps.Keys(unmap)) {
		if slices.ContainsFunc(cur, func(c PowerFlexMapping) bool { return c.VolumeID == vol }) {
			vols = append(vols, vol)
		}
	}
	// One call per volume, side by side on the pool's idle clients: the
	// MDM takes them independently, as it does from csi-vxflexos, whose
	// ControllerUnpublishVolume unmaps one volume per call and is driven
	// by the external-attacher's concurrent workers (--worker-threads,
	// 10 by default) when a node's pods move.
	return each(a.pool, k, vols, func(k powerFlexCall, vol string) error {
		err := a.unmapHost(k, e, vol)
		if powerFlexIs(err, pflexMsgNotMapped) || powerFlexIs(err, pflexMsgNoVolume) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("unmap %s: %w", unmap[vol], err)
		}
		return nil
	})
}

// powerFlexVerify compares the planned mappings with the current ones.
func powerFlexVerify(planned, cur []PowerFlexMapping, found bool) arrayclients.Verification {
	v := arrayclients.Verification{CheckedAt: time.Now().UTC(), Fenced: len(cur) == 0, Restored: found}
	for _, c := range cur {
		v.Remaining = append(v.Remaining, c.String())
	}
	for _, m := range planned {
		i := slices.IndexFunc(cur, func(c PowerFlexMapping) bool { return c.VolumeID == m.VolumeID })
		switch {
		case !found:
			v.Missing = append(v.Missing, m.String()+": host no longer exists")
		case i < 0:
			v.Missing = append(v.Missing, m.String())
		case cur[i].AccessMode != m.AccessMode || cur[i].LimitIops != m.LimitIops || cur[i].LimitBwInMbps != m.LimitBwInMbps:
			v.Missing = append(v.Missing, m.String()+": now "+cur[i].String())
		}
	}
	v.Restored = v.Restored && len(v.Missing) == 0
	return v
}
