package invariants

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fenced-project/fenced/arrayclients"
	"github.com/fenced-project/fenced/cluster/ledger"
	"github.com/fenced-project/fenced/tests/arraysim/simcore"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestGoodRunHasNoViolations(t *testing.T) {
	rep := good().check()
	require.True(t, rep.OK(), rep.String())
	for _, rule := range []string{RuleFenceBeforeDelete, RuleOneActor, RuleArrayChangeWindow, RuleUnfenceOnce,
		RuleArrayRestored, RuleNoActionOnDoubt, RuleFootprintCovered, RuleNoRegrant} {
		assert.Positive(t, rep.Checked[rule], "rule %s examined nothing", rule)
	}
	// node update, pod delete, VA delete, node update (untaint); the admin's delete is not fenced's.
	assert.Equal(t, 4, rep.Checked[RuleFenceBeforeDelete])
}

// TestCheckerCatchesBrokenHistories breaks one thing at a time in a good
// run and expects the rule that guards it to report it.
func TestCheckerCatchesBrokenHistories(t *testing.T) {
	tcs := []struct {
		name   string
		break_ func(r *run)
		rule   string
		want   string // part of the message
	}{
		{"pod deleted before the fence was verified", func(r *run) {
			r.in.Kube[cl][1].Received = at(3500)
		}, RuleFenceBeforeDelete, "pod db/web-0 deleted by fenced-a"},
		{"out-of-service taint before the fence was verified", func(r *run) {
			r.in.Kube[cl][0].Received = at(3900)
		}, RuleFenceBeforeDelete, "node worker-1 written (update)"},
		{"taint lifted after the record closed", func(r *run) {
			r.in.Kube[cl][4].Received = at(24500)
		}, RuleFenceBeforeDelete, "node worker-1 written (update)"},
		{"VolumeAttachment deleted before any fence", func(r *run) {
			r.in.Kube[cl][2].Received = at(1500)
		}, RuleFenceBeforeDelete, "deleted by system:serviceaccount:kube-system:attachdetach-controller at 12:00:01.5"},
		{"VolumeAttachment deleted after a drain ended", func(r *run) {
			r.in.Kube[cl][2].Received = at(1500)
			r.in.Timeline = append(r.in.Timeline, Event{Time: at(1000), Kind: DrainStart, Detail: cl + "/" + node},
				Event{Time: at(1200), Kind: DrainEnd, Detail: cl + "/" + node})
		}, RuleFenceBeforeDelete, "deleted by system:serviceaccount:kube-system:attachdetach-controller at 12:00:01.5"},
		{"pod deleted after recovery started", func(r *run) {
			r.in.Kube[cl][1].Received = at(20500)
			r.in.Placements[cl] = r.in.Placements[cl][:4]
		}, RuleFenceBeforeDelete, "while no fence of the node was in force"},
		{"fenced step without a read-back on one array", func(r *run) {
			r.in.Arrays[pstor] = append(r.in.Arrays[pstor][:1], r.in.Arrays[pstor][2:]...)
		}, RuleFenceBeforeDelete, "array pstore-1: no successful read"},
		{"read-back that failed", func(r *run) {
			r.in.Arrays[pstor][1].Status = 500
		}, RuleFenceBeforeDelete, "array pstore-1: no successful read"},
		{"read-back only from a follower", func(r *run) {
			r.in.Arrays[pflex][2].Remote = "b/127.0.0.1:40001"
		}, RuleFenceBeforeDelete, "array pflex-1: no successful read"},
		{"array without an audit log", func(r *run) {
			delete(r.in.Arrays, pstor)
		}, RuleFenceBeforeDelete, "array pstore-1: no audit log"},
		// footprint-covered (invariants 1 and 7)
		{"fenced without a recorded footprint", func(r *run) {
			r.fence().FootprintRecorded, r.fence().Footprint = false, nil
		}, RuleFootprintCovered, "without a recorded storage footprint"},
		{"a VolumeAttachment of the node left out of the footprint", func(r *run) {
			r.fence().Footprint = r.fence().Footprint[:1]
		}, RuleFootprintCovered, "was not in its footprint"},
		{"a footprint volume with a gap", func(r *run) {
			r.fence().Footprint[1].Placements = nil
			r.fence().Footprint[1].Gap = &arrayclients.Gap{Reason: arrayclients.GapNotFenceable, Detail: "open NFS export"}
		}, RuleFootprintCovered, "volume pv-log unplaced: not-fenceable"},
		{"a footprint volume the plan does not cut", func(r *run) {
			r.fence().Plans[1].Volumes[0].Cut = ""
			r.fence().Plans[1].Volumes[0].Gap = &arrayclients.Gap{Reason: arrayclients.GapOtherIdentity, Detail: "given to host-x"}
		}, RuleFootprintCovered, "volume pv-log on pstore-1 has a gap in the plan: other-identity"},
		{"a footprint volume not in its array's plan", func(r *run) {
			r.fence().Plans[0].Volumes = nil
		}, RuleFootprintCovered, "volume pv-data on pflex-1 is not in the array's plan"},
		{"fenced while the read-back showed access to a footprint volume", func(r *run) {
			r.in.Ledger.AtFenced = []*ledger.Fence{atFenced(r, func(checks map[string][]arrayclients.VolumeCheck) {
				checks[pstor][0].NodeAccess = true
			})}
		}, RuleFootprintCovered, "volume pv-log on pstore-1 still gives the node access in the read-back"},
		{"fenced with a read-back that does not show a footprint volume", func(r *run) {
			r.in.Ledger.AtFenced = []*ledger.Fence{atFenced(r, func(checks map[string][]arrayclients.VolumeCheck) {
				checks[pflex] = nil
			})}
		}, RuleFootprintCovered, "volume pv-data on pflex-1 is not in the array's read-back"},
		// no-regrant (invariant 5)
		{"unfence re-maps a volume that moved to another node", func(r *run) {
			moveVolume(r, 0, "worker-3", 7000)
		}, RuleNoRegrant, "unfence gave the node volume pv-data (v1 on pflex-1) while Kubernetes had it on worker-3"},
		{"a volume that moved is still given to the node at the end", func(r *run) {
			moveVolume(r, 0, "worker-3", 7000)
			r.in.Arrays[pflex] = slices.Delete(r.in.Arrays[pflex], 3, 4) // no write seen, but the end state has it
		}, RuleNoRegrant, "at the end of the run pflex-1 still gives the node volume pv-data (v1), which moved to worker-3"},
		{"initiators restored while the host still has a volume that moved", func(r *run) {
			moveVolume(r, 1, "worker-3", 7000)
			r.in.ArrayEnd[pstor] = json.RawMessage(`{"hosts":[{"id":"` + host + `","name":"csi-node-w1","initiators":[{"port_name":"iqn.1994-05.com.redhat:w1"}],` +
				`"mappings":[{"volume_id":"` + vol2 + `"}]}]}`)
			r.in.ArrayStart[pstor] = r.in.ArrayEnd[pstor]
		}, RuleNoRegrant, "pstore-1 still gives the node volume pv-log"},
		{"a host-to-volume mapping of a moved volume left at the end", func(r *run) {
			moveVolume(r, 1, "worker-3", 7000)
			r.in.ArrayEnd[pstor] = json.RawMessage(`{"hosts":[{"id":"` + host + `","name":"csi-node-w1","initiators":[{"port_name":"iqn.1994-05.com.redhat:w1"}]}],` +
				`"mappings":[{"id":"m1","hostId":"` + host + `","volumeId":"` + vol2 + `"}]}`)
			r.in.ArrayStart[pstor] = r.in.ArrayEnd[pstor]
		}, RuleNoRegrant, "pstore-1 still gives the node volume pv-log"},
		{"pod delete whose node is unknown", func(r *run) {
			r.in.Placements[cl] = r.in.Placements[cl][1:]
		}, RuleFenceBeforeDelete, "no placement"},
		{"write from a deposed leader", func(r *run) {
			r.in.Ledger.Epochs = append(r.in.Ledger.Epochs, ledger.Epoch{Replica: "b", Term: 3, At: at(10000)})
			r.fence().Steps = r.fence().Steps[:5]
			r.fence().Steps = append(r.fence().Steps, step(ledger.StateEvicted, ledger.StateUnfenceIntent, 20000, 30, "b", 3))
			r.in.Arrays[pflex][3].Remote = "a/127.0.0.1:40000"
		}, RuleOneActor, "by a while b led (term 3"},
		{"write from a replica that never led", func(r *run) {
			r.in.Arrays[pstor][0].Remote = "c/127.0.0.1:40002"
		}, RuleOneActor, "by c while a led"},
		{"write from an unknown remote", func(r *run) {
			r.in.Arrays[pstor][0].Remote = "127.0.0.1:50000"
		}, RuleOneActor, "no replica's listener"},
		{"Kubernetes write by a follower", func(r *run) {
			r.in.Kube[cl][1].User.Username = "fenced-b"
		}, RuleOneActor, "delete pods db/web-0 by b while a led"},
		{"step written by a replica that did not lead its term", func(r *run) {
			r.fence().Steps[3].By = "c"
		}, RuleOneActor, "whose leader was a"},
		{"two leaders in one term", func(r *run) {
			r.in.Ledger.Epochs = append(r.in.Ledger.Epochs, ledger.Epoch{Replica: "b", Term: 2, At: at(-100000)})
		}, RuleOneActor, "two leaders in term 2"},
		{"array write outside any fencing window", func(r *run) {
			r.in.Arrays[pflex][3].Time = at(8000)
		}, RuleArrayChangeWindow, "array pflex-1: write POST /api/instances/Volume::v1/action/addMappedSdc"},
		{"array write before the fencing step committed", func(r *run) {
			r.in.Arrays[pstor][0].Time = at(1900)
		}, RuleArrayChangeWindow, "array pstore-1: write PATCH"},
		{"rebooted node never restored", func(r *run) {
			r.truncateAfter(ledger.StateUnfenceIntent)
			r.in.Kube[cl] = r.in.Kube[cl][:4]
		}, RuleUnfenceOnce, "never restored"},
		{"restored twice", func(r *run) {
			r.fence().Steps = append(r.fence().Steps[:7:7], step(ledger.StateRestored, ledger.StateRestored, 22200, 35, "a", 2),
				r.fence().Steps[7], r.fence().Steps[8])
		}, RuleUnfenceOnce, "restored 2 times"},
		{"unfenced without a reboot", func(r *run) {
			r.in.Timeline = r.in.Timeline[:1]
		}, RuleUnfenceOnce, "without a reboot"},
		{"unfenced with the old boot ID", func(r *run) {
			r.fence().UnfenceBootID = "boot-1"
		}, RuleUnfenceOnce, "boot ID"},
		{"undo missing on an array", func(r *run) {
			r.in.ArrayEnd[pstor] = json.RawMessage(`{"hosts":[{"id":"` + host + `","name":"csi-node-w1","initiators":[]}]}`)
		}, RuleArrayRestored, "$.hosts[host-7f3e].initiators[iqn.1994-05.com.redhat:w1]"},
		{"healthy node's access changed", func(r *run) {
			r.in.ArrayEnd[pflex] = json.RawMessage(`{"sdcs":[{"id":"` + sdcID + `","connected":true}],"volumes":[{"id":"v1","mappedSdcInfo":[{"sdcId":"` + sdcID + `","accessMode":"ReadOnly"}]}]}`)
		}, RuleArrayRestored, "accessMode"},
		{"fence started during a storm", func(r *run) {
			r.in.Timeline = append(r.in.Timeline, Event{Time: at(500), Kind: StormStart, Detail: cl}, Event{Time: at(3000), Kind: StormEnd, Detail: cl})
		}, RuleNoActionOnDoubt, "during a storm"},
		{"fence started by a leader cut from the apiserver", func(r *run) {
			r.in.Timeline = append(r.in.Timeline, Event{Time: at(500), Kind: APICutStart, Detail: "a/" + cl})
		}, RuleNoActionOnDoubt, "had lost the apiserver"},
		{"fence started while the apiserver was down", func(r *run) {
			r.in.Timeline = append(r.in.Timeline, Event{Time: at(1900), Kind: APIDownStart, Detail: cl}, Event{Time: at(2100), Kind: APIDownEnd, Detail: cl})
		}, RuleNoActionOnDoubt, "apiserver of c1 was down"},
		{"dry-run that wrote", func(r *run) {
			r.in.DryRun = true
		}, RuleDryRun, "in a dry-run"},
		{"steps timed backwards", func(r *run) {
			r.setStepAt(ledger.StateTainted, 3000)
		}, RuleEvidence, "is timed before"},
	}
	for _, tc := range tcs {
		t.Run(tc.name, func(t *testing.T) {
			r := good()
			tc.break_(r)
			rep := r.check()
			got := rep.ByRule(tc.rule)
			require.NotEmpty(t, got, "rule %s did not fire:\n%s", tc.rule, rep)
			var msgs []string
			for _, v := range got {
				msgs = append(msgs, v.String())
			}
			assert.Contains(t, joinLines(msgs), tc.want)
		})
	}
}

// atFenced returns the run's record as it was at its fenced step: fenced,
// with read-backs showing the node without access to every footprint
// volume, changed by mutate.
func atFenced(r *run, mutate func(checks map[string][]arrayclients.VolumeCheck)) *ledger.Fence {
	f := *r.fence()
	f.Steps = slices.Clone(f.Steps[:3])
	f.State = ledger.StateFenced
	_, _, checks := footprint()
	mutate(checks)
	f.Results = map[string]*ledger.ArrayResult{}
	for _, a := range []string{pflex, pstor} {
		f.Results[a] = &ledger.ArrayResult{Array: a, Applied: true, Verified: true,
			Verification: &arrayclients.Verification{Fenced: true, Volumes: checks[a], CheckedAt: at(3000)}}
	}
	return &f
}

// moveVolume records the footprint volume i attached to node m from ms on
// (the pod moved there and the driver published it).
func moveVolume(r *run, i int, m string, ms int) {
	v := r.fence().Footprint[i]
	r.in.Placements[cl] = append(r.in.Placements[cl],
		Placement{Time: at(ms - 100), Resource: "volumeattachments", Name: v.Attachment, Node: node, Deleted: true},
		Placement{Time: at(ms), Resource: "volumeattachments", Name: AttachmentName(v.Handle, v.Driver, m), Node: m})
}

func joinLines(l []string) string {
	out := ""
	for _, s := range l {
		out += s + "\n"
	}
	return out
}

// The out-of-service taint is lifted first when an unfence begins, before
// any access is given back (kubernetes#142331): a node write by fenced in
// unfence-intent is allowed.
func TestTaintLiftedAtUnfenceIntent(t *testing.T) {
	r := good()
	r.in.Kube[cl][4].Received = at(20100)
	rep := r.check()
	assert.Empty(t, rep.ByRule(RuleFenceBeforeDelete), rep.String())
}

func TestToleranceOptions(t *testing.T) {
	t.Run("late write of the previous leader within the grace", func(t *testing.T) {
		r := good()
		r.in.Ledger.Epochs = append(r.in.Ledger.Epochs, ledger.Epoch{Replica: "b", Term: 3, At: at(21050)})
		r.fence().Steps[6].By, r.fence().Steps[6].Term = "b", 3
		r.fence().Steps[7].By, r.fence().Steps[7].Term = "b", 3
		r.fence().Steps[8].By, r.fence().Steps[8].Term = "b", 3
		r.in.Arrays[pflex][4].Remote = "b/x"
		r.in.Arrays[pstor][3].Remote = "b/x"
		r.in.Kube[cl][4].User.Username = "fenced-b"
		// a's undo on pstore-1 at 21.1 s arrives 50 ms after b's epoch.
		require.NotEmpty(t, r.check().ByRule(RuleOneActor))
		r.opts.InFlightGrace = 100 * time.Millisecond
		rep := r.check()
		require.True(t, rep.OK(), rep.String())
	})
	t.Run("detection slack for an apiserver cut", func(t *testing.T) {
		r := good()
		r.in.Timeline = append(r.in.Timeline, Event{Time: at(1500), Kind: APICutStart, Detail: "a/" + cl},
			Event{Time: at(30000), Kind: APICutEnd, Detail: "a/" + cl})
		require.NotEmpty(t, r.check().ByRule(RuleNoActionOnDoubt))
		r.opts.DetectionSlack = time.Second
		assert.Empty(t, r.check().ByRule(RuleNoActionOnDoubt))
	})
	t.Run("operator fence during a storm", func(t *testing.T) {
		r := good()
		r.fence().Origin = ledger.OriginOperator
		r.in.Timeline = append(r.in.Timeline, Event{Time: at(500), Kind: StormStart, Detail: cl})
		assert.Empty(t, r.check().ByRule(RuleNoActionOnDoubt))
	})
	t.Run("node still fenced explains its own array differences", func(t *testing.T) {
		r := good()
		r.truncateAfter(ledger.StateEvicted)
		r.in.Kube[cl] = r.in.Kube[cl][:4]
		r.in.Timeline = r.in.Timeline[:1]
		r.in.Arrays[pflex] = r.in.Arrays[pflex][:3]
		r.in.Arrays[pstor] = r.in.Arrays[pstor][:2]
		r.in.ArrayEnd[pflex] = json.RawMessage(`{"sdcs":[{"id":"` + sdcID + `"}],"volumes":[{"id":"v1","mappedSdcInfo":[]}]}`)
		r.in.ArrayEnd[pstor] = json.RawMessage(`{"hosts":[{"id":"` + host + `","name":"csi-node-w1","initiators":[]}]}`)
		rep := r.check()
		require.True(t, rep.OK(), rep.String())
	})
}

func TestWindows(t *testing.T) {
	f := good().fence()
	ws := windows(f, inForce...)
	require.Len(t, ws, 1)
	assert.Equal(t, at(4000), ws[0].From)
	assert.Equal(t, at(20000), ws[0].To)
	assert.True(t, ws[0].contains(at(19999)))
	assert.False(t, ws[0].contains(at(20000)))
	aw := windows(f, ledger.StateFencing, ledger.StateUnfenceIntent)
	require.Len(t, aw, 2)
	assert.Equal(t, at(22000), aw[1].To)
}

func TestMentions(t *testing.T) {
	tcs := []struct {
		s, tok string
		want   bool
	}{
		{"-$.volumes[v1].mappedSdcInfo[abc123]", "abc123", true},
		{"/api/instances/Sdc::abc123/action", "abc123", true},
		{"Host_12", "Host_1", false},
		{"127.0.10.12", "127.0.10.1", false},
		{`["127.0.10.1","x"]`, "127.0.10.1", true},
		{"ABC123", "abc123", true},
		{"", "x", false},
	}
	for _, tc := range tcs {
		assert.Equal(t, tc.want, mentions(tc.s, tc.tok), "%q in %q", tc.tok, tc.s)
	}
}

func TestDiffStates(t *testing.T) {
	tcs := []struct {
		name          string
		before, after string
		want          []string
	}{
		{"equal", `{"a":[1,2],"b":{"c":"x"}}`, `{"b":{"c":"x"},"a":[1,2]}`, nil},
		{"ignored key", `{"hosts":[{"id":"h1","connected":true}]}`, `{"hosts":[{"id":"h1","connected":false}]}`, nil},
		{"keyed element removed", `{"hosts":[{"id":"h1"},{"id":"h2"}]}`, `{"hosts":[{"id":"h2"}]}`, []string{`$.hosts[h1]: {"id":"h1"} -> (none)`}},
		{"scalar list element removed", `{"clients":["10.0.0.1","10.0.0.2"]}`, `{"clients":["10.0.0.2"]}`, []string{`$.clients[-]: "10.0.0.1" -> (none)`}},
		{"scalar list reordered", `{"clients":["a","b"]}`, `{"clients":["b","a"]}`, []string{`$.clients(order): ["a","b"] -> ["b","a"]`}},
		{"unkeyed objects", `{"acc":[{"host":"h1","hlu":1}]}`, `{"acc":[{"host":"h1","hlu":2}]}`,
			[]string{`$.acc[+]: (none) -> {"hlu":2,"host":"h1"}`, `$.acc[-]: {"hlu":1,"host":"h1"} -> (none)`}},
		{"type changed", `{"a":1}`, `{"a":"1"}`, []string{`$.a: 1 -> "1"`}},
	}
	for _, tc := range tcs {
		t.Run(tc.name, func(t *testing.T) {
			d, err := DiffStates(json.RawMessage(tc.before), json.RawMessage(tc.after), DefaultSignalKeys)
			require.NoError(t, err)
			var got []string
			for _, x := range d {
				got = append(got, x.String())
			}
			assert.Equal(t, tc.want, got)
		})
	}
}

// A volume that moved and that unfence left with its new node breaks no
// rule: the driver's writes are not fenced's to restore.
func TestMovedVolumeLeftWithItsNewNode(t *testing.T) {
	r := good()
	moveVolume(r, 0, "worker-3", 7000)
	const sdc3 = "5a1f0c2e00000003"
	// The driver (no replica's tag) unmapped v1 from worker-1 and mapped
	// it to worker-3; unfence gave nothing of v1 back.
	driver := func(seq int64, ms int, path, change string) simcore.AuditEntry {
		return audit(seq, ms, "csi", "POST", path, change)
	}
	r.in.Arrays[pflex] = []simcore.AuditEntry{
		r.in.Arrays[pflex][0], r.in.Arrays[pflex][1], r.in.Arrays[pflex][2],
		driver(4, 7200, "/api/instances/Volume::v1/action/addMappedSdc", "+$.volumes[v1].mappedSdcInfo["+sdc3+"]"),
		audit(5, 21500, "a", "GET", "/api/instances/Volume::v1", ""),
	}
	r.in.ArrayEnd[pflex] = json.RawMessage(`{"sdcs":[{"id":"` + sdcID + `","connected":false}],"volumes":[{"id":"v1","mappedSdcInfo":[{"sdcId":"` + sdc3 + `","accessMode":"ReadWrite"}]}]}`)
	r.opts.DriverRemotes = []string{"csi"}
	r.in.Arrays[pflex][3].Remote = "csi/127.0.0.1:50000"
	rep := r.check()
	require.True(t, rep.OK(), rep.String())
	assert.Positive(t, rep.Checked[RuleNoRegrant])

	// The same writes with no driver declared: a write from no replica.
	r.opts.DriverRemotes = nil
	rep = r.check()
	assert.NotEmpty(t, rep.ByRule(RuleOneActor), rep.String())
}

// A VolumeAttachment deleted while the harness drained its node on purpose
// is a normal detach.
func TestDrainedDetachNeedsNoFence(t *testing.T) {
	r := good()
	r.in.Kube[cl][2].Received = at(1500)
	r.in.Timeline = append(r.in.Timeline, Event{Time: at(1000), Kind: DrainStart, Detail: cl + "/" + node})
	rep := r.check()
	require.True(t, rep.OK(), rep.String())
}

// In a dry-run, a CSI driver publishing a volume writes to the array; that
// write is not fenced's and breaks no rule. Undeclared, it is a violation.
func TestDryRunLeavesDriverWritesOut(t *testing.T) {
	r := good()
	r.in.DryRun = true
	const publish = "/api/instances/Volume::v9/action/addMappedSdc"
	r.in.Arrays[pflex] = append(r.in.Arrays[pflex], audit(9, 7200, "csi", "POST", publish, "+$.volumes[v9].mappedSdcInfo[5a1f0c2e00000003]"))
	names := func(rep *Report) []string {
		var out []string
		for _, v := range rep.ByRule(RuleDryRun) {
			if strings.Contains(v.Message, publish) {
				out = append(out, v.Message)
			}
		}
		return out
	}
	r.opts.DriverRemotes = []string{"csi"}
	assert.Empty(t, names(r.check()))
	r.opts.DriverRemotes = nil
	assert.Len(t, names(r.check()), 1)
}

// A volume Kubernetes detached from the node before its unfence (the
// force-detach after the taint) and that unfence did not give back breaks
// no rule (invariant 5); had the volume still been attached there, its
// missing access is a violation of array-restored.
func TestDetachedVolumeNotGivenBack(t *testing.T) {
	withEnd := func(attached bool) *Report {
		r := good()
		v := r.fence().Footprint[0]
		if !attached {
			r.in.Placements[cl] = append(r.in.Placements[cl],
				Placement{Time: at(6900), Resource: "volumeattachments", Name: v.Attachment, Node: node, Deleted: true})
		}
		// Unfence gave nothing of v1 back: the end state lacks the node's mapping.
		r.in.Arrays[pflex] = r.in.Arrays[pflex][:3]
		r.in.ArrayEnd[pflex] = json.RawMessage(`{"sdcs":[{"id":"` + sdcID + `","connected":false}],"volumes":[{"id":"v1","mappedSdcInfo":[]}]}`)
		return r.check()
	}
	rep := withEnd(false)
	assert.Empty(t, rep.ByRule(RuleArrayRestored), rep.String())
	rep = withEnd(true)
	assert.NotEmpty(t, rep.ByRule(RuleArrayRestored), rep.String())
}

// A node that came back with a new IP registered a new host (a CSI
// driver's write) with the initiators fenced had removed from its old
// host: the old host's missing initiator is explained by the new host
// holding it. The same initiator on a host fenced itself wrote, or a
// different initiator on the driver's host, explains nothing.
func TestReregisteredInitiatorsExplainTheOldHost(t *testing.T) {
	removed := Difference{Path: "$.hosts[h1].initiators[iqn.a]", Before: `{"port_name":"iqn.a","portType":"iSCSI"}`}
	newHost := Difference{Path: "$.hosts[h2]", After: `{"id":"h2","initiators":[{"port_name":"iqn.a","portType":"iSCSI"}],"name":"csi-node-m-10.0.0.9"}`}
	other := Difference{Path: "$.hosts[h2]", After: `{"id":"h2","initiators":[{"port_name":"iqn.b","portType":"iSCSI"}],"name":"csi-node-m-10.0.0.9"}`}
	checker := func(remote string) *checker {
		return &checker{in: Inputs{Arrays: map[string][]simcore.AuditEntry{"ps": {
			{Seq: 1, Remote: "a/127.0.0.1:1", Method: "PATCH", Changed: true, Change: "~$.hosts[h1].initiators"},
			{Seq: 2, Remote: remote, Method: "POST", Changed: true, Change: "+$.hosts[h2]"},
		}}}, opts: Options{DriverRemotes: []string{"csi"}}}
	}
	assert.True(t, checker("csi/127.0.0.1:2").reregistered("ps", removed, []Difference{removed, newHost}))
	assert.False(t, checker("a/127.0.0.1:3").reregistered("ps", removed, []Difference{removed, newHost}), "fenced wrote the new host")
	assert.False(t, checker("csi/127.0.0.1:2").reregistered("ps", removed, []Difference{removed, other}), "another initiator")
	assert.False(t, checker("csi/127.0.0.1:2").reregistered("ps", newHost, []Difference{removed, newHost}), "an addition is not a removal")
}

// A list the audit names by position and the checker compares as a
// multiset (a PowerMax storage group's volumes): the driver's unpublish of
// a volume from it is not fenced's to restore; the same change by fenced
// is; and a fenced node's own entry missing from such a list is fenced's
// to give back whoever wrote the list last.
func TestDriverChangeOfAPositionalList(t *testing.T) {
	withList := func(writer, removed string) *Report {
		r := good()
		start := `{"sdcs":[{"id":"` + sdcID + `","connected":true}],"volumes":[{"id":"v1","mappedSdcInfo":[{"sdcId":"` + sdcID + `","accessMode":"ReadWrite"}]}],` +
			`"storageGroups":[{"storageGroupId":"sg-w2","volumes":["00100","` + removed + `"]}]}`
		end := `{"sdcs":[{"id":"` + sdcID + `","connected":false}],"volumes":[{"id":"v1","mappedSdcInfo":[{"sdcId":"` + sdcID + `","accessMode":"ReadWrite"}]}],` +
			`"storageGroups":[{"storageGroupId":"sg-w2","volumes":["00100"]}]}`
		r.in.ArrayStart[pflex], r.in.ArrayEnd[pflex] = json.RawMessage(start), json.RawMessage(end)
		r.in.Arrays[pflex] = append(r.in.Arrays[pflex],
			audit(6, 25000, writer, "PUT", "/sloprovisioning/storagegroup/sg-w2", "-$.storageGroups[sg-w2].volumes[1]"))
		r.opts.DriverRemotes = []string{"csi"}
		return r.check()
	}
	assert.Empty(t, withList("csi", "0010D").ByRule(RuleArrayRestored), "the driver's unpublish")
	assert.NotEmpty(t, withList("a", "0010D").ByRule(RuleArrayRestored), "fenced's own change")
	assert.NotEmpty(t, withList("csi", sdcID).ByRule(RuleArrayRestored), "a fenced node's own entry")
}
