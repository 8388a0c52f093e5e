package stonith

import (
	"encoding/json"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/arrayclients"
	"github.com/fenced-project/fenced/arrayclients/all"
	"github.com/fenced-project/fenced/cluster/ledger"
	"github.com/fenced-project/fenced/tests/arraysim/families"
	"github.com/fenced-project/fenced/tests/arraysim/fixture"
	"github.com/fenced-project/fenced/tests/arraysim/simcore"
)

// Array identifiers the variant fixtures use, as each driver's secret (and
// so its volume handles) names the arrays.
const (
	vbPFlexSystem = "1a2b3c4d5e6f7a8b"
	vbPMaxSym     = "000197900046"
	vbUnityArray  = "APM00213404195"
	vbPSGlobal1   = "PS4a5b6c7d8e9f"
	vbPSGlobal2   = "PS9f8e7d6c5b4a"
	vbPScale      = "pscale-cluster-1"
	vbPMaxPrefix  = "TST"
)

// variantBed is one row of TestDriverNamingVariants: the simulated arrays of
// a fixture, serving the objects a Dell CSI driver created for one naming
// variant, with an adapter configuration for each; the node as its CSINode
// shows it; the volumes Kubernetes attached to it.
type variantBed struct {
	t *testing.T
	// sims are the simulators by fixture array name.
	sims map[string]simcore.Family
	// cfgs are the adapters' configurations by array name; a row may change
	// them or delete one (an array the configuration does not list).
	cfgs map[string]*arrayclients.Config
	// node is the Kubernetes node with its CSINode IDs.
	node arrayclients.Node
	// vols are the node's volumes as Kubernetes shows them.
	vols []arrayclients.KubeVolume
	// drivers maps CSI driver names to families (clusters[].drivers); nil
	// is Dell's default names.
	drivers map[string]arrayclients.Family
}

// newVariantBed serves every array of the fixture on loopback over TLS and
// prepares an adapter configuration for each that names the array as the
// fixtures' handles do.
func newVariantBed(t *testing.T, doc string) *variantBed {
	t.Helper()
	fx, err := fixture.Parse([]byte(doc))
	require.NoError(t, err)
	b := &variantBed{t: t, sims: map[string]simcore.Family{}, cfgs: map[string]*arrayclients.Config{}}
	for _, a := range fx.Arrays {
		fam, err := families.New(a, fx.Nodes)
		require.NoError(t, err)
		srv := simcore.New(a.Name, fam, nil)
		l, err := simcore.Serve(srv, "127.0.0.1:0", true, t.TempDir())
		require.NoError(t, err)
		t.Cleanup(func() { _ = l.Close() })
		cfg := &arrayclients.Config{Name: a.Name, Family: arrayclients.Family(a.Family), Endpoint: l.URL,
			CAFile: l.CAFile, Username: "admin", Password: "Password123!", RequestTimeout: 5 * time.Second}
		switch cfg.Family {
		case arrayclients.PowerFlex:
			cfg.SystemID, cfg.ArrayIDs = vbPFlexSystem, []string{vbPFlexSystem}
		case arrayclients.PowerStore:
			cfg.ArrayIDs = []string{vbPSGlobal1}
			if a.Name == "pstore-2" {
				cfg.ArrayIDs = []string{vbPSGlobal2}
			}
		case arrayclients.PowerMax:
			cfg.Username, cfg.Password = "smc", "smc"
			cfg.SymmetrixID, cfg.ArrayIDs, cfg.PowerMaxClusterPrefix = vbPMaxSym, []string{vbPMaxSym}, vbPMaxPrefix
		case arrayclients.Unity:
			// gounity trusts only the system pool: a test array needs insecure.
			cfg.CAFile, cfg.Insecure, cfg.ArrayIDs = "", true, []string{vbUnityArray}
		case arrayclients.PowerScale:
			cfg.CAFile, cfg.Insecure, cfg.ArrayIDs = "", true, []string{vbPScale}
		}
		b.sims[a.Name] = fam
		b.cfgs[a.Name] = cfg
	}
	return b
}

// snapshot decodes an array's snapshot into out.
func (b *variantBed) snapshot(array string, out any) {
	b.t.Helper()
	sim, ok := b.sims[array]
	require.True(b.t, ok, "no array %s in the fixture", array)
	buf, err := json.Marshal(sim.Snapshot())
	require.NoError(b.t, err)
	require.NoError(b.t, json.Unmarshal(buf, out))
}

// objectID is the ID of the object of the given kind ("volumes", "luns",
// "exports", ... as the family's snapshot names its lists) whose name (or
// first path) is name.
func (b *variantBed) objectID(array, kind, name string) string {
	b.t.Helper()
	var snap map[string]json.RawMessage
	b.snapshot(array, &snap)
	var objs []struct {
		ID    json.RawMessage `json:"id"`
		Name  string          `json:"name"`
		Paths []string        `json:"paths"`
	}
	require.NoError(b.t, json.Unmarshal(snap[kind], &objs), "%s of %s", kind, array)
	for _, o := range objs {
		if o.Name == name || (len(o.Paths) > 0 && o.Paths[0] == name) {
			var s string
			if json.Unmarshal(o.ID, &s) == nil {
				return s
			}
			return string(o.ID) // a number (PowerScale export IDs)
		}
	}
	b.t.Fatalf("array %s has no %s named %q", array, kind, name)
	return ""
}

// attach adds a volume Kubernetes attached to the node.
func (b *variantBed) attach(pv, driver, handle string) {
	b.vols = append(b.vols, arrayclients.KubeVolume{PV: pv, Attachment: "csi-" + pv, Driver: driver, Handle: handle, Attached: true})
}

// plan builds the real adapters, learns the node's identities as the
// daemon does (cmd/fenced ledgerview learn: each array resolved with the
// CSINode ID of its driver instance, ErrNoIdentity recorded as not found,
// ErrAmbiguousIdentity as ambiguous) into the real ledger, and asks the
// Controller what a fence of the node would cut.
func (b *variantBed) plan() NodePlan {
	t := b.t
	t.Helper()
	var cfgs []arrayclients.Config
	for _, name := range slices.Sorted(maps.Keys(b.cfgs)) {
		cfgs = append(cfgs, *b.cfgs[name])
	}
	reg, err := all.New(cfgs, arrayclients.Options{})
	require.NoError(t, err)
	drivers := b.drivers
	if drivers == nil {
		drivers = arrayclients.DefaultDrivers()
	}
	ids := map[string]arrayclients.Identity{}
	notFound, ambiguous := map[string]string{}, map[string]string{}
	arrays := map[string]Array{}
	for _, a := range reg.Adapters() {
		arrays[a.Name()] = a
		id, err := a.Resolve(t.Context(), b.node.ForInstance(a.Family(), arrayclients.UnnamedInstance(a.Family(), drivers)))
		switch {
		case err == nil:
			ids[a.Name()] = id
		case errors.Is(err, arrayclients.ErrNoIdentity):
			notFound[a.Name()] = err.Error()
		case errors.Is(err, arrayclients.ErrAmbiguousIdentity):
			ambiguous[a.Name()] = err.Error()
		default:
			require.NoError(t, err, "resolve %s on %s", b.node.Name, a.Name())
		}
	}
	t.Logf("identities %v; not found %v; ambiguous %v", ids, notFound, ambiguous)
	g := newFakeGroup()
	g.must(t, &ledger.SetIdentities{Meta: g.meta(), Cluster: "c1", Node: b.node.Name, BootID: "boot-1",
		Identities: ids, NotFound: nilIfEmpty(notFound), Ambiguous: nilIfEmpty(ambiguous)})
	fp := newFakeFootprints()
	for _, v := range b.vols {
		fp.add(b.node.Name, v)
	}
	log := &opLog{}
	c, err := New(Config{ReplicaID: "r1", Ledger: g.fsm, Arrays: arrays, Logger: slog.New(slog.DiscardHandler),
		ArrayTimeout: 5 * time.Second, ArrayAttempts: 1,
		Clusters: []ClusterConfig{{Name: "c1", Kube: newFakeKube(log), Footprints: fp, Drivers: b.drivers}}})
	require.NoError(t, err)
	p, err := c.PlanNode(t.Context(), PlanRequest{Cluster: "c1", Node: b.node.Name})
	require.NoError(t, err)
	return p
}

func nilIfEmpty(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	return m
}
