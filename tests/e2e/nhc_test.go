package e2e

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/fenced-project/fenced/tests/invariants"
	"github.com/fenced-project/fenced/tests/testbed"
)

// nhcTiming is fastTiming with fenced as a NodeHealthCheck remediator and
// its own verdict late (a 90 s grace, no early verdict), so that the fence
// comes from NodeHealthCheck's CR: the test bed's node controller marks a
// dead node's Ready condition Unknown after 8 s.
func nhcTiming() ClusterTiming {
	timing := fastTiming()
	timing.HeartbeatGrace = 90 * time.Second
	timing.EarlyVerdict = EarlyOff
	timing.NodeHealthCheck = true
	return timing
}

func startNHC(t *testing.T) *Harness {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end: starts a control plane, the NodeHealthCheck operator and three fenced processes")
	}
	return Start(t, Options{Timing: nhcTiming(), NodeLeaseDurationSeconds: 4,
		ControllerManagerArgs: []string{"--node-monitor-grace-period=8s"}})
}

// TestNodeHealthCheckRemediation runs the real NodeHealthCheck operator
// with fenced's template: a worker powers off; NHC creates fenced's
// FencedRemediation; fenced fences the node on every array, reads each
// back, force-deletes its StatefulSet pod and sets Succeeded=True with
// StorageFenced=True carrying the read-back; the pod runs elsewhere; the
// node reboots; NHC deletes the CR after its healthyDelay, and only then
// does fenced unfence the node, removing its finalizer once the fence is
// closed.
func TestNodeHealthCheckRemediation(t *testing.T) {
	h := startNHC(t)
	h.WaitLeader(waitLeader)
	dyn, err := h.StartNHC()
	require.NoError(t, err)
	require.NoError(t, h.CreateNHC(dyn, NodeHealthCheck("workers", 2*time.Second, 10*time.Second, 10*time.Minute,
		[3]string{"fenced.io/v1alpha1", "FencedRemediationTemplate", NHCTemplate})))
	pods := deployStatefulSet(t, h, "web", 1)
	victim := withPods(pods, 1)[0]
	h.KillNode(victim)

	rems := dyn.Resource(RemediationResource).Namespace(testbed.NHCNamespace)
	var cr *unstructured.Unstructured
	h.wait(2*time.Minute, "NodeHealthCheck's FencedRemediation of "+victim, func() (bool, string) {
		cr, err = rems.Get(h.ctx, victim, metav1.GetOptions{})
		return err == nil, fmt.Sprint(err)
	})
	assert.Equal(t, victim, cr.GetAnnotations()["remediation.medik8s.io/node-name"])

	f := h.WaitFence(victim, waitFence, phasesEvicted...)
	requireVerified(t, h, f)
	assert.Contains(t, f.Reason, "NodeHealthCheck remediation: FencedRemediation "+testbed.NHCNamespace+"/"+victim,
		"the ledger records the verdict's origin")
	h.wait(time.Minute, "Succeeded=True on the FencedRemediation", func() (bool, string) {
		cr, err = rems.Get(h.ctx, victim, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		st, reason, msg := Condition(cr, "Succeeded")
		return st == "True", st + " " + reason + ": " + msg
	})
	st, _, evidence := Condition(cr, "StorageFenced")
	assert.Equal(t, "True", st)
	for name := range h.Arrays {
		assert.Contains(t, evidence, name+": ", "the domain condition names every array")
	}
	assert.Contains(t, evidence, "read back at")
	fenceID, _, _ := unstructured.NestedString(cr.Object, "status", "fenceID")
	assert.Equal(t, f.ID, fenceID)
	assert.Contains(t, cr.GetFinalizers(), "fenced.io/unfence")
	waitReplaced(t, h, pods[victim])

	h.RebootNode(victim)
	// NHC deletes the CR after its healthyDelay; until then the fence
	// stays evicted (the unfence waits for the deletion), and the CR
	// stays (Terminating) until the fence is closed.
	var deletedAt time.Time
	var phases []string
	h.wait(waitRecovery+time.Minute, "the FencedRemediation deleted and released", func() (bool, string) {
		cr, err := rems.Get(h.ctx, victim, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, ""
		}
		if err != nil {
			return false, err.Error()
		}
		fences, ferr := h.Fences(h.ctx)
		phase := "?"
		if ferr == nil {
			for _, fe := range fences {
				if fe.ID == f.ID {
					phase = fe.Phase
				}
			}
		}
		deleting := cr.GetDeletionTimestamp() != nil
		if deleting && deletedAt.IsZero() {
			deletedAt = time.Now()
		}
		if !deleting && phase != "?" && phase != "evicted" {
			phases = append(phases, phase)
		}
		return false, fmt.Sprintf("deleting %v, fence %s %s, finalizers %v", deleting, f.ID, phase, cr.GetFinalizers())
	})
	assert.Empty(t, phases, "the fence went on to unfence while NodeHealthCheck's CR still asked for it")
	assert.False(t, deletedAt.IsZero(), "the CR was never seen Terminating: fenced's finalizer did not hold it")
	h.WaitFence(victim, waitRecovery, phasesClosed...)
	assert.False(t, hasTaint(t, h, victim, outOfService), "out-of-service taint left after the unfence")
	rep := h.Check()
	require.Positive(t, rep.Checked[invariants.RuleFenceBeforeDelete])
	require.Positive(t, rep.Checked[invariants.RuleArrayRestored])
}

// TestNodeHealthCheckEscalation runs the real NodeHealthCheck operator
// with two steps, fenced's template then a stand-in power-fencing
// remediator: a worker fenced reports unprotected (a volume on an array no
// configuration names) dies; fenced fences nothing, sets Succeeded=False
// with reason NodeUnprotected on NHC's FencedRemediation, and NHC goes on
// at once (long before the step's 10-minute timeout) to create the
// stand-in's CR. The node's pod is never deleted.
func TestNodeHealthCheckEscalation(t *testing.T) {
	h := startNHC(t)
	h.WaitLeader(waitLeader)
	dyn, err := h.StartNHC()
	require.NoError(t, err)
	require.NoError(t, h.CP.ApplyManifests(h.ctx, filepath.Join("testdata", "standin-remediator.yaml")))
	require.NoError(t, h.CP.WaitCRDs(h.ctx, "standinremediationtemplates.standin.fenced.test", "standinremediations.standin.fenced.test"))
	require.NoError(t, h.CP.ApplyManifests(h.ctx, filepath.Join("testdata", "standin-template.yaml")))

	victim := h.NodesOf(ClusterName)[0]
	// As in TestUncoveredVolumeBlocksEviction: a PowerMax volume on an
	// array fenced is not configured for.
	h.CP.CSIControllers().Unregister(testbed.DriverPowerMax)
	h.CP.AttachWithoutController(true)
	handle, err := testbed.VolumeHandle(testbed.DriverPowerMax, 0)
	require.NoError(t, err)
	pods := deployWith(t, h, testbed.StatefulSetSpec{Namespace: "db", Name: "far", Driver: testbed.DriverPowerMax,
		Replicas: 1, VolumeHandles: []string{handle}, NodeSelector: map[string]string{corev1.LabelHostname: victim}})
	h.wait(waitFence, "node "+victim+" reported unprotected", func() (bool, string) {
		st, err := leaderStatus(h)
		if err != nil {
			return false, err.Error()
		}
		if c := clusterStatus(st); c != nil {
			for _, u := range c.Unprotected {
				if u.Name == victim {
					return true, ""
				}
			}
		}
		return false, "not listed"
	})
	require.NoError(t, h.CreateNHC(dyn, NodeHealthCheck("workers", 2*time.Second, 5*time.Second, 10*time.Minute,
		[3]string{"fenced.io/v1alpha1", "FencedRemediationTemplate", NHCTemplate},
		[3]string{"standin.fenced.test/v1alpha1", "StandInRemediationTemplate", "power-off"})))
	killed := time.Now()
	h.KillNode(victim)

	rems := dyn.Resource(RemediationResource).Namespace(testbed.NHCNamespace)
	var cr *unstructured.Unstructured
	h.wait(2*time.Minute, "Succeeded=False on NodeHealthCheck's FencedRemediation of "+victim, func() (bool, string) {
		cr, err = rems.Get(h.ctx, victim, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		st, reason, msg := Condition(cr, "Succeeded")
		return st == "False", st + " " + reason + ": " + msg
	})
	_, reason, msg := Condition(cr, "Succeeded")
	assert.Equal(t, "NodeUnprotected", reason)
	assert.Contains(t, msg, "000197900123", "the reason names the volume's array")

	standIn := dyn.Resource(schema.GroupVersionResource{Group: "standin.fenced.test", Version: "v1alpha1", Resource: "standinremediations"}).
		Namespace(testbed.NHCNamespace)
	h.wait(2*time.Minute, "NodeHealthCheck's next remediator's CR for "+victim, func() (bool, string) {
		_, err := standIn.Get(h.ctx, victim, metav1.GetOptions{})
		return err == nil, fmt.Sprint(err)
	})
	assert.Less(t, time.Since(killed), 5*time.Minute, "NHC escalated on its timeout, not on Succeeded=False")
	cr, err = rems.Get(h.ctx, victim, metav1.GetOptions{})
	require.NoError(t, err)
	assert.NotEmpty(t, cr.GetAnnotations()["remediation.medik8s.io/nhc-timed-out"], "NHC marks the failed step")

	fences, err := h.Fences(h.ctx)
	require.NoError(t, err)
	for _, f := range fences {
		assert.NotEqual(t, victim, f.Node, "an unprotected node was fenced: %+v", f)
	}
	assert.False(t, hasTaint(t, h, victim, outOfService), "an unprotected node was tainted")
	p, err := h.CP.Client.CoreV1().Pods("db").Get(h.ctx, pods[victim].Name, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, pods[victim].UID, p.UID, "the pod of an unprotected node was deleted")
}

// TestNodeHealthCheckLeaseCoordination runs fenced with
// nodeHealthCheck.leases and the real NodeHealthCheck operator with a
// stand-in remediator, fenced's own verdict coming after NHC's (a 30 s
// grace against NHC's 10 s):
//   - fenced holding a node's Lease: fenced fences node A on its own
//     verdict, holding medik8s-leases/node-A as "fenced"; an NHC created
//     then finds A unhealthy, fails to take the Lease and skips it (no CR);
//   - NHC holding a node's Lease: node B dies, NHC takes its Lease and
//     creates the stand-in's CR; fenced's verdict on B waits and says so.
//
// When A's fence is closed after its reboot, fenced gives its Lease back.
func TestNodeHealthCheckLeaseCoordination(t *testing.T) {
	full(t) // the full suite: the default run keeps the remediation and escalation scenarios
	if testing.Short() {
		t.Skip("end-to-end: starts a control plane, the NodeHealthCheck operator and three fenced processes")
	}
	timing := fastTiming()
	timing.HeartbeatGrace = 30 * time.Second
	timing.EarlyVerdict = EarlyOff
	timing.NodeLeases = true
	timing.StormLimit = "2" // A stays fenced while B dies
	h := Start(t, Options{Timing: timing, NodeLeaseDurationSeconds: 4,
		ControllerManagerArgs: []string{"--node-monitor-grace-period=8s"}})
	h.WaitLeader(waitLeader)
	dyn, err := h.StartNHC()
	require.NoError(t, err)
	require.NoError(t, h.CP.ApplyManifests(h.ctx, filepath.Join("testdata", "standin-remediator.yaml")))
	require.NoError(t, h.CP.WaitCRDs(h.ctx, "standinremediationtemplates.standin.fenced.test", "standinremediations.standin.fenced.test"))
	require.NoError(t, h.CP.ApplyManifests(h.ctx, filepath.Join("testdata", "standin-template.yaml")))
	standIn := dyn.Resource(schema.GroupVersionResource{Group: "standin.fenced.test", Version: "v1alpha1", Resource: "standinremediations"}).
		Namespace(testbed.NHCNamespace)
	leases := h.CP.Client.CoordinationV1().Leases("medik8s-leases")
	pods := deployStatefulSet(t, h, "web", 1)
	nodes := withPods(pods, 2)
	a, b := nodes[0], nodes[1]

	// fenced holds A's Lease: NHC skips A.
	h.KillNode(a)
	h.WaitFence(a, waitFence+30*time.Second, phasesEvicted...)
	lease, err := leases.Get(h.ctx, "node-"+a, metav1.GetOptions{})
	require.NoError(t, err, "fenced took no Lease for its fence of %s", a)
	require.NotNil(t, lease.Spec.HolderIdentity)
	assert.Equal(t, "fenced", *lease.Spec.HolderIdentity)
	require.NoError(t, h.CreateNHC(dyn, NodeHealthCheck("workers", 2*time.Second, 5*time.Second, 10*time.Minute,
		[3]string{"standin.fenced.test/v1alpha1", "StandInRemediationTemplate", "power-off"})))
	h.wait(2*time.Minute, "NodeHealthCheck refused "+a+"'s Lease held by fenced", func() (bool, string) {
		log := testbed.LogTail(h.CP.NHC.LogPath, 1<<20)
		return strings.Contains(log, "held by different owner: fenced"), "not in NHC's log yet"
	})
	_, err = standIn.Get(h.ctx, a, metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "NHC remediated %s while fenced held its Lease (%v)", a, err)

	// NHC holds B's Lease: fenced's verdict on B waits.
	h.KillNode(b)
	h.wait(2*time.Minute, "NHC's stand-in CR for "+b, func() (bool, string) {
		_, err := standIn.Get(h.ctx, b, metav1.GetOptions{})
		return err == nil, fmt.Sprint(err)
	})
	lease, err = leases.Get(h.ctx, "node-"+b, metav1.GetOptions{})
	require.NoError(t, err)
	require.NotNil(t, lease.Spec.HolderIdentity)
	assert.Equal(t, "NodeHealthCheck-workers", *lease.Spec.HolderIdentity)
	h.wait(time.Minute+timing.HeartbeatGrace, "fenced's verdict on "+b+" waiting for the Lease", func() (bool, string) {
		st, err := leaderStatus(h)
		if err != nil {
			return false, err.Error()
		}
		if c := clusterStatus(st); c != nil {
			for _, u := range c.Unhealthy {
				if u.Name == b {
					return u.Verdict == "failed" && strings.Contains(u.Reason, "NodeHealthCheck-workers holds the node's Lease medik8s-leases/node-"+b),
						u.Verdict + ": " + u.Reason
				}
			}
		}
		return false, "not listed"
	})
	fences, err := h.Fences(h.ctx)
	require.NoError(t, err)
	for _, f := range fences {
		assert.NotEqual(t, b, f.Node, "fenced fenced %s while NHC held its Lease: %+v", b, f)
	}

	// A's fence closes after its reboot and fenced gives its Lease back.
	waitReplaced(t, h, pods[a])
	h.RebootNode(a)
	h.WaitFence(a, waitRecovery, phasesClosed...)
	h.wait(time.Minute, "fenced's Lease of "+a+" given back", func() (bool, string) {
		l, err := leases.Get(h.ctx, "node-"+a, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, ""
		}
		if err != nil {
			return false, err.Error()
		}
		return l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != "fenced", "still held by fenced"
	})
}
