package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fenced-project/fenced/arrayclients"
	"github.com/fenced-project/fenced/tests/arraysim/fixture"
	"github.com/fenced-project/fenced/tests/arraysim/powerflex"
	"github.com/fenced-project/fenced/tests/arraysim/powerstore"
	"github.com/fenced-project/fenced/tests/arraysim/simcore"
	"github.com/fenced-project/fenced/tests/invariants"
	"github.com/fenced-project/fenced/tests/testbed"
)

// startPathLossSims serves PowerFlex and PowerStore simulators over HTTPS
// that know exactly the test bed's nodes, each node with volumes on both.
func startPathLossSims(t *testing.T, nodes []*testbed.Node) map[string]*productSim {
	t.Helper()
	var doc strings.Builder
	doc.WriteString("nodes:\n")
	for _, n := range nodes {
		s := n.Spec
		fmt.Fprintf(&doc, "  - {name: %s, ip: %s, fqdn: %s, machineID: %s, sdcGUID: %s, iqn: %q, wwpns: [%q]}\n",
			s.Name, s.IP, s.FQDN, s.MachineID, s.SDCGUID, s.IQN, s.WWPNs[0])
	}
	doc.WriteString(`arrays:
  - {name: pflex-1, family: powerflex, spec: {systems: [{id: 1a2b3c4d5e6f7a8b, name: sys-1}], perNode: {volumes: 2}}}
  - {name: pstore-1, family: powerstore, spec: {username: admin, password: pstore-secret, perNode: {volumes: 2}}}
`)
	fx, err := fixture.Parse([]byte(doc.String()))
	require.NoError(t, err, doc.String())
	out := map[string]*productSim{}
	for _, a := range fx.Arrays {
		var fam simcore.Family
		cfg := arrayclients.Config{Name: a.Name, RequestTimeout: 3 * time.Second}
		switch a.Family {
		case fixture.PowerFlex:
			s, err := powerflex.New(&a.Spec, fx.Nodes)
			require.NoError(t, err)
			fam = s
			cfg.Family, cfg.SystemID = arrayclients.PowerFlex, "1a2b3c4d5e6f7a8b"
			cfg.Username, cfg.Password = s.Credentials()
		case fixture.PowerStore:
			s, err := powerstore.New(&a.Spec, fx.Nodes)
			require.NoError(t, err)
			fam = s
			cfg.Family, cfg.Username, cfg.Password = arrayclients.PowerStore, "admin", "pstore-secret"
		}
		srv := simcore.New(a.Name, fam, nil)
		l, err := simcore.Serve(srv, "127.0.0.1:0", true, t.TempDir())
		require.NoError(t, err)
		t.Cleanup(func() { _ = l.Close() })
		cfg.Endpoint, cfg.CAFile = l.URL, l.CAFile
		out[a.Name] = &productSim{srv: srv, cfg: cfg}
	}
	return out
}

// simStates returns each simulator's state dump.
func simStates(t *testing.T, sims map[string]*productSim) map[string]json.RawMessage {
	t.Helper()
	out := map[string]json.RawMessage{}
	for name, s := range sims {
		b, err := json.Marshal(s.srv.Family().Snapshot())
		require.NoError(t, err)
		out[name] = b
	}
	return out
}

// placedAt returns the node a pod was on at t: its last placement at or
// before t ("" when none).
func placedAt(ps []invariants.Placement, namespace, name string, at time.Time) string {
	node := ""
	for _, p := range ps {
		if p.Resource == "pods" && p.Namespace == namespace && p.Name == name && !p.Time.After(at) {
			node = p.Node
		}
	}
	return node
}

// readKubeAudit parses the apiserver's audit log, leaving out a line still
// being written.
func readKubeAudit(t *testing.T, path string) []invariants.KubeEvent {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	if i := bytes.LastIndexByte(data, '\n'); i+1 < len(data) {
		data = data[:i+1]
	}
	evs, err := invariants.ParseKubeAudit(bytes.NewReader(data))
	require.NoError(t, err)
	return evs
}

// watchPlacements records where every pod and VolumeAttachment is, each
// time that changes, until the test ends; the returned function reads the
// placements so far.
func watchPlacements(t *testing.T, cp *testbed.ControlPlane) func() []invariants.Placement {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	var (
		mu   sync.Mutex
		out  []invariants.Placement
		last = map[string]string{}
		done = make(chan struct{})
	)
	record := func(resource, ns, name, node string) {
		key := resource + "/" + ns + "/" + name
		if node == "" || last[key] == node {
			return
		}
		last[key] = node
		out = append(out, invariants.Placement{Time: time.Now(), Resource: resource, Namespace: ns, Name: name, Node: node})
	}
	poll := func() {
		// A placement's time is when the list was answered: the object was
		// there then, maybe a poll interval earlier.
		pods, err := cp.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
		if err == nil {
			mu.Lock()
			for _, p := range pods.Items {
				record("pods", p.Namespace, p.Name, p.Spec.NodeName)
			}
			mu.Unlock()
		}
		vas, err := cp.Client.StorageV1().VolumeAttachments().List(ctx, metav1.ListOptions{})
		if err == nil {
			mu.Lock()
			listed := map[string]bool{}
			for _, v := range vas.Items {
				listed["volumeattachments//"+v.Name] = true
				record("volumeattachments", "", v.Name, v.Spec.NodeName)
			}
			for key, node := range last {
				if name, ok := strings.CutPrefix(key, "volumeattachments//"); ok && !listed[key] {
					delete(last, key)
					out = append(out, invariants.Placement{Time: time.Now(), Resource: "volumeattachments", Name: name, Node: node, Deleted: true})
				}
			}
			mu.Unlock()
		}
	}
	poll()
	go func() {
		defer close(done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				poll()
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return func() []invariants.Placement {
		mu.Lock()
		defer mu.Unlock()
		return append([]invariants.Placement(nil), out...)
	}
}
