package powermax

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	pmaxtypes "github.com/dell/gopowermax/v2/types/v100"

	"github.com/fenced-project/fenced/arrayclients"
)

// Host naming variants of csi-powermax beyond csi-node-<prefix>-<nodeID>:
// the node name template (X_CSI_IG_NODENAME_TEMPLATE) and vSphere mode
// (X_CSI_VSPHERE_ENABLED with X_CSI_VSPHERE_HOSTNAME), both read from
// dell/csi-powermax service/controller.go.

// PowerMaxKindSharedHost is the Identity.Kind of a node whose PowerMax host
// is the one host or host group csi-powermax shares between every node in
// vSphere mode. Nothing on the array is the node's own: a fence removes
// nothing there and each of the node's volumes is a GapNotFenceable.
const PowerMaxKindSharedHost = "shared-host"

// pmaxDriverHostIDRE is csi-powermax's own check of a host name built from
// the template (service/node.go isValidHostID); a name failing it makes
// the driver use its default name for the node.
var pmaxDriverHostIDRE = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_\-]*$`)

// pmaxVSphereViewRE is the masking view csi-powermax gives the shared
// vSphere host, csi-mv-<prefix>-VSPHERE (service/controller.go
// GetVSphereFCHostSGAndMVIDFromNodeID). Node IDs are Kubernetes node names,
// lower case, so no node's own view has this name.
var pmaxVSphereViewRE = regexp.MustCompile(`^csi-mv-[A-Za-z0-9]{1,3}-VSPHERE$`)

// pmaxNameTemplate is a parsed X_CSI_IG_NODENAME_TEMPLATE.
type pmaxNameTemplate struct {
	prefix, suffix string
}

// ParsePowerMaxNodeNameTemplate parses csi-powermax's node name template
// (X_CSI_IG_NODENAME_TEMPLATE) as the driver does (dell/csi-powermax
// service/controller.go buildHostIDFromTemplate): the template is split at
// every "%"; the first part is the host name's prefix and the third its
// suffix, the second (the placeholder between the first two "%", e.g.
// "%node%") stands for the node ID and further parts are ignored. A node's
// host is then <prefix><node ID><suffix>, with -FC or -NVMETCP appended
// for those protocols. A template with fewer than two "%", or whose prefix
// and suffix can make no valid host name, is an error: csi-powermax would
// ignore it and use its default names.
func ParsePowerMaxNodeNameTemplate(template string) (prefix, suffix string, err error) {
	parts := strings.Split(template, "%")
	if len(parts) < 3 {
		return "", "", fmt.Errorf("node name template %q has no %%...%% placeholder for the node ID: csi-powermax ignores it and names hosts csi-node-<prefix>-<node ID>", template)
	}
	prefix, suffix = parts[0], parts[2]
	if !pmaxDriverHostIDRE.MatchString(prefix + "n" + suffix) {
		return "", "", fmt.Errorf("node name template %q: prefix %q and suffix %q must be letters, digits, '-' or '_', the prefix starting with a letter or digit, or csi-powermax ignores the template", template, prefix, suffix)
	}
	return prefix, suffix, nil
}

// hostID is the host name csi-powermax builds for the node ID, and false
// when the driver would refuse it and fall back to its default name
// (service/controller.go GetHostIDFromTemplate).
func (t pmaxNameTemplate) hostID(nodeID string) (string, bool) {
	id := t.prefix + nodeID + t.suffix
	return id, pmaxDriverHostIDRE.MatchString(id)
}

// vsphereHost reports whether a host is csi-powermax's shared vSphere
// host: the configured one, or a host in the masking view the driver
// names for it.
func (a *PowerMaxAdapter) vsphereHost(h *pmaxtypes.Host) bool {
	if v := a.cfg.PowerMaxVSphereHost; v != "" && strings.EqualFold(h.HostID, v) {
		return true
	}
	for _, mv := range h.MaskingviewIDs {
		if pmaxVSphereViewRE.MatchString(mv) {
			return true
		}
	}
	return false
}

// sharedIdentity is the identity of a node served by the shared host.
func (a *PowerMaxAdapter) sharedIdentity(node arrayclients.Node, hostID string) arrayclients.Identity {
	return arrayclients.Identity{Array: a.cfg.Name, Family: arrayclients.PowerMax, Node: node.Name, Kind: PowerMaxKindSharedHost,
		ObjectID: hostID, ObjectName: hostID, ResolvedAt: a.now().UTC()}
}

// resolveShared confirms the configured vSphere host, or host group, is on
// the array, as csi-powermax's node plugin does before it serves volumes
// (service/node.go getHostForVsphere: the host first, then the host
// group), and gives the node the shared identity.
func (a *PowerMaxAdapter) resolveShared(ctx context.Context, node arrayclients.Node) (arrayclients.Identity, error) {
	name := a.cfg.PowerMaxVSphereHost
	_, err := a.conn.getHost(ctx, name)
	if err == nil {
		return a.sharedIdentity(node, name), nil
	}
	if !pmaxtypes.IsNotFoundError(err) {
		return arrayclients.Identity{}, a.errf("resolve", node.Name, fmt.Errorf("read vSphere host %s: %w", name, err))
	}
	c, err := a.conn.get(ctx)
	if err != nil {
		return arrayclients.Identity{}, a.errf("resolve", node.Name, err)
	}
	rctx, cancel := arrayclients.WithRequestTimeout(ctx, a.cfg.RequestTimeout)
	defer cancel()
	hg, err := c.GetHostGroupByID(rctx, a.cfg.SymmetrixID, name)
	switch {
	case pmaxtypes.IsNotFoundError(err):
		return arrayclients.Identity{}, a.errf("resolve", node.Name, fmt.Errorf("%w: csi-powermax's vSphere host or host group %s is not on the array", arrayclients.ErrNoIdentity, name))
	case err != nil:
		return arrayclients.Identity{}, a.errf("resolve", node.Name, fmt.Errorf("read vSphere host group %s: %w", name, classifyPmax(err)))
	case hg == nil || !strings.EqualFold(hg.HostGroupID, name):
		return arrayclients.Identity{}, a.errf("resolve", node.Name, fmt.Errorf("read vSphere host group %s: the array answered for host group %q", name, hostGroupIDOf(hg)))
	}
	return a.sharedIdentity(node, name), nil
}

func hostGroupIDOf(hg *pmaxtypes.HostGroup) string {
	if hg == nil {
		return ""
	}
	return hg.HostGroupID
}

// sharedHostGap is why a volume of a node served by the shared vSphere
// host cannot be cut.
func sharedHostGap(id arrayclients.Identity, v arrayclients.VolumeRef) *arrayclients.Gap {
	return &arrayclients.Gap{Reason: arrayclients.GapNotFenceable, Detail: fmt.Sprintf("%s: csi-powermax in vSphere mode masks every node's volumes to the one "+
		"host or host group %s (X_CSI_VSPHERE_HOSTNAME) and attaches them to the VMs as RDMs; a shared host serving every node "+
		"cannot be fenced per node (cutting it would cut every node)", v.Volume, id.ObjectID)}
}

// planShared is the plan for a node served by the shared host: nothing to
// remove, and a gap for every footprint volume. It reads nothing.
func (a *PowerMaxAdapter) planShared(id arrayclients.Identity, vols []arrayclients.VolumeRef) (arrayclients.Plan, error) {
	if err := a.checkIdentity(id); err != nil {
		return arrayclients.Plan{}, a.errf("plan", id.Node, err)
	}
	raw, err := json.Marshal(PowerMaxEntries{SymmetrixID: a.cfg.SymmetrixID, HostID: id.ObjectID, Initiators: []string{}})
	if err != nil {
		return arrayclients.Plan{}, a.errf("plan", id.Node, err)
	}
	p := arrayclients.Plan{Array: a.cfg.Name, Family: arrayclients.PowerMax, Identity: id, Entries: raw,
		Summary:   fmt.Sprintf("nothing of the node's own to remove: host %s is csi-powermax's vSphere host, shared by every node", id.ObjectID),
		CreatedAt: a.now().UTC()}
	for _, v := range vols {
		p.Volumes = append(p.Volumes, arrayclients.VolumeCut{VolumeRef: v, Gap: sharedHostGap(id, v)})
	}
	if len(vols) > 0 {
		p.Summary += "; " + arrayclients.FootprintSummary(p.Volumes)
	}
	return p, nil
}

// sharedVerification is the read-back of a shared-host plan: it removed
// nothing and gives nothing back, and the node's volumes there are gaps,
// never cuts.
func (a *PowerMaxAdapter) sharedVerification(p arrayclients.Plan) (arrayclients.Verification, error) {
	if _, err := a.entries(p); err != nil {
		return arrayclients.Verification{}, a.errf("verify", p.Identity.Node, err)
	}
	return arrayclients.Verification{Fenced: true, Restored: true, CheckedAt: a.now().UTC()}, nil
}
