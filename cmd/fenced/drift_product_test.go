package main

import (
	"fmt"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fenced-project/fenced/arrayclients"
	"github.com/fenced-project/fenced/cmd/fenced/status"
	"github.com/fenced-project/fenced/tests/testbed"
)

// csiPV is a PersistentVolume of a CSI driver, bound to no claim.
func csiPV(name, driver, handle string) *corev1.PersistentVolume {
	return &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PersistentVolumeSpec{
		Capacity:    corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
		AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
			Driver: driver, VolumeHandle: handle, FSType: "ext4"}},
	}}
}

// TestProductConfigurationDriftAtStart runs one replica against the test
// bed's API server with PowerFlex, Unity and PowerMax arrays configured.
// PersistentVolumes attached to no node name an unconfigured PowerFlex
// system and an unconfigured SRDF partner: fenced reports both at start
// (a warning per volume, /status, fenced_volumes_unplaced, fenced status
// and fenced plan), leaves placed and non-Dell volumes out, reports a
// volume created later, and forgets a deleted one.
func TestProductConfigurationDriftAtStart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane, three array simulators and fenced")
	}
	bin := buildFenced(t)
	cp := testbed.Start(t, testbed.Options{
		Tokens: []testbed.Token{{Token: productKubeToken, User: "fenced-drift", UID: "fenced-drift", Groups: []string{"system:masters"}}}})
	ctx := t.Context()
	sims := startProductSims(t, nil)
	pvs := cp.Client.CoreV1().PersistentVolumes()
	for _, pv := range []*corev1.PersistentVolume{
		csiPV("pv-drift-array", arrayclients.DriverPowerFlex, "ffffeeeeddddcccc-0123abcd00000001"),
		csiPV("pv-drift-partner", arrayclients.DriverPowerMax, "csi-"+pmaxPrefix+"-pv2-"+pmaxSymmetrixID+":000197900099-00124:00125"),
		csiPV("pv-placed", arrayclients.DriverPowerFlex, "1a2b3c4d5e6f7a8b-0123abcd00000002"),
		csiPV("pv-other", "ebs.csi.aws.com", "vol-0a1b2c"),
	} {
		_, err := pvs.Create(ctx, pv, metav1.CreateOptions{})
		require.NoError(t, err)
	}

	dir := t.TempDir()
	kc := filepath.Join(dir, "kubeconfig")
	require.NoError(t, cp.WriteKubeconfig(kc, productKubeToken))
	httpAddr := freeAddr(t)
	base := "http://" + httpAddr
	p := start(t, bin, "run", "--config", productConfig(t, dir, httpAddr, kc, sims))
	waitHealthy(t, p, base)

	unplaced := func() map[string]status.UnplacedVolume {
		st, ok := getStatus(t, base)
		if !ok || len(st.Clusters) != 1 {
			return nil
		}
		out := map[string]status.UnplacedVolume{}
		for _, u := range st.Clusters[0].Unplaced {
			out[u.PV] = u
		}
		return out
	}
	require.Eventually(t, func() bool { return len(unplaced()) == 2 }, time.Minute, 200*time.Millisecond,
		"the unplaced volumes never showed in /status: %v; log:\n%s", unplaced(), p.stderr)
	got := unplaced()
	assert.Equal(t, "array", got["pv-drift-array"].Reason)
	assert.Equal(t, "ffffeeeeddddcccc-0123abcd00000001", got["pv-drift-array"].Handle)
	assert.Contains(t, got["pv-drift-array"].Missing, "ffffeeeeddddcccc")
	assert.Equal(t, "metro-partner", got["pv-drift-partner"].Reason)
	assert.Contains(t, got["pv-drift-partner"].Missing, "000197900099")

	// One warning per volume, naming it, its driver, handle and what is missing.
	log := p.stderr.String()
	for _, pv := range []string{"pv-drift-array", "pv-drift-partner"} {
		re := regexp.MustCompile(`level=WARN msg="persistent volume is on no configured array[^\n]* pv=` + pv + ` driver=\S+ handle=\S+ reason=\S+ missing=`)
		assert.Len(t, re.FindAllString(log, -1), 1, "warnings about %s; log:\n%s", pv, log)
	}
	assert.NotContains(t, log, "pv=pv-placed")
	assert.NotContains(t, log, "pv=pv-other")

	_, metrics := httpGet(t, base+"/metrics")
	assert.Contains(t, metrics, fmt.Sprintf(`fenced_volumes_unplaced{cluster=%q,reason="array"} 1`, productCluster))
	assert.Contains(t, metrics, fmt.Sprintf(`fenced_volumes_unplaced{cluster=%q,reason="metro-partner"} 1`, productCluster))
	assert.Contains(t, metrics, fmt.Sprintf(`fenced_volumes_unplaced{cluster=%q,reason="zone"} 0`, productCluster))

	// Reported with or without a leader: the exit status may say "not
	// ready" while the single replica elects itself.
	_, out := cli(t, bin, "status", "--addr", base)
	assert.Regexp(t, `Configuration drift[^\n]*\n\s*CLUSTER\s+VOLUME\s+DRIVER\s+HANDLE\s+MISSING\n`, out)
	assert.Regexp(t, productCluster+`\s+pv-drift-array\s+csi-vxflexos.dellemc.com\s+ffffeeeeddddcccc-0123abcd00000001\s+`, out)

	// fenced plan of a node (any: no node has a volume) lists the cluster's drift.
	tokenFile := filepath.Join(dir, "api-token")
	_, out = cli(t, bin, "plan", "drift-1", "--cluster", productCluster, "--addr", base, "--token-file", tokenFile)
	assert.Contains(t, out, "Configuration drift in cluster "+productCluster, out)
	assert.Regexp(t, `pv-drift-partner\s+csi-powermax.dellemc.com\s+\S+\s+SRDF partner 000197900099`, out)

	// A volume created later is reported; a deleted one is forgotten.
	_, err := pvs.Create(ctx, csiPV("pv-drift-late", arrayclients.DriverUnity, "pv-late-iSCSI-APM00000000009-sv_9"), metav1.CreateOptions{})
	require.NoError(t, err)
	require.NoError(t, pvs.Delete(ctx, "pv-drift-array", metav1.DeleteOptions{}))
	require.Eventually(t, func() bool {
		u := unplaced()
		_, late := u["pv-drift-late"]
		_, deleted := u["pv-drift-array"]
		return late && !deleted && len(u) == 2
	}, time.Minute, 200*time.Millisecond, "late and deleted volumes: %v; log:\n%s", unplaced(), p.stderr)
	assert.Contains(t, p.stderr.String(), "pv=pv-drift-late driver=csi-unity.dellemc.com")
}
