package invariants

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/tests/arraysim/simcore"
)

const (
	nodeIP  = "127.0.10.1/255.255.255.255"
	otherIP = "127.0.10.2/255.255.255.255"
	export  = "/rest/v1/nfs-exports/nx1/modify"
)

// heldRun is good() with the emulated driver's writes on pflex-1 after
// the eviction (6 s) and before the unfence-intent (20 s).
func heldRun(period time.Duration, entries ...simcore.AuditEntry) *run {
	r := good()
	r.opts.DriverRemotes = []string{"csi"}
	r.opts.HeldPeriod = period
	pf := r.in.Arrays[pflex]
	// Keep the audit in sequence order: the extra entries go between the
	// fence's read-back (seq 3, 3 s) and the restore (seq 4, 21 s).
	out := append([]simcore.AuditEntry{}, pf[:3]...)
	for i, e := range entries {
		e.Seq = int64(10 + i)
		out = append(out, e)
	}
	for i, e := range pf[3:] {
		e.Seq = int64(100 + i)
		out = append(out, e)
	}
	r.in.Arrays[pflex] = out
	return r
}

func write(ms int, by, method, path, body, change string) simcore.AuditEntry {
	e := audit(0, ms, by, method, path, change)
	e.Body, e.Changed = body, true
	return e
}

// The driver's publish elsewhere lists the node's IP again (csi-vxflexos
// with interfaceNames); fenced removes it within the held period.
func grantNFS(ms int) simcore.AuditEntry {
	return write(ms, "csi", "PUT", export, `{"add_read_write_root_hosts":["`+nodeIP+`","`+otherIP+`"]}`,
		"+$.nfsExports[nx1].read_write_root_hosts[1]")
}

func cutNFS(ms int) simcore.AuditEntry {
	return write(ms, "a", "PUT", export, `{"remove_read_write_root_hosts":["`+nodeIP+`"]}`,
		"-$.nfsExports[nx1].read_write_root_hosts[1]")
}

func TestHeldRule(t *testing.T) {
	podDelete := func(r *run, ms int) {
		r.in.Placements[cl] = append(r.in.Placements[cl],
			Placement{Time: at(-60000), Resource: "pods", Namespace: "db", Name: "web-9", Node: node})
		r.in.Kube[cl] = append(r.in.Kube[cl], kube(ms, "system:serviceaccount:kube-system:pod-garbage-collector", "delete", "pods", "db", "web-9"))
	}
	cases := []struct {
		name  string
		run   *run
		wants string // "" when the rule holds
	}{
		{"cut within the period", heldRun(3*time.Second, grantNFS(8000), cutNFS(10500)), ""},
		{"cut within the default period", heldRun(0, grantNFS(8000), cutNFS(30000)), ""},
		{"cut too late", heldRun(3*time.Second, grantNFS(8000), cutNFS(12000)), "only 4s later"},
		{"never cut", heldRun(3*time.Second, grantNFS(8000)), "never cut"},
		{"the driver's own unpublish ends the access", heldRun(3*time.Second, grantNFS(8000),
			write(9000, "csi", "PUT", export, `{"remove_read_write_root_hosts":["`+nodeIP+`","`+otherIP+`"]}`, "-$.x")), ""},
		{"a read is no cut", heldRun(3*time.Second, grantNFS(8000),
			audit(0, 9000, "a", "GET", "/rest/v1/nfs-exports/nx1", "")), "never cut"},
		{"the unfence began within the period", heldRun(3*time.Second, grantNFS(18000)), ""},
		{"the evidence ends within the period", func() *run {
			r := heldRun(3*time.Second, grantNFS(8000))
			r.truncateAfter("evicted")
			r.in.Kube[cl] = r.in.Kube[cl][:3]
			r.in.Timeline = r.in.Timeline[:1]
			r.in.Arrays[pflex] = r.in.Arrays[pflex][:4]
			r.in.Arrays[pstor] = r.in.Arrays[pstor][:2]
			return r
		}(), ""},
		{"another node's IP only", heldRun(3*time.Second,
			write(8000, "csi", "PUT", export, `{"add_read_write_root_hosts":["`+otherIP+`"]}`, "+$.nfsExports[nx1].read_write_root_hosts[1]")), ""},
		{"a driver's unpublish is no grant", heldRun(3*time.Second,
			write(8000, "csi", "PUT", export, `{"remove_read_write_root_hosts":["`+nodeIP+`","`+otherIP+`"]}`, "-$.nfsExports[nx1].read_write_root_hosts[0]")), ""},
		{"a block map by the driver, unmapped by fenced", heldRun(3*time.Second,
			write(8000, "csi", "POST", "/api/instances/Volume::v1/action/addMappedSdc", `{"sdcId":"`+sdcID+`"}`, "+$.volumes[v1].mappedSdcInfo["+sdcID+"]"),
			write(9000, "a", "POST", "/api/instances/Volume::v1/action/removeMappedSdc", `{"sdcId":"`+sdcID+`"}`, "-$.volumes[v1].mappedSdcInfo["+sdcID+"]")), ""},
		{"a block map never unmapped", heldRun(3*time.Second,
			write(8000, "csi", "POST", "/api/instances/Volume::v1/action/addMappedSdc", `{"sdcId":"`+sdcID+`"}`, "+$.volumes[v1].mappedSdcInfo["+sdcID+"]")), "never cut"},
		{"a pod deleted while the node had access", func() *run {
			r := heldRun(3*time.Second, grantNFS(8000), cutNFS(10000))
			podDelete(r, 9000)
			return r
		}(), "pod db/web-9 deleted"},
		{"a pod deleted after the cut", func() *run {
			r := heldRun(3*time.Second, grantNFS(8000), cutNFS(10000))
			podDelete(r, 10001)
			return r
		}(), ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rep := tc.run.check()
			assert.Positive(t, rep.Checked[RuleHeld])
			got := rep.ByRule(RuleHeld)
			if tc.wants == "" {
				assert.Empty(t, got, rep.String())
				return
			}
			require.Len(t, got, 1, rep.String())
			assert.Equal(t, cl+"/"+node, got[0].Subject)
			assert.Contains(t, got[0].Message, tc.wants)
			assert.Contains(t, got[0].Message, "fence-10")
		})
	}
}

func TestGrantsAndRevokesAccess(t *testing.T) {
	tokens := []string{"127.0.10.1", "host-7f3e"}
	for _, tc := range []struct {
		e              simcore.AuditEntry
		grants, revoke bool
	}{
		{write(0, "csi", "PATCH", "/api/rest/nfs_export/x", `{"add_rw_root_hosts":["127.0.10.1"]}`, "~$.x"), true, false},
		{write(0, "a", "PATCH", "/api/rest/nfs_export/x", `{"remove_rw_root_hosts":["127.0.10.1/255.255.255.255"]}`, "~$.x"), false, true},
		{write(0, "csi", "PATCH", "/api/rest/nfs_export/x", `{"add_rw_root_hosts":["127.0.10.12"]}`, "~$.x"), false, false},
		{write(0, "csi", "POST", "/api/rest/volume/v/attach", `{"host_id":"host-7f3e"}`, "+$.mappings[m1]"), true, false},
		{write(0, "a", "POST", "/api/rest/volume/v/detach", `{"host_id":"host-7f3e"}`, "-$.mappings[m1]"), false, true},
		{write(0, "csi", "PATCH", "/api/rest/host/host-7f3e", `{"add_initiators":[{"port_name":"iqn.x"}]}`, "+$.hosts[host-7f3e].initiators[iqn.x]"), true, false},
		{write(0, "a", "PATCH", "/api/rest/host/host-7f3e", `{"remove_initiators":["iqn.x"]}`, "-$.hosts[host-7f3e].initiators[iqn.x]"), false, true},
		// An ID that holds "add" or "map" names no action.
		{write(0, "a", "PATCH", "/api/rest/nfs_export/0add1ee7-4add-9a8b-map1", `{"remove_rw_root_hosts":["127.0.10.1"]}`, "~$.x"), false, true},
	} {
		assert.Equal(t, tc.grants, grantsAccess(tc.e, tokens), "grants: %s %s %s", tc.e.Method, tc.e.Path, tc.e.Body)
		assert.Equal(t, tc.revoke, revokesAccess(tc.e, tokens), "revokes: %s %s %s", tc.e.Method, tc.e.Path, tc.e.Body)
	}
}

// The report lists every access a held node regained, with its cut, judged
// or not, for a chaos run's figures.
func TestHeldRuleListsTheRegainedAccesses(t *testing.T) {
	rep := heldRun(3*time.Second, grantNFS(8000), cutNFS(10500), grantNFS(12000)).check()
	require.Len(t, rep.Held, 2, rep.String())
	first, second := rep.Held[0], rep.Held[1]
	assert.Equal(t, "fence-10", first.Fence)
	assert.Equal(t, cl+"/"+node, first.Subject)
	assert.Equal(t, pflex, first.Array)
	assert.True(t, strings.HasPrefix(first.GrantBy, "csi/"), first.GrantBy)
	assert.True(t, strings.HasPrefix(first.CutBy, "a/"), first.CutBy)
	d, ok := first.Cut()
	require.True(t, ok)
	assert.Equal(t, 2500*time.Millisecond, d)
	_, ok = second.Cut()
	assert.False(t, ok, "the second grant was never cut")
	assert.Len(t, rep.ByRule(RuleHeld), 1, rep.String())
}
