package auditcheck

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// t0 is the start of the synthetic runs.
var t0 = time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)

func at(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

// kubeLog is an API server audit log of node worker-2 (on 127.0.10.2, with
// the five drivers' node IDs) whose pod db/db-1 fenced-a deletes at
// deleteAt.
func kubeLog(deleteAt float64) string {
	ids, _ := json.Marshal(map[string]string{
		"csi-vxflexos.dellemc.com":   "6F2B4C1E-0000-4000-8000-000000000002",
		"csi-powerstore.dellemc.com": "csi-node-0123456789abcdef0123456789abcdef-127.0.10.2",
		"csi-isilon.dellemc.com":     "worker-2=#=#=worker-2.cluster.test=#=#=127.0.10.2",
		"csi-powermax.dellemc.com":   "worker-2",
		"csi-unity.dellemc.com":      "worker-2,worker-2.cluster.test",
	})
	ev := func(t float64, verb, user, resource, sub, ns, name string, code int, obj any) string {
		e := map[string]any{"stage": "ResponseComplete", "verb": verb, "user": map[string]any{"username": user},
			"objectRef":                map[string]any{"resource": resource, "subresource": sub, "namespace": ns, "name": name},
			"responseStatus":           map[string]any{"code": code},
			"requestReceivedTimestamp": at(t), "stageTimestamp": at(t + 0.01)}
		if obj != nil {
			e["requestObject"] = obj
		}
		b, _ := json.Marshal(e)
		return string(b) + "\n"
	}
	node := func(name, ids string) map[string]any {
		return map[string]any{"metadata": map[string]any{"name": name, "annotations": map[string]string{nodeIDAnnotation: ids}}}
	}
	return ev(1, "create", "admin", "nodes", "", "", "worker-2", 201, node("worker-2", string(ids))) +
		ev(1, "create", "admin", "nodes", "", "", "worker-20", 201, node("worker-20", `{"csi-powermax.dellemc.com":"worker-20"}`)) +
		ev(2, "create", "system:kube-scheduler", "pods", "binding", "db", "db-1", 201,
			map[string]any{"target": map[string]any{"kind": "Node", "name": "worker-2"}}) +
		ev(deleteAt, "delete", "fenced-a", "pods", "", "db", "db-1", 200, nil) +
		// Deletions by others are not fenced's.
		ev(deleteAt-5, "delete", "system:node-controller", "pods", "", "db", "db-1", 200, nil)
}

// arrayLog writes an array's audit file: the start state, then writes.
type arrayLog struct {
	b   strings.Builder
	seq int64
}

func newArrayLog(name string, state string) *arrayLog {
	l := &arrayLog{}
	var compact bytes.Buffer
	if err := json.Compact(&compact, []byte(state)); err != nil {
		panic(err)
	}
	fmt.Fprintf(&l.b, `{"kind":"start","array":%q,"state":%s}`+"\n", name, compact.String())
	return l
}

func (l *arrayLog) write(t float64, requester, object, before, after string) *arrayLog {
	l.seq++
	obj := map[string]any{"object": object}
	if before != "" {
		obj["before"] = json.RawMessage(before)
	}
	if after != "" {
		obj["after"] = json.RawMessage(after)
	}
	b, _ := json.Marshal(map[string]any{"kind": "request", "seq": l.seq, "time": at(t), "done": at(t + 0.05),
		"requester": requester, "remote": requester + "/127.0.0.1:4000", "method": "POST", "path": "/x", "status": 200,
		"changed": true, "objects": []any{obj}})
	l.b.Write(b)
	l.b.WriteByte('\n')
	return l
}

// powerflex is a PowerFlex record where volume v1 is mapped to worker-2's
// SDC (by its id) and to worker-20's.
const powerflexStart = `{"version":1,"sdcs":[{"id":"sdc2","name":"worker-2","sdcGuid":"6F2B4C1E-0000-4000-8000-000000000002","sdcIp":"127.0.10.2"},
 {"id":"sdc20","name":"worker-20","sdcIp":"127.0.10.20"}],
 "volumes":[{"id":"v1","name":"k8s-abc","systemId":"sys","mappings":[{"sdcId":"sdc2"},{"sdcId":"sdc20"}]}]}`

const v1Both = `{"id":"v1","name":"k8s-abc","systemId":"sys","mappings":[{"sdcId":"sdc2"},{"sdcId":"sdc20"}]}`
const v1Other = `{"id":"v1","name":"k8s-abc","systemId":"sys","mappings":[{"sdcId":"sdc20"}]}`

// powerstore is a PowerStore record where worker-2's host (named by its
// node ID) has an initiator and a mapping.
const powerstoreStart = `{"hosts":[{"id":"h2","name":"csi-node-0123456789abcdef0123456789abcdef-127.0.10.2","initiators":[{"port_name":"iqn.1994-05.com.redhat:aa"}]}],
 "mappings":[{"id":"m1","host_id":"h2","volume_id":"vol1"}]}`

const hostWith = `{"id":"h2","name":"csi-node-0123456789abcdef0123456789abcdef-127.0.10.2","initiators":[{"port_name":"iqn.1994-05.com.redhat:aa"}]}`
const hostWithout = `{"id":"h2","name":"csi-node-0123456789abcdef0123456789abcdef-127.0.10.2","initiators":[]}`

// powerscale is a PowerScale record whose export lists worker-2's address.
const powerscaleStart = `{"exports":[{"id":1,"clients":["127.0.10.2","127.0.10.20"]}]}`

func writeRun(t *testing.T, kube string, arrays map[string]*arrayLog) (string, string) {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "arrays"), 0o755))
	for name, l := range arrays {
		require.NoError(t, os.WriteFile(filepath.Join(dir, "arrays", name+".jsonl"), []byte(l.b.String()), 0o644))
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "audit.log"), []byte(kube), 0o644))
	return filepath.Join(dir, "arrays"), filepath.Join(dir, "audit.log")
}

// checkRun writes a run's files and checks them.
func checkRun(t *testing.T, kube string, arrays map[string]*arrayLog) (*Report, error) {
	t.Helper()
	dir, audit := writeRun(t, kube, arrays)
	return CheckFiles(dir, audit, opts)
}

var opts = Options{FencedUsers: []string{"fenced-a", "fenced-b"}}

func TestFenceBeforeDeleteOnEveryArray(t *testing.T) {
	arrays := map[string]*arrayLog{
		"pflex-1":  newArrayLog("pflex-1", powerflexStart).write(10, "b", "volumes[v1]", v1Both, v1Other),
		"pstore-1": newArrayLog("pstore-1", powerstoreStart).write(11, "b", "hosts[h2]", hostWith, hostWithout),
		"pscale-1": newArrayLog("pscale-1", powerscaleStart).write(12, "b", "exports[1]",
			`{"id":1,"clients":["127.0.10.2","127.0.10.20"]}`, `{"id":1,"clients":["127.0.10.20"]}`),
	}
	rep, err := checkRun(t, kubeLog(20), arrays)
	require.NoError(t, err)
	require.True(t, rep.OK(), "%s", rep)
	assert.Equal(t, 1, rep.Deletions)
	require.Len(t, rep.Cuts, 3)
	for _, c := range rep.Cuts {
		assert.Equal(t, "worker-2", c.Node)
		assert.Equal(t, "db/db-1", c.Pod)
		assert.Equal(t, "b", c.Requester)
		assert.Positive(t, c.Lead)
	}
}

func TestDeleteBeforeFenceIsAViolation(t *testing.T) {
	arrays := map[string]*arrayLog{
		"pflex-1":  newArrayLog("pflex-1", powerflexStart).write(10, "b", "volumes[v1]", v1Both, v1Other),
		"pstore-1": newArrayLog("pstore-1", powerstoreStart).write(25, "b", "hosts[h2]", hostWith, hostWithout),
	}
	rep, err := checkRun(t, kubeLog(20), arrays)
	require.NoError(t, err)
	require.Len(t, rep.Violations, 1, "%s", rep)
	assert.Equal(t, "pstore-1", rep.Violations[0].Array)
	assert.Contains(t, rep.Violations[0].Problem, "no write cut")
}

func TestCutAnsweredAfterTheDeleteArrivedIsNoFence(t *testing.T) {
	arrays := map[string]*arrayLog{
		// Arrived 10 ms before the deletion, answered 40 ms after it.
		"pflex-1": newArrayLog("pflex-1", powerflexStart).write(19.99, "b", "volumes[v1]", v1Both, v1Other),
	}
	rep, err := checkRun(t, kubeLog(20), arrays)
	require.NoError(t, err)
	require.Len(t, rep.Violations, 1, "%s", rep)
}

func TestDriverUnpublishIsNoFence(t *testing.T) {
	arrays := map[string]*arrayLog{
		"pflex-1": newArrayLog("pflex-1", powerflexStart).write(10, "csi", "volumes[v1]", v1Both, v1Other),
	}
	rep, err := checkRun(t, kubeLog(20), arrays)
	require.NoError(t, err)
	require.Len(t, rep.Violations, 1, "%s", rep)
	assert.Contains(t, rep.Violations[0].Problem, "no write cut")
}

func TestRegrantBetweenCutAndDeleteIsAViolation(t *testing.T) {
	arrays := map[string]*arrayLog{
		"pflex-1": newArrayLog("pflex-1", powerflexStart).
			write(10, "b", "volumes[v1]", v1Both, v1Other).
			write(15, "csi", "volumes[v1]", v1Other, v1Both),
	}
	rep, err := checkRun(t, kubeLog(20), arrays)
	require.NoError(t, err)
	require.Len(t, rep.Violations, 1, "%s", rep)
	assert.Contains(t, rep.Violations[0].Problem, "gave the node access again")

	// Cut again after the re-grant: fenced before the deletion.
	arrays["pflex-1"].write(17, "c", "volumes[v1]", v1Both, v1Other)
	rep, err = checkRun(t, kubeLog(20), arrays)
	require.NoError(t, err)
	require.True(t, rep.OK(), "%s", rep)
	assert.Equal(t, int64(3), rep.Cuts[0].Seq)
}

func TestAnotherNodesCutIsNotThisNodesFence(t *testing.T) {
	// worker-20's mapping goes; worker-2 (a prefix of its name) keeps its own.
	v1Mine := `{"id":"v1","name":"k8s-abc","systemId":"sys","mappings":[{"sdcId":"sdc2"}]}`
	arrays := map[string]*arrayLog{
		"pflex-1": newArrayLog("pflex-1", powerflexStart).write(10, "b", "volumes[v1]", v1Both, v1Mine),
		"pscale-1": newArrayLog("pscale-1", powerscaleStart).write(12, "b", "exports[1]",
			`{"id":1,"clients":["127.0.10.2","127.0.10.20"]}`, `{"id":1,"clients":["127.0.10.2"]}`),
	}
	rep, err := checkRun(t, kubeLog(20), arrays)
	require.NoError(t, err)
	require.Len(t, rep.Violations, 2, "%s", rep)
}

func TestArrayWithoutTheNodeNeedsNoCut(t *testing.T) {
	arrays := map[string]*arrayLog{
		"pscale-2": newArrayLog("pscale-2", `{"exports":[{"id":1,"clients":["127.0.10.20"]}]}`),
	}
	rep, err := checkRun(t, kubeLog(20), arrays)
	require.NoError(t, err)
	assert.True(t, rep.OK(), "%s", rep)
	assert.Empty(t, rep.Cuts)
	assert.Equal(t, 1, rep.Deletions)
}

func TestMissingBodiesAreNamed(t *testing.T) {
	kube := `{"stage":"ResponseComplete","verb":"create","user":{"username":"system:kube-scheduler"},"objectRef":{"resource":"pods","subresource":"binding","namespace":"db","name":"db-1"},"responseStatus":{"code":201}}` + "\n"
	_, err := checkRun(t, kube, map[string]*arrayLog{"a": newArrayLog("a", `{}`)})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "pods/binding at Request level")

	_, err = checkRun(t, kubeLog(20), map[string]*arrayLog{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "no array audit file")
}

func TestNamesNode(t *testing.T) {
	names := nodeNames("node-1.example.com", `{"csi-isilon.dellemc.com":"node-1.example.com=#=#=node-1.example.com=#=#=10.0.0.1","csi-unity.dellemc.com":"node-1,node-1.example.com"}`)
	for _, s := range []string{"node-1.example.com", "10.0.0.1", "csi-k8s-node-1.example.com", "node-1", "node-1.example.com:/ifs"} {
		assert.True(t, namesNode(s, names), s)
	}
	for _, s := range []string{"node-10.example.com", "10.0.0.11", "node-1-vol-1", "xnode-1"} {
		assert.False(t, namesNode(s, names), s)
	}
}
