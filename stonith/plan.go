package stonith

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fenced-project/fenced/arrayclients"
)

// RoutePlan serves `fenced plan`: what a fence of a node would cut now.
const RoutePlan = "GET /v1/plan"

// PlanRequest names the node whose fence is planned.
type PlanRequest struct {
	Cluster string `json:"cluster"`
	Node    string `json:"node"`
}

// NodePlan is what a fence of a node would cut if it failed now, read
// from the informers, the ledger and the arrays without writing anything:
// its storage footprint, the cut of each volume on each array and every
// gap. A node with a gap is Protected=false and would not be fenced.
type NodePlan struct {
	Cluster string `json:"cluster"`
	Node    string `json:"node"`
	// Protected is true when every footprint volume has a cut and every
	// array concerned could be read.
	Protected bool `json:"protected"`
	// Footprint is every volume Kubernetes has attached or is attaching to
	// the node, with where each is placed.
	Footprint []arrayclients.FootprintVolume `json:"footprint"`
	// Arrays is, for every array where the node has an identity or a
	// footprint volume, the plan read from it (or why it could not be).
	Arrays []ArrayPlan `json:"arrays"`
	// Gaps lists every footprint volume (or the whole node) fenced could
	// not cut.
	Gaps []VolumeGap `json:"gaps,omitempty"`
	// Drift lists the cluster's PersistentVolumes, attached to this node or
	// not, whose handle names an array, access zone or metro partner no
	// configured array holds (configuration drift). A drifted volume makes
	// this node unprotected only when it is in its footprint (Gaps).
	Drift []arrayclients.Drift `json:"drift,omitempty"`
	// OpenFence is the open fence record of the node, if any: its footprint
	// and plans are then the record's, not this reading.
	OpenFence string    `json:"openFence,omitempty"`
	ReadAt    time.Time `json:"readAt"`
}

// ArrayPlan is one array's part of a NodePlan.
type ArrayPlan struct {
	Array    string `json:"array"`
	Identity string `json:"identity,omitempty"`
	// Summary is what a fence would remove there, as the plan says.
	Summary string `json:"summary,omitempty"`
	// Volumes is the cut (or gap) of each footprint volume on the array.
	Volumes []arrayclients.VolumeCut `json:"volumes,omitempty"`
	// Error says why the plan could not be read.
	Error string `json:"error,omitempty"`
}

// PlanNode reads what a fence of the node would cut now (PRODUCT.md
// invariant 7, for operators during rollout). It never writes: the arrays
// are only read (Adapter.Plan), and any replica answers from its own
// informers and ledger. On the leader, the gaps the plans found become the
// node's protection at once (/status, the metric, the Event), as a gap
// scan's would (scanGaps).
func (c *Controller) PlanNode(ctx context.Context, req PlanRequest) (NodePlan, error) {
	if req.Cluster == "" || req.Node == "" {
		return NodePlan{}, fmt.Errorf("%w: cluster and node are required", ErrBadRequest)
	}
	cl, err := c.cluster(req.Cluster)
	if err != nil {
		return NodePlan{}, err
	}
	out := NodePlan{Cluster: cl.Name, Node: req.Node, ReadAt: c.clk.Now().UTC()}
	kvols, err := cl.Footprints.Volumes(req.Node)
	if err != nil {
		return NodePlan{}, fmt.Errorf("plan fence of %s/%s: %w", cl.Name, req.Node, err)
	}
	v := c.readNode(cl.Name, req.Node)
	if v.Fence != nil {
		out.OpenFence = v.Fence.ID
	}
	cv := cover(kvols, cl.Drivers, cl.arrays, v.identities())
	out.Footprint, out.Gaps = cv.Footprint, cv.Gaps
	names := slices.Collect(maps.Keys(v.Identities))
	for a := range cv.Vols {
		names = append(names, a)
	}
	slices.Sort(names)
	names = slices.Compact(names)
	c.withUnattached(cl, req.Node, cv.Vols)
	plans := make(map[string]ArrayPlan, len(names))
	unread := false
	var (
		mu      sync.Mutex
		planned []arrayclients.Plan
	)
	errs := c.forEachArray(ctx, names, func(ctx context.Context, array string) error {
		id, ok := v.Identities[array]
		if !ok {
			return errNoIdentity
		}
		p, err := c.planArray(ctx, req.Cluster, c.clk.Now(), id, cv.Vols[array])
		if err != nil {
			return err
		}
		mu.Lock()
		planned = append(planned, p)
		mu.Unlock()
		return nil
	})
	if v.Fence == nil {
		// On the leader, what this reading found is the node's protection
		// now: /status and the metric follow it at once.
		c.recordReads(cl.Name, req.Node, planned, false)
		c.evaluateProtection(ctx, cl, req.Node)
	}
	for _, p := range planned {
		plans[p.Array] = ArrayPlan{Array: p.Array, Identity: identityText(p.Identity),
			Summary: p.Summary, Volumes: p.Volumes}
		out.Gaps = append(out.Gaps, planGaps(p)...)
	}
	// Volumes whose access kept coming back after fences (reported; the
	// node is still fenced).
	out.Gaps = append(out.Gaps, c.regressionGaps(cl.Name, req.Node)...)
	for a, err := range errs {
		ap := ArrayPlan{Array: a}
		if !errors.Is(err, errNoIdentity) {
			// Unread, the cuts there are not known: a fence would wait for
			// the array rather than go ahead.
			ap.Error = err.Error()
			unread = true
		}
		plans[a] = ap
	}
	for _, a := range names {
		out.Arrays = append(out.Arrays, plans[a])
	}
	out.Protected = len(out.Gaps) == 0 && !unread
	out.Drift = c.clusterDrift(cl)
	return out, nil
}

// errNoIdentity marks an array with footprint volumes but no identity of
// the node: the coverage gap already says so.
var errNoIdentity = errors.New("no identity of the node on the array")

// identityText names an identity for people: its kind, object name and
// ID, or its keys (PowerScale has no host object).
func identityText(id arrayclients.Identity) string {
	var parts []string
	if id.Kind != "" {
		parts = append(parts, id.Kind)
	}
	switch {
	case id.ObjectName != "" && id.ObjectID != "" && id.ObjectName != id.ObjectID:
		parts = append(parts, fmt.Sprintf("%s (%s)", id.ObjectName, id.ObjectID))
	case id.ObjectName != "":
		parts = append(parts, id.ObjectName)
	case id.ObjectID != "":
		parts = append(parts, id.ObjectID)
	default:
		parts = append(parts, strings.Join(id.Keys, ","))
	}
	return strings.Join(parts, " ")
}
