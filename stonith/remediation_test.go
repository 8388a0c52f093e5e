package stonith

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fenced-project/fenced/arrayclients"
	"github.com/fenced-project/fenced/cluster/ledger"
	"github.com/fenced-project/fenced/kube"
)

// TestRemediationStatus checks the conditions NodeHealthCheck reads from a
// FencedRemediation for each state of the request and its fence: Succeeded
// is True only once every array's cut was read back and the pods were
// deleted, False whenever fenced cannot fence (so NHC escalates at once),
// and Unknown while fenced works or waits.
func TestRemediationStatus(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC))
	checked := now.Add(-time.Second)
	rem := kube.Remediation{Namespace: "medik8s", Name: "w-1", Node: "w-1"}
	fence := func(state ledger.FenceState, verified bool) *ledger.Fence {
		return &ledger.Fence{ID: "fence-9", Node: "w-1", Kind: ledger.KindFence, Origin: ledger.OriginVerdict,
			Reason: remediationReason(rem), State: state,
			Plans: []arrayclients.Plan{{Array: "pstore-1", Volumes: []arrayclients.VolumeCut{{}, {}}}},
			Results: map[string]*ledger.ArrayResult{"pstore-1": {Array: "pstore-1", Verified: verified,
				Verification: &arrayclients.Verification{Fenced: verified, CheckedAt: checked}}}}
	}
	tcs := []struct {
		name                          string
		in                            remediationInput
		processing, domain, succeeded metav1.ConditionStatus
		reason                        string
		fenceID                       string
		wantEvidence                  bool
	}{
		{name: "taken", in: remediationInput{Remediation: rem, IdentitiesKnown: true},
			processing: metav1.ConditionTrue, domain: metav1.ConditionUnknown, succeeded: metav1.ConditionUnknown, reason: ReasonStarted},
		{name: "unprotected", in: remediationInput{Remediation: rem, IdentitiesKnown: true,
			Gaps: []VolumeGap{{Volume: "pv-1", Reason: arrayclients.GapReason("unknown-driver"), Detail: "driver x"}}},
			processing: metav1.ConditionFalse, domain: metav1.ConditionFalse, succeeded: metav1.ConditionFalse, reason: ReasonNodeUnprotected},
		{name: "dry-run", in: remediationInput{Remediation: rem, IdentitiesKnown: true, DryRun: true},
			processing: metav1.ConditionFalse, domain: metav1.ConditionFalse, succeeded: metav1.ConditionFalse, reason: ReasonDryRun},
		{name: "identities never learned", in: remediationInput{Remediation: rem},
			processing: metav1.ConditionFalse, domain: metav1.ConditionFalse, succeeded: metav1.ConditionFalse, reason: ReasonNotFenceable},
		{name: "paused", in: remediationInput{Remediation: rem, IdentitiesKnown: true,
			Report: nodeReport{Blocked: "not fencing: fencing is paused"}},
			processing: metav1.ConditionTrue, domain: metav1.ConditionUnknown, succeeded: metav1.ConditionUnknown, reason: ReasonWaiting},
		{name: "fencing", in: remediationInput{Remediation: rem, IdentitiesKnown: true, Open: fence(ledger.StateFencing, false)},
			processing: metav1.ConditionTrue, domain: metav1.ConditionUnknown, succeeded: metav1.ConditionUnknown, reason: ReasonFencing, fenceID: "fence-9"},
		{name: "array blocked", in: remediationInput{Remediation: rem, IdentitiesKnown: true, Open: fence(ledger.StateFencing, false),
			Report: nodeReport{FenceID: "fence-9", Blocked: "fence fence-9 of node w-1 is blocked: cannot fence on pstore-1", BlockedArrays: []string{"pstore-1"}}},
			processing: metav1.ConditionTrue, domain: metav1.ConditionFalse, succeeded: metav1.ConditionFalse, reason: ReasonArrayNotFenced, fenceID: "fence-9"},
		{name: "read back, evicting", in: remediationInput{Remediation: rem, IdentitiesKnown: true, Open: fence(ledger.StateTainted, true)},
			processing: metav1.ConditionTrue, domain: metav1.ConditionTrue, succeeded: metav1.ConditionUnknown, reason: ReasonEvicting, fenceID: "fence-9", wantEvidence: true},
		{name: "evicted", in: remediationInput{Remediation: rem, IdentitiesKnown: true, Open: fence(ledger.StateEvicted, true)},
			processing: metav1.ConditionFalse, domain: metav1.ConditionTrue, succeeded: metav1.ConditionTrue, reason: ReasonFenced, fenceID: "fence-9", wantEvidence: true},
		{name: "closed after the reboot", in: remediationInput{Remediation: kube.Remediation{Namespace: "medik8s", Name: "w-1", Node: "w-1",
			Status: kube.RemediationStatus{FenceID: "fence-9"}}, IdentitiesKnown: true, Bound: fence(ledger.StateClosed, true)},
			processing: metav1.ConditionFalse, domain: metav1.ConditionFalse, succeeded: metav1.ConditionTrue, reason: ReasonUnfenced, fenceID: "fence-9"},
		{name: "aborted", in: remediationInput{Remediation: kube.Remediation{Namespace: "medik8s", Name: "w-1", Node: "w-1",
			Status: kube.RemediationStatus{FenceID: "fence-9"}}, IdentitiesKnown: true, Bound: fence(ledger.StateAborted, false)},
			processing: metav1.ConditionFalse, domain: metav1.ConditionFalse, succeeded: metav1.ConditionFalse, reason: ReasonAborted, fenceID: "fence-9"},
	}
	for _, tc := range tcs {
		t.Run(tc.name, func(t *testing.T) {
			st := remediationStatus(tc.in, now)
			p := meta.FindStatusCondition(st.Conditions, CondProcessing)
			d := meta.FindStatusCondition(st.Conditions, CondStorageFenced)
			s := meta.FindStatusCondition(st.Conditions, CondSucceeded)
			require.NotNil(t, p)
			require.NotNil(t, d)
			require.NotNil(t, s)
			assert.Equal(t, tc.processing, p.Status, "Processing")
			assert.Equal(t, tc.domain, d.Status, "StorageFenced")
			assert.Equal(t, tc.succeeded, s.Status, "Succeeded")
			assert.Equal(t, tc.reason, p.Reason)
			assert.Equal(t, tc.fenceID, st.FenceID)
			if tc.wantEvidence {
				require.Len(t, st.Arrays, 1)
				assert.True(t, st.Arrays[0].Verified)
				assert.Equal(t, 2, st.Arrays[0].Cuts)
				assert.Contains(t, d.Message, "pstore-1: 2 volume cut(s), read back at")
			}
		})
	}
}

// TestRemediationStatusKeepsTransitionTimes checks a condition keeps its
// transition time while its status stays, so a repeated sync writes
// nothing.
func TestRemediationStatusKeepsTransitionTimes(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC))
	in := remediationInput{Remediation: kube.Remediation{Namespace: "medik8s", Name: "w-1", Node: "w-1"}, IdentitiesKnown: true}
	first := remediationStatus(in, t0)
	in.Remediation.Status = first
	again := remediationStatus(in, metav1.NewTime(t0.Add(time.Minute)))
	assert.True(t, sameStatus(first, again))
}

// TestRemediationReasonNamesTheOrigin checks the ledger's reason of a
// fence opened on a FencedRemediation names it, its template and its
// NodeHealthCheck.
func TestRemediationReasonNamesTheOrigin(t *testing.T) {
	r := kube.Remediation{Namespace: "medik8s", Name: "w-1", Template: "fenced-storage-fence",
		Owners: []string{"NodeHealthCheck/workers"}, Reason: "unhealthy"}
	assert.Equal(t, "NodeHealthCheck remediation: FencedRemediation medik8s/w-1 from template fenced-storage-fence of NodeHealthCheck/workers: unhealthy",
		remediationReason(r))
}
