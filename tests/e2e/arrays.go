package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sort"

	"go.yaml.in/yaml/v3"

	"github.com/fenced-project/fenced/tests/arraysim/families"
	"github.com/fenced-project/fenced/tests/arraysim/fixture"
	"github.com/fenced-project/fenced/tests/arraysim/simcore"
	"github.com/fenced-project/fenced/tests/csidriver"
	"github.com/fenced-project/fenced/tests/testbed"
)

// MakeFixture builds a fixture from the test bed's nodes and a YAML list of
// arrays (the fixture's arrays section), so that nodes and arrays agree on
// every identity.
func MakeFixture(nodes []testbed.NodeSpec, arraysYAML []byte) (*fixture.Fixture, error) {
	fx := &fixture.Fixture{}
	for _, n := range nodes {
		fx.Nodes = append(fx.Nodes, fixture.Node{Name: n.Name, IP: n.IP, FQDN: n.FQDN, MachineID: n.MachineID,
			SDCGUID: n.SDCGUID, NVMeHost: n.NVMeHost, NQN: n.NQN, IQN: n.IQN, WWPNs: n.WWPNs})
	}
	if err := yaml.Unmarshal(arraysYAML, &fx.Arrays); err != nil {
		return nil, fmt.Errorf("decode the arrays of the fixture: %w", err)
	}
	if err := fx.Validate(); err != nil {
		return nil, fmt.Errorf("fixture: %w", err)
	}
	return fx, nil
}

// Array is one simulated array with a listener per replica.
type Array struct {
	Name   string
	Family string
	// Server is the simulator: faults, audit log, state.
	Server *simcore.Server
	// Listeners maps a replica ID to the listener only that replica uses.
	Listeners map[string]*simcore.Listener
	// Username and Password are the credentials the simulator accepts.
	Username, Password string
	// Spec is the fixture spec, for family options (system ID, symmetrix ID).
	Spec map[string]any
	// Driver is the emulated CSI driver controller of the array's family
	// (nil for families without an emulation yet): the test bed's attacher
	// publishes through it and StatefulSets get their volumes from it.
	Driver *csidriver.Emulated
}

// StartDrivers starts the emulated CSI driver controller of every array
// whose family has one, on a listener of its own tagged "csi" in the
// audit log (certificates in certDir), and registers them with the
// control planes.
func StartDrivers(ctx context.Context, arrays map[string]*Array, certDir string, cps ...*testbed.ControlPlane) error {
	for _, a := range sortedArrays(arrays) {
		e, err := csidriver.ForSim(ctx, a.Server, a.Username, a.Password, filepath.Join(certDir, a.Name+"-csi"))
		if errors.Is(err, csidriver.ErrUnsupported) {
			continue
		}
		if err != nil {
			return fmt.Errorf("array %s: %w", a.Name, err)
		}
		a.Driver = e
		for _, cp := range cps {
			cp.RegisterCSIController(e)
		}
	}
	return nil
}

// tagged serves h with the request's remote address prefixed by tag, so
// the simulator's audit log names the replica behind every request.
func tagged(tag string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.RemoteAddr = tag + "/" + r.RemoteAddr
		h.ServeHTTP(w, r)
	})
}

// StartArrays starts a simulator per fixture array and, for each replica,
// an HTTPS listener (certificate written into certDir) tagged with the
// replica's ID.
func StartArrays(fx *fixture.Fixture, replicas []string, certDir string, logger *slog.Logger) (map[string]*Array, error) {
	out := map[string]*Array{}
	closeAll := func() {
		for _, a := range out {
			a.Close()
		}
	}
	for _, fa := range fx.Arrays {
		fam, err := families.New(fa, fx.Nodes)
		if err != nil {
			closeAll()
			return nil, err
		}
		a := &Array{Name: fa.Name, Family: fa.Family, Server: simcore.New(fa.Name, fam, logger),
			Listeners: map[string]*simcore.Listener{}}
		a.Server.SetAuditLimit(0)
		if err := fa.Spec.Decode(&a.Spec); err != nil {
			closeAll()
			return nil, fmt.Errorf("arrays[%s].spec: %w", fa.Name, err)
		}
		a.Username, _ = a.Spec["username"].(string)
		a.Password, _ = a.Spec["password"].(string)
		out[fa.Name] = a
		for _, r := range replicas {
			dir := filepath.Join(certDir, fa.Name+"-"+r)
			if err := os.MkdirAll(dir, 0o755); err != nil {
				closeAll()
				return nil, fmt.Errorf("array %s: %w", fa.Name, err)
			}
			l, err := simcore.Serve(tagged(r, a.Server), "127.0.0.1:0", true, dir)
			if err != nil {
				closeAll()
				return nil, fmt.Errorf("array %s, listener of %s: %w", fa.Name, r, err)
			}
			a.Listeners[r] = l
		}
	}
	return out, nil
}

// Close stops the array's listeners and closes its audit file.
func (a *Array) Close() {
	for _, l := range a.Listeners {
		_ = l.Close()
	}
	if a.Driver != nil {
		_ = a.Driver.Close()
	}
	_ = a.Server.CloseAuditFile()
}

// AuditFileName is the name of an array's audit file in an arrays
// directory (RecordAudits): <array>.jsonl.
func AuditFileName(array string) string { return array + ".jsonl" }

// RecordAudits makes every simulator write its audit as JSON lines into
// dir/<array>.jsonl (simcore.Server.SetAuditFile; the format is in
// tests/README.md), creating dir.
func RecordAudits(arrays map[string]*Array, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create the arrays' audit directory: %w", err)
	}
	for _, a := range sortedArrays(arrays) {
		if err := a.Server.SetAuditFile(filepath.Join(dir, AuditFileName(a.Name))); err != nil {
			return err
		}
	}
	return nil
}

// State returns the simulator's state as JSON.
func (a *Array) State() (json.RawMessage, error) {
	b, err := json.Marshal(a.Server.Family().Snapshot())
	if err != nil {
		return nil, fmt.Errorf("array %s: state: %w", a.Name, err)
	}
	return b, nil
}

// sortedArrays returns the arrays by name.
func sortedArrays(m map[string]*Array) []*Array {
	out := make([]*Array, 0, len(m))
	for _, a := range m {
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
