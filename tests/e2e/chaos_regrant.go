package e2e

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fenced-project/fenced/cluster/ledger"
	"github.com/fenced-project/fenced/stonith"
	"github.com/fenced-project/fenced/tests/csidriver"
	"github.com/fenced-project/fenced/tests/invariants"
)

// DriverRegrant is the timeline kind of the transient profile's re-grant
// fault: "cluster/node pv".
const DriverRegrant = "driver-regrant"

// transientHeldPeriod is clusters[].heldPeriod in the transient profile:
// short against the time a fenced node stays evicted there (it stays dead
// at least deadAtLeast), so that a fence sees several re-grants, each
// judged by the checker's held rule against this period.
const transientHeldPeriod = 5 * time.Second

// chaosVolume is a volume a node held when it died, as its
// VolumeAttachment and PersistentVolume named it.
type chaosVolume struct {
	PV, Driver, Handle string
	// MultiNode is a ReadWriteMany or ReadOnlyMany volume: the access
	// mode the attacher publishes it with.
	MultiNode bool
}

// chaosFootprint is what a node held when it died: its attached volumes
// and its CSI node ID for each driver (from its CSINode).
type chaosFootprint struct {
	volumes []chaosVolume
	nodeIDs map[string]string
}

// RegrantFault is one re-grant the transient profile injected: the
// emulated driver's publish of a volume the fenced node held to that
// node, between From and To.
type RegrantFault struct {
	Node, PV, Array string
	From, To        time.Time
	// Err is the driver's refusal or failure (the volume is given to
	// another node and is single-node, the array's API is down), or nil.
	Err error
}

// recordFootprint notes the volumes attached to a node and its CSI node
// IDs, just before it dies: what the re-grant fault publishes to it
// again once it is fenced. A failure to read them leaves the node
// without one (the fault then passes it by).
func (c *chaos) recordFootprint(node string) {
	ctx, cancel := context.WithTimeout(c.h.ctx, 10*time.Second)
	defer cancel()
	delete(c.footprints, node)
	delete(c.heldSince, node)
	cl := c.h.CP.Client
	vas, err := cl.StorageV1().VolumeAttachments().List(ctx, metav1.ListOptions{})
	if err != nil {
		c.logf("  (volumes of %s not read: %v)", node, err)
		return
	}
	cn, err := cl.StorageV1().CSINodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		c.logf("  (CSINode of %s not read: %v)", node, err)
		return
	}
	fp := &chaosFootprint{nodeIDs: map[string]string{}}
	for _, d := range cn.Spec.Drivers {
		fp.nodeIDs[d.Name] = d.NodeID
	}
	for _, va := range vas.Items {
		if va.Spec.NodeName != node || !va.Status.Attached || va.Spec.Source.PersistentVolumeName == nil {
			continue
		}
		pv, err := cl.CoreV1().PersistentVolumes().Get(ctx, *va.Spec.Source.PersistentVolumeName, metav1.GetOptions{})
		if err != nil || pv.Spec.CSI == nil {
			continue
		}
		multi := slices.ContainsFunc(pv.Spec.AccessModes, func(m corev1.PersistentVolumeAccessMode) bool {
			return m == corev1.ReadWriteMany || m == corev1.ReadOnlyMany
		})
		fp.volumes = append(fp.volumes, chaosVolume{PV: pv.Name, Driver: pv.Spec.CSI.Driver,
			Handle: pv.Spec.CSI.VolumeHandle, MultiNode: multi})
	}
	sort.Slice(fp.volumes, func(i, j int) bool { return fp.volumes[i].PV < fp.volumes[j].PV })
	c.footprints[node] = fp
}

// regrantTargets lists the dead nodes with a recorded footprint whose
// fence the leader shows evicted: held, so that the checker's held rule
// judges what the fault gives them. It notes when each was first seen
// held (heldSince).
func (c *chaos) regrantTargets(down []string) []string {
	var candidates []string
	for _, n := range down {
		if fp := c.footprints[n]; fp != nil && len(fp.volumes) > 0 {
			candidates = append(candidates, n)
		}
	}
	if len(candidates) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(c.h.ctx, 3*time.Second)
	defer cancel()
	fences, err := c.h.Fences(ctx)
	if err != nil {
		return nil
	}
	var out []string
	for _, f := range fences {
		if f.Cluster == ClusterName && f.Phase == string(ledger.StateEvicted) && slices.Contains(candidates, f.Node) &&
			!slices.Contains(out, f.Node) {
			out = append(out, f.Node)
			if _, ok := c.heldSince[f.Node]; !ok {
				c.heldSince[f.Node] = time.Now()
			}
		}
	}
	sort.Strings(out)
	return out
}

// controllerOf returns the emulated driver controller that serves a
// volume, and its array.
func (c *chaos) controllerOf(v chaosVolume) (csidriver.Controller, string) {
	for _, a := range sortedArrays(c.h.Arrays) {
		if a.Driver != nil && a.Driver.Driver() == v.Driver && a.Driver.ArrayID != "" && strings.Contains(v.Handle, a.Driver.ArrayID) {
			return a.Driver, a.Name
		}
	}
	return nil, ""
}

// regrant publishes one of the volumes a fenced node held to it again,
// through the emulated driver's own ControllerPublish, as the drivers and
// their sidecars do after a fence:
//   - the external-attacher's VolumeAttachment reconciler
//     (kubernetes-csi/external-attacher pkg/controller/csi_handler.go,
//     ReconcileVA), every --reconcile-sync, calls ControllerPublishVolume
//     again for every attached VolumeAttachment the driver's ListVolumes
//     does not show on its node; csi-powerstore with the health monitor on
//     lists NFS volumes with no published node (pkg/controller/controller.go
//     ListVolumes), so the node's VolumeAttachment, still attached until
//     the attach-detach controller detaches it, is published again:
//     csi-powerstore pkg/controller/publisher.go NfsPublisher.Publish adds
//     the node's IP to the export's read_write_root_hosts;
//   - the same call for a block volume maps it to the node again
//     (csi-vxflexos service/publisher.go, csi-powerstore SCSIPublisher)
//     unless a single-node volume is given to another node already, which
//     the driver refuses; csi-isilon's ControllerPublishVolume adds the
//     node to the export's clients under the same rule.
//
// The request reaches the simulator through the emulated driver's own
// tagged listener, so the audit names it "csi/...", not fenced.
func (c *chaos) regrant(node string) {
	fp := c.footprints[node]
	v := fp.volumes[c.rng.IntN(len(fp.volumes))]
	ctrl, array := c.controllerOf(v)
	nodeID := fp.nodeIDs[v.Driver]
	if ctrl == nil || nodeID == "" {
		c.logf("node %s: driver re-grant of %s skipped: no emulated controller or node ID for %s", node, v.PV, v.Driver)
		return
	}
	c.h.Timeline.Record(DriverRegrant, ClusterName+"/"+node+" "+v.PV)
	ctx, cancel := context.WithTimeout(c.h.ctx, 30*time.Second)
	defer cancel()
	r := RegrantFault{Node: node, PV: v.PV, Array: array, From: time.Now()}
	r.Err = ctrl.ControllerPublish(ctx, v.Handle, nodeID, v.MultiNode)
	r.To = time.Now()
	c.regrants = append(c.regrants, r)
	if r.Err != nil {
		c.logf("node %s (fenced): the driver publishes %s to it again on %s: refused or failed: %v", node, v.PV, array, r.Err)
		return
	}
	c.logf("node %s (fenced): the driver publishes %s to it again on %s", node, v.PV, array)
}

// HeldFigures are what a transient run's re-grant faults did, as the
// checker's held rule saw it.
type HeldFigures struct {
	// Period is the held period the rule judged against.
	Period time.Duration
	// Injected counts the re-grant faults; Refused those the driver
	// refused or that failed (nothing written).
	Injected, Refused int
	// Granted counts the faults whose publish gave the node access again
	// while its fence was held (a granting write in the array's audit
	// within the fault, by the emulated driver); the accesses were cut
	// by fenced (CutByFenced), by the driver's own unpublish of the node
	// (CutByDriver), or never (NotCut).
	Granted, CutByFenced, CutByDriver, NotCut int
	// MaxCut and MedianCut are the longest and median time from such a
	// grant to its cut.
	MaxCut, MedianCut time.Duration
	// Regressions counts the fences' steps back to fencing on a held
	// read-back (the ledger's regression notes), for any cause.
	Regressions int
}

// heldFigures matches the injected faults with the accesses the checker
// found regained while held.
func heldFigures(faults []RegrantFault, held []invariants.HeldAccess, fences []*ledger.Fence, period time.Duration) HeldFigures {
	fig := HeldFigures{Period: period, Injected: len(faults)}
	var cuts []time.Duration
	for _, r := range faults {
		if r.Err != nil {
			fig.Refused++
			continue
		}
		for _, a := range held {
			if a.Array != r.Array || !csidriver.IsDriverRequest(a.GrantBy) || a.GrantAt.Before(r.From) || a.GrantAt.After(r.To) ||
				!strings.HasSuffix(a.Subject, "/"+r.Node) {
				continue
			}
			fig.Granted++
			switch d, ok := a.Cut(); {
			case !ok:
				fig.NotCut++
			case csidriver.IsDriverRequest(a.CutBy):
				fig.CutByDriver++
				cuts = append(cuts, d)
			default:
				fig.CutByFenced++
				cuts = append(cuts, d)
			}
			break // one publish, one grant counted
		}
	}
	if len(cuts) > 0 {
		slices.Sort(cuts)
		fig.MaxCut, fig.MedianCut = cuts[len(cuts)-1], cuts[len(cuts)/2]
	}
	for _, f := range fences {
		for _, s := range f.Steps {
			if s.To == ledger.StateFencing && strings.HasPrefix(s.Note, stonith.RegressionNote) {
				fig.Regressions++
			}
		}
	}
	return fig
}

// String is the summary line of the figures.
func (f HeldFigures) String() string {
	return fmt.Sprintf("driver re-grants of fenced nodes: %d injected, %d refused or failed, %d gave access while held: "+
		"%d cut by fenced, %d by the driver's unpublish, %d never cut; grant to cut max %s, median %s (held period %s); "+
		"%d held regressions in the ledger",
		f.Injected, f.Refused, f.Granted, f.CutByFenced, f.CutByDriver, f.NotCut,
		f.MaxCut.Round(time.Millisecond), f.MedianCut.Round(time.Millisecond), f.Period, f.Regressions)
}
