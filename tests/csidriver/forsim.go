package csidriver

import (
	"context"
	"fmt"
	"hash/fnv"

	"github.com/fenced-project/fenced/tests/arraysim/powerflex"
	"github.com/fenced-project/fenced/tests/arraysim/powermax"
	"github.com/fenced-project/fenced/tests/arraysim/powerscale"
	"github.com/fenced-project/fenced/tests/arraysim/powerstore"
	"github.com/fenced-project/fenced/tests/arraysim/simcore"
	"github.com/fenced-project/fenced/tests/arraysim/unity"
)

// Emulated is an emulated driver controller serving one simulated array.
type Emulated struct {
	Controller
	// ArrayID is how the driver names the array in volume handles: what
	// fenced's array configuration must carry (powerflex.systemID,
	// powerstore.globalID, unity.arrayID, powerscale.clusterName,
	// powermax.symmetrixID).
	ArrayID string
	// Listener is the simulator's listener the controller talks to, tagged
	// for the audit log (Tag). Close it when done.
	Listener *simcore.Listener
}

// ListVolumesPublishedNodes is the emulated controller's, when its
// driver advertises LIST_VOLUMES_PUBLISHED_NODES; otherwise ok is false.
func (e *Emulated) ListVolumesPublishedNodes(ctx context.Context) (map[string][]string, bool, error) {
	if l, ok := e.Controller.(PublishedNodesLister); ok {
		return l.ListVolumesPublishedNodes(ctx)
	}
	return nil, false, nil
}

// Close stops the controller's listener.
func (e *Emulated) Close() error { return e.Listener.Close() }

// ForSim starts a tagged HTTPS listener (CA in certDir) for a simulator
// and the emulated controller of its family, configured as the driver's
// secret would be: the array's credentials (empty: the simulator's
// defaults) and its identifier as the array reports it. Families without
// an emulation yet return ErrUnsupported.
func ForSim(ctx context.Context, srv *simcore.Server, username, password, certDir string) (*Emulated, error) {
	return ForSimAs(ctx, srv, "", username, password, certDir)
}

// ForSimAs is ForSim for a driver installed under its own name (empty:
// the family's default name). Only csi-powerstore is emulated under
// another name: its name is set at install time (X_CSI_DRIVER_NAME, the
// driverName value of its Helm chart, beside nodeNamePrefix), so two
// installs with their own secrets serve their own arrays in one cluster,
// each under its own name.
func ForSimAs(ctx context.Context, srv *simcore.Server, driver, username, password, certDir string) (*Emulated, error) {
	if _, ps := srv.Family().(*powerstore.Sim); driver != "" && !ps {
		return nil, fmt.Errorf("emulated driver %q for array %s: only csi-powerstore is emulated under another name: %w",
			driver, srv.Name(), ErrUnsupported)
	}
	if username == "" {
		username, password = "admin", "Password123!"
		if _, ok := srv.Family().(*powermax.Sim); ok {
			username, password = "smc", "smc"
		}
	}
	l, err := Serve(srv, true, certDir)
	if err != nil {
		return nil, err
	}
	e := &Emulated{Listener: l}
	switch sim := srv.Family().(type) {
	case *powerflex.Sim:
		st := sim.State()
		if len(st.Systems) == 0 {
			err = fmt.Errorf("simulated PowerFlex has no system")
			break
		}
		e.ArrayID = st.Systems[0].ID
		e.Controller, err = NewPowerFlex(ctx, PowerFlexConfig{Endpoint: l.URL, CAFile: l.CAFile, Username: username,
			Password: password, SystemID: e.ArrayID, Version: st.Version})
	case *powerstore.Sim:
		var ps *PowerStore
		ps, err = NewPowerStore(PowerStoreConfig{Driver: driver, Endpoint: l.URL, CAFile: l.CAFile, Username: username,
			Password: password, GlobalID: "unknown", NASName: powerstore.DefaultNASName})
		if err != nil {
			break
		}
		// The driver's secret carries the global ID the array reports.
		cl, cerr := ps.c.GetCluster(ctx)
		if err = cerr; err != nil || cl.GlobalID == "" {
			err = fmt.Errorf("read the array's global ID: %w (%q)", err, cl.GlobalID)
			break
		}
		ps.cfg.GlobalID, e.ArrayID, e.Controller = cl.GlobalID, cl.GlobalID, ps
	case *unity.Sim:
		// The secret names a Unity by an ID of the operator's choosing,
		// by convention the serial number; the array does not report
		// one through gounity, so the emulation makes one up per array.
		e.ArrayID = UnityArrayID(srv.Name())
		e.Controller, err = NewUnity(ctx, UnityConfig{Endpoint: l.URL, Username: username, Password: password,
			ArrayID: e.ArrayID, Insecure: true})
	case *powerscale.Sim:
		// The secret's clusterName is the operator's name for the
		// cluster: the array's name in the fixture. goisilon takes no CA.
		e.ArrayID = srv.Name()
		e.Controller, err = NewPowerScale(ctx, PowerScaleConfig{Endpoint: l.URL, Username: username, Password: password,
			ClusterName: e.ArrayID, Insecure: true})
	case *powermax.Sim:
		// The driver's cluster prefix and port group are those the
		// fixture generated the nodes' hosts and masking views with.
		prefix := sim.ClusterPrefix()
		if prefix == "" {
			err = fmt.Errorf("simulated PowerMax generates no csi-powermax hosts (generate.clusterPrefix): %w", ErrUnsupported)
			break
		}
		e.ArrayID = sim.SymmetrixID()
		e.Controller, err = NewPowerMax(ctx, PowerMaxConfig{Endpoint: l.URL, CAFile: l.CAFile, Username: username,
			Password: password, SymmetrixID: e.ArrayID, ClusterPrefix: prefix, PortGroup: "csi-" + prefix + "-iscsi-PG"})
	default:
		err = fmt.Errorf("%T: %w", srv.Family(), ErrUnsupported)
	}
	if err != nil {
		_ = l.Close()
		return nil, fmt.Errorf("emulated driver for array %s: %w", srv.Name(), err)
	}
	return e, nil
}

// UnityArrayID is the array ID the emulation gives the simulated Unity
// named name in the driver's secret: a serial-number-like APM and 11
// digits derived from the name.
func UnityArrayID(name string) string {
	h := fnv.New64a()
	_, _ = h.Write([]byte(name))
	return fmt.Sprintf("APM%011d", h.Sum64()%100000000000)
}
