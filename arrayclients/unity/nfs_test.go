package unity_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/arrayclients"
	"github.com/fenced-project/fenced/arrayclients/internal/arraytest"
	"github.com/fenced-project/fenced/arrayclients/unity"
	"github.com/fenced-project/fenced/tests/arraysim/simcore"
	unitysim "github.com/fenced-project/fenced/tests/arraysim/unity"
	"github.com/fenced-project/fenced/tests/csidriver"
)

// unityNFSFixture adds file systems as csi-unity leaves them (its share
// csishare-<name> at /, hosts in rootAccessHosts; readOnlyRootAccessHosts
// for read-only-many): fs_1 is worker-1's; fs_2's share lists worker-1 in
// two lists beside a backup host and worker-2; fs_3 is worker-1's; fs_4
// has no share (never published); fs_5's share is open to every host;
// fs_6 is worker-2's.
const unityNFSFixture = unityFixture + `
      filesystems:
        - name: nfs-w1
          shares: [{rootAccessHosts: [worker-1.cluster.local]}]
        - name: nfs-shared
          shares: [{readOnlyRootAccessHosts: [worker-1.cluster.local], readWriteHosts: [worker-2.cluster.local],
                    rootAccessHosts: [worker-1.cluster.local, backup]}]
        - name: nfs-w1b
          shares: [{rootAccessHosts: [worker-1.cluster.local]}]
        - name: nfs-loose
        - name: nfs-open
          shares: [{defaultAccess: "2", rootAccessHosts: [worker-1.cluster.local]}]
        - name: nfs-w2
          shares: [{rootAccessHosts: [worker-2.cluster.local]}]
`

// unityNFSArray is the array ID the emulated driver writes into handles.
const unityNFSArray = "apm00000000001"

func unityNFSVol(pv, fs string) arrayclients.VolumeRef {
	return arrayclients.VolumeRef{Volume: pv, Object: fs, Protocol: arrayclients.ProtocolNFS, Attached: true}
}

// unityNFSHandle is the csi-unity handle of a seeded file system.
func unityNFSHandle(name, fs string) string { return name + "-NFS-" + unityNFSArray + "-" + fs }

// unityShareLists is each share's host lists by share ID, and the share's
// file system, from the simulator's state.
type unityShareLists struct {
	Filesystem              string   `json:"filesystem"`
	ReadOnlyHosts           []string `json:"readOnlyHosts"`
	ReadWriteHosts          []string `json:"readWriteHosts"`
	ReadOnlyRootAccessHosts []string `json:"readOnlyRootAccessHosts"`
	RootAccessHosts         []string `json:"rootAccessHosts"`
}

func unitySharesOf(t testing.TB, sim *unitysim.Sim) map[string]unityShareLists {
	t.Helper()
	b, err := json.Marshal(sim.Snapshot())
	require.NoError(t, err)
	var s struct {
		Shares []struct {
			ID string `json:"id"`
			unityShareLists
		} `json:"nfsShares"`
	}
	require.NoError(t, json.Unmarshal(b, &s))
	out := map[string]unityShareLists{}
	for _, sh := range s.Shares {
		out[sh.ID] = sh.unityShareLists
	}
	return out
}

// shareOfFS returns the only share of a file system.
func shareOfFS(t testing.TB, sim *unitysim.Sim, fs string) (string, unityShareLists) {
	t.Helper()
	var id string
	var out unityShareLists
	n := 0
	for sid, sh := range unitySharesOf(t, sim) {
		if sh.Filesystem == fs {
			id, out = sid, sh
			n++
		}
	}
	require.Equal(t, 1, n, "shares of %s", fs)
	return id, out
}

func modifyFilesystemPosts(srv *simcore.Server) int {
	n := 0
	for _, a := range srv.Audit() {
		if a.Method == http.MethodPost && strings.HasSuffix(strings.SplitN(a.Path, "?", 2)[0], "/modifyFilesystem") {
			n++
		}
	}
	return n
}

type unityNFSHosts struct{ w1, w2, backup string }

func unityHostsOf(t testing.TB, sim *unitysim.Sim) unityNFSHosts {
	t.Helper()
	var h unityNFSHosts
	var err error
	h.w1, err = sim.HostID("worker-1.cluster.local")
	require.NoError(t, err)
	h.w2, err = sim.HostID("worker-2.cluster.local")
	require.NoError(t, err)
	h.backup, err = sim.HostID("backup")
	require.NoError(t, err)
	return h
}

func TestUnityNFSPlanCuts(t *testing.T) {
	e := startUnity(t, unityNFSFixture, 5*time.Second)
	ctx := context.Background()
	h := unityHostsOf(t, e.sim)
	id, err := e.adapter.Resolve(ctx, unityNode("worker-1"))
	require.NoError(t, err)
	assert.Equal(t, h.w1, id.ObjectID)

	pending := unityNFSVol("pv-pending", "fs_6")
	pending.Attached = false
	for _, tc := range []struct {
		name    string
		vol     arrayclients.VolumeRef
		cut     arrayclients.Cut
		gap     arrayclients.GapReason
		holders []string
	}{
		{"the node's share", unityNFSVol("pv-own", "fs_1"), arrayclients.CutNFSShareHosts, "", nil},
		{"shared with other hosts", unityNFSVol("pv-shared", "fs_2"), arrayclients.CutNFSShareHosts, "", []string{h.w2, h.backup}},
		{"no share", unityNFSVol("pv-loose", "fs_4"), arrayclients.CutNotMapped, "", nil},
		{"open to every host", unityNFSVol("pv-open", "fs_5"), "", arrayclients.GapNotFenceable, nil},
		{"another host's, attached", unityNFSVol("pv-other", "fs_6"), "", arrayclients.GapOtherIdentity, []string{h.w2}},
		{"another host's, attach pending", pending, arrayclients.CutNotMapped, "", []string{h.w2}},
		{"not on the array", unityNFSVol("pv-gone", "fs_99"), "", arrayclients.GapVolumeNotFound, nil},
		{"not a file system ID", unityNFSVol("pv-odd", "12345"), "", arrayclients.GapVolumeNotFound, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := e.adapter.Plan(ctx, id, []arrayclients.VolumeRef{tc.vol})
			require.NoError(t, err)
			require.Len(t, p.Volumes, 1)
			vc := p.Volumes[0]
			assert.Equal(t, tc.vol, vc.VolumeRef)
			assert.Equal(t, tc.cut, vc.Cut)
			if tc.gap == "" {
				assert.Nil(t, vc.Gap)
			} else if assert.NotNil(t, vc.Gap) {
				assert.Equal(t, tc.gap, vc.Gap.Reason)
				assert.Contains(t, vc.Gap.Detail, tc.vol.Volume)
			}
			assert.Equal(t, tc.holders, vc.Holders)
		})
	}

	// The plan records exactly which lists held the host, before any write.
	p, err := e.adapter.Plan(ctx, id, []arrayclients.VolumeRef{unityNFSVol("pv-own", "fs_1"), unityNFSVol("pv-shared", "fs_2")})
	require.NoError(t, err)
	var entries unity.UnityEntries
	require.NoError(t, json.Unmarshal(p.Entries, &entries))
	require.Len(t, entries.Shares, 2)
	s1, _ := shareOfFS(t, e.sim, "fs_1")
	s2, _ := shareOfFS(t, e.sim, "fs_2")
	assert.Equal(t, unity.UnityShareAccess{Filesystem: "fs_1", Share: s1, Name: "csishare-nfs-w1", Lists: []string{"rootAccessHosts"}}, entries.Shares[0])
	assert.Equal(t, unity.UnityShareAccess{Filesystem: "fs_2", Share: s2, Name: "csishare-nfs-shared",
		Lists: []string{"readOnlyRootAccessHosts", "rootAccessHosts"}, OtherHosts: []string{h.w2, h.backup}}, entries.Shares[1])
	assert.Len(t, entries.LUNs, 4, "the host's LUNs are planned beside")
	assert.Contains(t, p.Summary, "2 NFS share(s)")
	assert.Empty(t, e.srv.AuditWrites(), "plans never write")
}

// TestUnityNFSFenceReadBack: a node with NFS volumes (and LUNs) is fenced
// and read back; other hosts' entries stay; Apply twice writes nothing more.
func TestUnityNFSFenceReadBack(t *testing.T) {
	e := startUnity(t, unityNFSFixture, 5*time.Second)
	ctx := context.Background()
	h := unityHostsOf(t, e.sim)
	_, lunsBefore := unityState(t, e.sim)
	sharesBefore := unitySharesOf(t, e.sim)
	id, err := e.adapter.Resolve(ctx, unityNode("worker-1"))
	require.NoError(t, err)
	vols := []arrayclients.VolumeRef{unityVol("pv-block", "sv_1"), unityNFSVol("pv-own", "fs_1"), unityNFSVol("pv-shared", "fs_2"),
		unityNFSVol("pv-loose", "fs_4")}
	p, err := e.adapter.Plan(ctx, id, vols)
	require.NoError(t, err)

	v, err := e.adapter.Verify(ctx, p)
	require.NoError(t, err)
	assert.False(t, v.Fenced)
	assert.True(t, arraytest.CheckOf(t, v, "pv-own").NodeAccess)
	assert.True(t, arraytest.CheckOf(t, v, "pv-shared").NodeAccess)
	assert.False(t, arraytest.CheckOf(t, v, "pv-loose").NodeAccess)

	require.NoError(t, e.adapter.Apply(ctx, p))
	v, err = e.adapter.Verify(ctx, p)
	require.NoError(t, err)
	assert.True(t, v.Fenced, "%+v", v)
	require.Len(t, v.Volumes, 4)
	for _, c := range v.Volumes {
		assert.False(t, c.NodeAccess, c.Volume)
	}
	assert.Equal(t, []string{h.w2, h.backup}, arraytest.CheckOf(t, v, "pv-shared").Holders)
	nfsMissing := 0
	for _, m := range v.Missing {
		if strings.HasPrefix(m, "NFS share ") {
			nfsMissing++
		}
	}
	assert.Equal(t, 3, nfsMissing, "every planned list no longer names the host: %v", v.Missing)

	_, lunsAfter := unityState(t, e.sim)
	assert.Equal(t, "null", lunsAfter["sv_1"])
	s1, sh1 := shareOfFS(t, e.sim, "fs_1")
	assert.Empty(t, sh1.RootAccessHosts)
	_, sh2 := shareOfFS(t, e.sim, "fs_2")
	assert.Equal(t, []string{h.backup}, sh2.RootAccessHosts, "the other host stays")
	assert.Equal(t, []string{h.w2}, sh2.ReadWriteHosts, "an untouched list stays")
	assert.Empty(t, sh2.ReadOnlyRootAccessHosts)
	for sid, sh := range unitySharesOf(t, e.sim) {
		if sh.Filesystem != "fs_1" && sh.Filesystem != "fs_2" {
			assert.Equal(t, sharesBefore[sid], sh, "share %s of %s untouched", sid, sh.Filesystem)
		}
	}
	// worker-1's LUNs (sv_1..sv_3 and the shared sv_7) lose its host; the
	// others are untouched and sv_7 keeps its backup host.
	for lun, acc := range lunsBefore {
		switch lun {
		case "sv_1", "sv_2", "sv_3":
		case "sv_7":
			assert.NotContains(t, lunsAfter[lun], h.w1+`"`)
			assert.Contains(t, lunsAfter[lun], h.backup+`"`)
		default:
			assert.Equal(t, acc, lunsAfter[lun], lun)
		}
	}

	// Apply twice is harmless: nothing more is written.
	posts, state := modifyFilesystemPosts(e.srv), unitySharesOf(t, e.sim)
	require.NoError(t, e.adapter.Apply(ctx, p))
	assert.Equal(t, posts, modifyFilesystemPosts(e.srv))
	assert.Equal(t, state, unitySharesOf(t, e.sim))

	// A footprint share given to the node behind fenced's back shows in
	// the read-back.
	d, err := csidriver.NewUnity(ctx, csidriver.UnityConfig{Endpoint: e.cfg.Endpoint, Username: "admin", Password: "secret",
		ArrayID: unityNFSArray, Insecure: true})
	require.NoError(t, err)
	require.NoError(t, d.ControllerPublish(ctx, unityNFSHandle("nfs-w1", "fs_1"), "worker-1,worker-1.cluster.local", false))
	v, err = e.adapter.Verify(ctx, p)
	require.NoError(t, err)
	assert.False(t, v.Fenced)
	assert.True(t, arraytest.CheckOf(t, v, "pv-own").NodeAccess)
	require.NotEmpty(t, v.Remaining)
	assert.Contains(t, strings.Join(v.Remaining, "\n"), s1)
}

// TestUnityNFSUndoGivesBackWanted: unfence gives back exactly the planned
// lists of a wanted, unheld share and of a multi-node share beside its
// other hosts; Undo twice writes nothing more.
func TestUnityNFSUndoGivesBackWanted(t *testing.T) {
	e := startUnity(t, unityNFSFixture, 5*time.Second)
	ctx := context.Background()
	h := unityHostsOf(t, e.sim)
	shared := unityNFSVol("pv-shared", "fs_2")
	shared.MultiNode = true
	_, p := unityFenced(t, e, unityNFSVol("pv-own", "fs_1"), shared)
	scope := arrayclients.RestoreScope{Wanted: []string{"pv-own", "pv-shared"}}

	require.NoError(t, e.adapter.Undo(ctx, p, scope))
	_, sh1 := shareOfFS(t, e.sim, "fs_1")
	assert.Equal(t, []string{h.w1}, sh1.RootAccessHosts)
	_, sh2 := shareOfFS(t, e.sim, "fs_2")
	assert.ElementsMatch(t, []string{h.w1, h.backup}, sh2.RootAccessHosts)
	assert.Equal(t, []string{h.w1}, sh2.ReadOnlyRootAccessHosts)
	assert.Equal(t, []string{h.w2}, sh2.ReadWriteHosts)
	assert.Empty(t, sh2.ReadOnlyHosts, "no list the host was not in")

	v, err := e.adapter.VerifyRestore(ctx, p, scope)
	require.NoError(t, err)
	assert.True(t, v.Restored, "%+v", v)
	assert.True(t, arraytest.CheckOf(t, v, "pv-own").NodeAccess)
	assert.Empty(t, arraytest.CheckOf(t, v, "pv-own").Note)
	assert.True(t, arraytest.CheckOf(t, v, "pv-shared").NodeAccess)

	posts := modifyFilesystemPosts(e.srv)
	require.NoError(t, e.adapter.Undo(ctx, p, scope))
	assert.Equal(t, posts, modifyFilesystemPosts(e.srv), "Undo twice writes nothing more")
}

// TestUnityNFSUndoDoesNotRegrantMoved: after the fence Kubernetes moves a
// volume (the driver's unpublish from the fenced node deletes its share,
// its publish to worker-2 makes a new one) and stops wanting another; a
// single-node volume other hosts hold stays theirs. Unfence gives none of
// them back, and reads so.
func TestUnityNFSUndoDoesNotRegrantMoved(t *testing.T) {
	e := startUnity(t, unityNFSFixture, 5*time.Second)
	ctx := context.Background()
	h := unityHostsOf(t, e.sim)
	d, err := csidriver.NewUnity(ctx, csidriver.UnityConfig{Endpoint: e.cfg.Endpoint, Username: "admin", Password: "secret",
		ArrayID: unityNFSArray, Insecure: true})
	require.NoError(t, err)
	n1, n2 := "worker-1,worker-1.cluster.local", "worker-2,worker-2.cluster.local"
	moved := unityNFSHandle("nfs-w1", "fs_1")

	_, p := unityFenced(t, e, unityNFSVol("pv-moved", "fs_1"), unityNFSVol("pv-unwanted", "fs_3"), unityNFSVol("pv-held", "fs_2"))
	old, _ := shareOfFS(t, e.sim, "fs_1")
	// The out-of-service taint: the attach/detach controller unpublishes
	// pv-moved from worker-1 and publishes it to worker-2.
	require.NoError(t, d.ControllerUnpublish(ctx, moved, n1))
	require.NoError(t, d.ControllerPublish(ctx, moved, n2, false))
	now, sh1 := shareOfFS(t, e.sim, "fs_1")
	require.NotEqual(t, old, now, "the driver deleted the emptied share and made a new one")
	require.Equal(t, []string{h.w2}, sh1.RootAccessHosts)

	// Wanted or not, a volume another host holds is not given back.
	scope := arrayclients.RestoreScope{Wanted: []string{"pv-moved", "pv-held"}}
	posts := modifyFilesystemPosts(e.srv)
	require.NoError(t, e.adapter.Undo(ctx, p, scope))
	assert.Equal(t, posts, modifyFilesystemPosts(e.srv), "nothing given back")
	_, sh1 = shareOfFS(t, e.sim, "fs_1")
	assert.Equal(t, []string{h.w2}, sh1.RootAccessHosts)
	_, sh3 := shareOfFS(t, e.sim, "fs_3")
	assert.Empty(t, sh3.RootAccessHosts)
	_, sh2 := shareOfFS(t, e.sim, "fs_2")
	assert.Equal(t, []string{h.backup}, sh2.RootAccessHosts)

	v, err := e.adapter.VerifyRestore(ctx, p, scope)
	require.NoError(t, err)
	assert.True(t, v.Restored, "%+v", v)
	assert.Equal(t, "moved to "+h.w2, arraytest.CheckOf(t, v, "pv-moved").Note)
	assert.Equal(t, []string{h.w2}, arraytest.CheckOf(t, v, "pv-moved").Holders)
	assert.Equal(t, "not wanted by Kubernetes on the node", arraytest.CheckOf(t, v, "pv-unwanted").Note)
	assert.Equal(t, "moved to "+h.w2+", "+h.backup, arraytest.CheckOf(t, v, "pv-held").Note)
	for _, c := range v.Volumes {
		assert.False(t, c.NodeAccess, c.Volume)
	}

	// The moved volume can go back to worker-1 through the driver: the
	// array shows no stale grant to refuse it.
	require.NoError(t, d.ControllerUnpublish(ctx, moved, n2))
	require.NoError(t, d.ControllerPublish(ctx, moved, n1, false))

	// Someone gives the unwanted volume to the node: not restored.
	require.NoError(t, d.ControllerPublish(ctx, unityNFSHandle("nfs-w1b", "fs_3"), n1, false))
	v, err = e.adapter.VerifyRestore(ctx, p, scope)
	require.NoError(t, err)
	assert.False(t, v.Restored)
	require.Len(t, v.Remaining, 1)
	assert.Contains(t, v.Remaining[0], "fs_3")
	assert.Contains(t, v.Remaining[0], "not wanted")
}
