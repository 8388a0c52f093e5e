package powerflex_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	sio "github.com/dell/goscaleio"
	siotypes "github.com/dell/goscaleio/types/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/tests/arraysim/fixture"
	"github.com/fenced-project/fenced/tests/arraysim/powerflex"
	"github.com/fenced-project/fenced/tests/arraysim/simcore"
)

const testFixture = `
nodes:
  - {name: worker-1, ip: 127.0.10.1, sdcGUID: 6A1B0001-0000-4000-8000-000000000001}
  - {name: worker-2, ip: 127.0.10.2, sdcGUID: 6A1B0002-0000-4000-8000-000000000002}
  - {name: worker-3, ip: 127.0.10.3}
arrays:
  - name: pflex-1
    family: powerflex
    spec:
      systems: [{id: 1a2b3c4d5e6f7a8b, name: sys-1}]
      perNode: {volumes: 3, limitIops: 500, limitBwInMbps: 10}
      volumes:
        - name: shared-vol
          mappings:
            - {sdc: worker-1, accessMode: ReadOnly}
            - {sdc: worker-2, accessMode: ReadOnly}
`

type bed struct {
	sim    *powerflex.Sim
	srv    *simcore.Server
	url    string
	caFile string
	fx     *fixture.Fixture
}

func newBed(t testing.TB, useTLS bool) *bed {
	t.Helper()
	fx, err := fixture.Parse([]byte(testFixture))
	require.NoError(t, err)
	sim, err := powerflex.New(&fx.Arrays[0].Spec, fx.Nodes)
	require.NoError(t, err)
	srv := simcore.New("pflex-1", sim, nil)
	l, err := simcore.Serve(srv, "127.0.0.1:0", useTLS, t.TempDir())
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	return &bed{sim: sim, srv: srv, url: l.URL, caFile: l.CAFile, fx: fx}
}

// client logs a real goscaleio client in. goscaleio keeps its version
// header in a package variable, so tests create clients one at a time.
func (b *bed) client(t testing.TB) *sio.Client {
	t.Helper()
	c, err := sio.NewClientWithArgs(b.url, "", 5, false, false, b.caFile)
	require.NoError(t, err)
	user, pass := b.sim.Credentials()
	_, err = c.Authenticate(&sio.ConfigConnect{Endpoint: b.url, Username: user, Password: pass})
	require.NoError(t, err)
	return c
}

func system(t *testing.T, c *sio.Client) *sio.System {
	t.Helper()
	sys, err := c.FindSystem("1a2b3c4d5e6f7a8b", "", "")
	require.NoError(t, err)
	return sys
}

func requireSioError(t *testing.T, err error, status int, msgPart string) {
	t.Helper()
	require.Error(t, err)
	var e *siotypes.Error
	require.ErrorAs(t, err, &e, "want *types.Error, got %T: %v", err, err)
	assert.Equal(t, status, e.HTTPStatusCode)
	assert.Contains(t, e.Message, msgPart)
}

func TestFenceRoundTripWithRealClient(t *testing.T) {
	for _, useTLS := range []bool{false, true} {
		t.Run(map[bool]string{false: "http", true: "https"}[useTLS], func(t *testing.T) {
			b := newBed(t, useTLS)
			before := b.sim.State()
			c := b.client(t)
			assert.Equal(t, "4.5", c.GetConfigConnect().Version)
			sys := system(t, c)

			n, _ := b.fx.Node("worker-1")
			sdc, err := sys.FindSdc("SdcGUID", n.CSINodeIDs("")[fixture.DriverPowerFlex])
			require.NoError(t, err)
			assert.Equal(t, "worker-1", sdc.Sdc.Name)
			assert.Equal(t, "Connected", sdc.Sdc.MdmConnectionState)
			assert.Equal(t, []string{"127.0.10.1"}, sdc.Sdc.SdcIPs)
			id, err := sys.GetSdcIDByIP("127.0.10.1")
			require.NoError(t, err)
			assert.Equal(t, sdc.Sdc.ID, id)

			vols, err := sdc.GetVolume()
			require.NoError(t, err)
			require.Len(t, vols, 4, "three own volumes and the shared one")
			type rec struct {
				vol, mode string
				iops, bw  int
			}
			var plan []rec
			for _, v := range vols {
				for _, m := range v.MappedSdcInfo {
					if m.SdcID == sdc.Sdc.ID {
						plan = append(plan, rec{v.ID, m.AccessMode, m.LimitIops, m.LimitBwInMbps})
					}
				}
			}
			require.Len(t, plan, 4)

			stats, err := sdc.GetStatistics()
			require.NoError(t, err)
			assert.Positive(t, stats.UserDataReadBwc.NumOccured+stats.UserDataWriteBwc.NumOccured)

			for _, p := range plan {
				v := sio.NewVolume(c)
				v.Volume.ID = p.vol
				require.NoError(t, v.UnmapVolumeSdc(&siotypes.UnmapVolumeSdcParam{SdcID: sdc.Sdc.ID, IgnoreScsiInitiators: "TRUE"}))
			}
			vols, err = sdc.GetVolume()
			require.NoError(t, err)
			assert.Empty(t, vols, "fenced: nothing mapped")
			other, _ := b.sim.SDCID("worker-2")
			assert.Len(t, b.sim.MappedVolumes(other), 4, "worker-2 untouched")

			for _, p := range plan {
				v := sio.NewVolume(c)
				v.Volume.ID = p.vol
				require.NoError(t, v.MapVolumeSdc(&siotypes.MapVolumeSdcParam{SdcID: sdc.Sdc.ID, AllowMultipleMappings: "TRUE", AccessMode: p.mode}))
				if p.iops != 0 || p.bw != 0 {
					require.NoError(t, v.SetMappedSdcLimits(&siotypes.SetMappedSdcLimitsParam{
						SdcID: sdc.Sdc.ID, IopsLimit: strconv.Itoa(p.iops), BandwidthLimitInKbps: strconv.Itoa(p.bw * 1024),
					}))
				}
			}
			assert.Equal(t, before, b.sim.State(), "unfence restores the exact state")
			assert.Len(t, b.srv.AuditWrites(), 4+4+3)
		})
	}
}

func TestRepeatsBehaveLikeTheArray(t *testing.T) {
	b := newBed(t, false)
	c := b.client(t)
	sdcID, _ := b.sim.SDCID("worker-1")
	volID, ok := b.sim.VolumeID("worker-1-vol-0")
	require.True(t, ok)
	v := sio.NewVolume(c)
	v.Volume.ID = volID

	err := v.MapVolumeSdc(&siotypes.MapVolumeSdcParam{SdcID: sdcID, AllowMultipleMappings: "TRUE", AccessMode: "ReadWrite"})
	requireSioError(t, err, 500, "already mapped to this SDC")

	require.NoError(t, v.UnmapVolumeSdc(&siotypes.UnmapVolumeSdcParam{SdcID: sdcID, IgnoreScsiInitiators: "TRUE"}))
	err = v.UnmapVolumeSdc(&siotypes.UnmapVolumeSdcParam{SdcID: sdcID, IgnoreScsiInitiators: "TRUE"})
	requireSioError(t, err, 500, "not mapped to SDC")

	err = v.SetMappedSdcLimits(&siotypes.SetMappedSdcLimitsParam{SdcID: sdcID, IopsLimit: "10"})
	requireSioError(t, err, 500, "not mapped to SDC")

	other, _ := b.sim.SDCID("worker-2")
	err = v.MapVolumeSdc(&siotypes.MapVolumeSdcParam{SdcID: sdcID, AccessMode: "ReadWrite"})
	require.NoError(t, err, "first mapping needs no allowMultipleMappings")
	err = v.MapVolumeSdc(&siotypes.MapVolumeSdcParam{SdcID: other, AccessMode: "ReadWrite"})
	requireSioError(t, err, 500, "Only a single SDC")

	err = v.SetMappedSdcLimits(&siotypes.SetMappedSdcLimitsParam{SdcID: sdcID, BandwidthLimitInKbps: "1000"})
	requireSioError(t, err, 500, "multiple of 1024")
	assert.Len(t, b.srv.AuditWrites(), 2, "failed actions change nothing")
}

func TestNotFoundAndBadRequest(t *testing.T) {
	b := newBed(t, false)
	c := b.client(t)
	sys := system(t, c)

	_, err := sys.GetSdcByID("00000000deadbeef")
	requireSioError(t, err, 500, "Could not find the SDC")
	_, err = sys.GetSdcIDByIP("127.9.9.9")
	requireSioError(t, err, 500, "Could not find the SDC")
	_, err = sys.FindSdc("SdcGUID", "no-such-guid")
	require.EqualError(t, err, "Couldn't find SDC")

	v := sio.NewVolume(c)
	v.Volume.ID = "00000000deadbeef"
	err = v.UnmapVolumeSdc(&siotypes.UnmapVolumeSdcParam{SdcID: "x"})
	requireSioError(t, err, 500, "Could not find the volume")

	_, err = c.FindSystem("ffffffffffffffff", "nope", "")
	require.Error(t, err)

	sdcID, _ := b.sim.SDCID("worker-1")
	v.Volume.ID, _ = b.sim.VolumeID("worker-2-vol-0")
	err = v.MapVolumeSdc(&siotypes.MapVolumeSdcParam{SdcID: sdcID, AllowMultipleMappings: "TRUE", AccessMode: "Bogus"})
	requireSioError(t, err, 400, "Request message is not valid")
	assert.Empty(t, b.srv.AuditWrites())
}

func TestAuthentication(t *testing.T) {
	b := newBed(t, false)
	c, err := sio.NewClientWithArgs(b.url, "", 5, true, false, "")
	require.NoError(t, err)
	_, err = c.Authenticate(&sio.ConfigConnect{Endpoint: b.url, Username: "admin", Password: "wrong"})
	requireSioError(t, err, 401, "Unauthorized")
	assert.Equal(t, 0, b.sim.Logins())

	c = b.client(t)
	require.Equal(t, 1, b.sim.Logins())
	sys := system(t, c)
	b.sim.ExpireSessions()
	sdcs, err := sys.GetSdc()
	require.NoError(t, err, "a 401 with a JSON body makes the client log in again and retry")
	assert.Len(t, sdcs, 2)
	assert.Equal(t, 2, b.sim.Logins())

	// An injected 401 carries the array's JSON body: one re-login, one retry.
	b.srv.AddFault(simcore.Fault{Kind: simcore.FaultError, Status: 401, Path: "/relationships/Sdc$", Count: 1})
	_, err = sys.GetSdc()
	require.NoError(t, err)
	assert.Equal(t, 3, b.sim.Logins())

	// A 401 that persists after the re-login reaches the caller.
	id := b.srv.AddFault(simcore.Fault{Kind: simcore.FaultError, Status: 401, Path: "/relationships/Sdc$"})
	_, err = sys.GetSdc()
	requireSioError(t, err, 401, "Unauthorized")
	assert.Equal(t, 4, b.sim.Logins(), "exactly one re-login per call")
	b.srv.RemoveFault(id)
}

func TestFaultsReachTheClient(t *testing.T) {
	b := newBed(t, false)
	c := b.client(t)
	sys := system(t, c)
	sdcPath := "/relationships/Sdc$"

	b.srv.AddFault(simcore.Fault{Kind: simcore.FaultError, Status: 503, Message: "busy", Path: sdcPath, Count: 1})
	_, err := sys.GetSdc()
	requireSioError(t, err, 503, "busy")

	// Go's transport retries an idempotent request once when a reused
	// connection is reset, so a lasting reset is what reaches the caller.
	id := b.srv.AddFault(simcore.Fault{Kind: simcore.FaultReset, Path: sdcPath})
	_, err = sys.GetSdc()
	require.Error(t, err)
	assert.NotErrorAs(t, err, new(*siotypes.Error), "a reset is a transport error")
	b.srv.RemoveFault(id)

	b.srv.AddFault(simcore.Fault{Kind: simcore.FaultMalformed, Path: sdcPath, Count: 1})
	_, err = sys.GetSdc()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "unexpected EOF")

	b.srv.AddFault(simcore.Fault{Kind: simcore.FaultHang, Path: sdcPath, Count: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	c.WithContext(ctx)
	_, err = sys.GetSdc()
	require.Error(t, err)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, time.Since(start), 5*time.Second, "bounded by the context, not the hang")

	b.srv.AddFault(simcore.Fault{Kind: simcore.FaultLatency, Latency: 50 * time.Millisecond, Path: sdcPath, Count: 1})
	sdcs, err := sys.GetSdc()
	require.NoError(t, err)
	assert.Len(t, sdcs, 2)
	assert.Empty(t, b.srv.Faults())
}

func TestHangBoundedByClientTimeout(t *testing.T) {
	b := newBed(t, false)
	c, err := sio.NewClientWithArgs(b.url, "", 1, true, false, "")
	require.NoError(t, err)
	user, pass := b.sim.Credentials()
	_, err = c.Authenticate(&sio.ConfigConnect{Username: user, Password: pass})
	require.NoError(t, err)
	b.srv.AddFault(simcore.Fault{Kind: simcore.FaultHang, Count: 1})
	start := time.Now()
	_, err = c.GetSystems()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "Client.Timeout")
	assert.Less(t, time.Since(start), 10*time.Second)
}

func TestSignals(t *testing.T) {
	b := newBed(t, false)
	c := b.client(t)
	sys := system(t, c)
	require.NoError(t, b.sim.SetSignals("6a1b0001-0000-4000-8000-000000000001",
		simcore.Signals{Connected: simcore.Bool(false), IOActive: simcore.Bool(false)}))
	sdc, err := sys.FindSdc("Name", "worker-1")
	require.NoError(t, err)
	assert.Equal(t, "Disconnected", sdc.Sdc.MdmConnectionState)
	stats, err := sdc.GetStatistics()
	require.NoError(t, err)
	assert.Zero(t, stats.UserDataReadBwc.NumOccured+stats.UserDataWriteBwc.NumOccured)
	assert.Equal(t, 4, stats.NumOfMappedVolumes)
	metrics, err := sdc.GetVolumeMetrics()
	require.NoError(t, err)
	assert.Len(t, metrics, 4)

	err = b.sim.SetSignals("worker-9", simcore.Signals{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "worker-9")
	assert.Empty(t, b.srv.AuditWrites(), "signals are not array writes")
}

func TestBearerAndBasicTokens(t *testing.T) {
	b := newBed(t, false)
	// Version 3.6 makes the client send Basic ":token".
	c, err := sio.NewClientWithArgs(b.url, "3.6", 5, true, false, "")
	require.NoError(t, err)
	user, pass := b.sim.Credentials()
	_, err = c.Authenticate(&sio.ConfigConnect{Username: user, Password: pass})
	require.NoError(t, err)
	systems, err := c.GetSystems()
	require.NoError(t, err)
	require.Len(t, systems, 1)
	assert.Equal(t, "sys-1", systems[0].Name)

	req, _ := http.NewRequest(http.MethodGet, b.url+"/api/types/System/instances", nil)
	req.Header.Set("Authorization", "Bearer not-a-token")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 401, resp.StatusCode)
}

func TestConcurrentClients(t *testing.T) {
	b := newBed(t, false)
	clients := make([]*sio.Client, 4)
	for i := range clients {
		clients[i] = b.client(t)
	}
	before := b.sim.State()
	var wg sync.WaitGroup
	for i, c := range clients {
		node := []string{"worker-1", "worker-2", "worker-1", "worker-2"}[i]
		sdcID, _ := b.sim.SDCID(node)
		vol, _ := b.sim.VolumeID(fmt.Sprintf("%s-vol-%d", node, i/2))
		wg.Go(func() {
			v := sio.NewVolume(c)
			v.Volume.ID = vol
			for range 10 {
				assert.NoError(t, v.UnmapVolumeSdc(&siotypes.UnmapVolumeSdcParam{SdcID: sdcID}))
				assert.NoError(t, v.MapVolumeSdc(&siotypes.MapVolumeSdcParam{SdcID: sdcID, AccessMode: "ReadWrite", AllowMultipleMappings: "TRUE"}))
				assert.NoError(t, v.SetMappedSdcLimits(&siotypes.SetMappedSdcLimitsParam{SdcID: sdcID, IopsLimit: "500", BandwidthLimitInKbps: "10240"}))
			}
		})
	}
	wg.Wait()
	assert.Equal(t, before, b.sim.State())
}

func TestSpecErrors(t *testing.T) {
	nodes := []fixture.Node{{Name: "a", IP: "127.0.0.1", SDCGUID: "G1"}}
	tcs := []struct {
		name string
		spec powerflex.Spec
		want string
	}{
		{"bad system id", powerflex.Spec{Systems: []powerflex.SystemSpec{{ID: "xyz"}}}, "systems[0].id"},
		{"sdc without guid", powerflex.Spec{SDCs: []powerflex.SDCSpec{{Name: "s", IPs: []string{"127.0.0.2"}}}}, "sdcs[0]: guid: required"},
		{"sdc without ip", powerflex.Spec{SDCs: []powerflex.SDCSpec{{GUID: "G2"}}}, "sdcs[0]: ips"},
		{"mapping to unknown sdc", powerflex.Spec{Volumes: []powerflex.VolumeSpec{{Name: "v", Mappings: []powerflex.MappingSpec{{SDC: "zz"}}}}}, `volumes[0]: mappings[0].sdc: "zz" matches 0 SDCs`},
		{"bad access mode", powerflex.Spec{PerNode: &powerflex.PerNodeSpec{Volumes: 1, AccessMode: "RW"}}, `accessMode: "RW"`},
		{"duplicate volume", powerflex.Spec{Volumes: []powerflex.VolumeSpec{{Name: "v"}, {Name: "v"}}}, "volumes[1]"},
		{"negative per-node volumes", powerflex.Spec{PerNode: &powerflex.PerNodeSpec{Volumes: -1}}, "perNode: volumes"},
		{"nvme host without nqn", powerflex.Spec{SDCs: []powerflex.SDCSpec{{Name: "h", HostType: powerflex.HostTypeNVMe}}}, "sdcs[0]: name and nqn"},
		{"nvme host with guid", powerflex.Spec{SDCs: []powerflex.SDCSpec{{Name: "h", NQN: "nqn.x", GUID: "G3", HostType: powerflex.HostTypeNVMe}}}, "sdcs[0]: guid and ips"},
		{"sdc with nqn", powerflex.Spec{SDCs: []powerflex.SDCSpec{{GUID: "G3", IPs: []string{"127.0.0.3"}, NQN: "nqn.x"}}}, "sdcs[0]: nqn"},
		{"unknown host type", powerflex.Spec{SDCs: []powerflex.SDCSpec{{GUID: "G3", IPs: []string{"127.0.0.3"}, HostType: "Nvme"}}}, `sdcs[0]: hostType: "Nvme"`},
	}
	for _, tc := range tcs {
		t.Run(tc.name, func(t *testing.T) {
			_, err := powerflex.NewFromSpec(tc.spec, nodes)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	fx, err := fixture.Parse([]byte("arrays: [{name: p, family: powerflex, spec: {sdcz: []}}]"))
	require.NoError(t, err)
	_, err = powerflex.New(&fx.Arrays[0].Spec, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "sdcz")
}

func newBedB(b *testing.B) *bed {
	bd := newBed(b, os.Getenv("PFLEX_BENCH_HTTP") == "")
	bd.srv.SetAuditLimit(10000)
	return bd
}

func (b *bed) clientB(tb testing.TB) *sio.Client { return b.client(tb) }

func itoa(n int) string { return strconv.Itoa(n) }

// An NVMe/TCP host (PowerFlex >= 4.0) is listed with the SDCs, typed
// NVMeHost, with an NQN and no GUID: goscaleio lists it as an NVMe host
// and csi-vxflexos's controller finds it by name (FindSdc("Name", nodeID)).
func TestNVMeHostListedWithSDCs(t *testing.T) {
	nvme := powerflex.SDCSpec{Name: "127.0.10.4-4f2d9b1c7e0a5d3b8c6", HostType: powerflex.HostTypeNVMe,
		NQN: "nqn.2014-08.org.nvmexpress:uuid:worker-4"}
	sim, err := powerflex.NewFromSpec(powerflex.Spec{
		Systems: []powerflex.SystemSpec{{ID: "1a2b3c4d5e6f7a8b"}}, SDCs: []powerflex.SDCSpec{nvme},
		Volumes: []powerflex.VolumeSpec{{Name: "nvme-vol", Mappings: []powerflex.MappingSpec{{SDC: nvme.Name}}}},
	}, nil)
	require.NoError(t, err)
	srv := simcore.New("pflex-1", sim, nil)
	l, err := simcore.Serve(srv, "127.0.0.1:0", false, t.TempDir())
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	b := &bed{sim: sim, srv: srv, url: l.URL}
	c := b.client(t)
	sys := system(t, c)

	hosts, err := sys.GetAllNvmeHosts()
	require.NoError(t, err)
	require.Len(t, hosts, 1)
	assert.Equal(t, nvme.Name, hosts[0].Name)
	assert.Equal(t, nvme.NQN, hosts[0].Nqn)

	found, err := sys.FindSdc("Name", nvme.Name)
	require.NoError(t, err)
	assert.Equal(t, "NVMeHost", found.Sdc.HostType)
	assert.Empty(t, found.Sdc.SdcGUID)

	vols, err := c.GetVolume("", "", "", "nvme-vol", false)
	require.NoError(t, err)
	require.Len(t, vols, 1)
	require.Len(t, vols[0].MappedSdcInfo, 1)
	assert.Equal(t, found.Sdc.ID, vols[0].MappedSdcInfo[0].SdcID)
	assert.Equal(t, "NVMeHost", vols[0].MappedSdcInfo[0].HostType)
}

// goscaleio's NVMe calls (MapVolumeNVMe: addMappedHost; RemoveMappedHost:
// removeMappedHost) map and unmap a volume to an NVMe host by host ID,
// under the MDM's rules (already mapped; a second host only with
// allowMultipleMappings), and are audited as array writes.
func TestNVMeHostMapping(t *testing.T) {
	nvme := powerflex.SDCSpec{Name: "127.0.10.4-4f2d9b1c7e0a5d3b8c6", HostType: powerflex.HostTypeNVMe,
		NQN: "nqn.2014-08.org.nvmexpress:uuid:worker-4"}
	other := powerflex.SDCSpec{Name: "127.0.10.5-0a1b2c3d4e5f60718293", HostType: powerflex.HostTypeNVMe,
		NQN: "nqn.2014-08.org.nvmexpress:uuid:worker-5"}
	sim, err := powerflex.NewFromSpec(powerflex.Spec{
		Systems: []powerflex.SystemSpec{{ID: "1a2b3c4d5e6f7a8b"}}, SDCs: []powerflex.SDCSpec{nvme, other},
		Volumes: []powerflex.VolumeSpec{{Name: "nvme-vol"}},
	}, nil)
	require.NoError(t, err)
	srv := simcore.New("pflex-1", sim, nil)
	l, err := simcore.Serve(srv, "127.0.0.1:0", false, t.TempDir())
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	b := &bed{sim: sim, srv: srv, url: l.URL}
	c := b.client(t)
	sys := system(t, c)
	host, err := sys.FindSdc("Name", nvme.Name)
	require.NoError(t, err)
	host2, err := sys.FindSdc("Name", other.Name)
	require.NoError(t, err)
	volID, ok := sim.VolumeID("nvme-vol")
	require.True(t, ok)
	vol := sio.NewVolume(c)
	vol.Volume.ID = volID

	require.NoError(t, vol.MapVolumeNVMe(&siotypes.MapVolumeNVMeParam{HostID: host.Sdc.ID, AllowMultipleMappings: "FALSE"}))
	assert.Equal(t, []string{volID}, sim.MappedVolumes(nvme.Name))
	vols, err := c.GetVolume("", volID, "", "", false)
	require.NoError(t, err)
	require.Len(t, vols[0].MappedSdcInfo, 1)
	assert.Equal(t, "NVMeHost", vols[0].MappedSdcInfo[0].HostType)
	assert.Equal(t, nvme.Name, vols[0].MappedSdcInfo[0].SdcName)
	assert.Equal(t, "ReadWrite", vols[0].MappedSdcInfo[0].AccessMode)

	err = vol.MapVolumeNVMe(&siotypes.MapVolumeNVMeParam{HostID: host.Sdc.ID})
	require.Error(t, err, "already mapped")
	err = vol.MapVolumeNVMe(&siotypes.MapVolumeNVMeParam{HostID: host2.Sdc.ID, AllowMultipleMappings: "FALSE"})
	require.Error(t, err, "a second host needs allowMultipleMappings")

	srv.ClearAudit()
	require.NoError(t, vol.RemoveMappedHost(&siotypes.UnmapVolumeNVMeParam{HostID: host.Sdc.ID}))
	assert.Empty(t, sim.MappedVolumes(nvme.Name))
	writes := srv.AuditWrites()
	require.Len(t, writes, 1)
	assert.Contains(t, writes[0].Path, "/action/removeMappedHost")
	assert.Contains(t, writes[0].Change, "mappedSdcInfo")
	require.Error(t, vol.RemoveMappedHost(&siotypes.UnmapVolumeNVMeParam{HostID: host.Sdc.ID}), "not mapped")
}

// TestQuerySelectedStatistics: the bulk statistics read answers, per SDC
// ID asked for (or every SDC with allIds), the properties asked for as the
// SDC's own statistics show them; bad requests name what is wrong.
func TestQuerySelectedStatistics(t *testing.T) {
	b := newBed(t, false)
	c := b.client(t)
	w1, _ := b.sim.SDCID("worker-1")
	w2, _ := b.sim.SDCID("worker-2")
	require.NoError(t, b.sim.SetSignals("worker-1", simcore.Signals{Connected: simcore.Bool(false), IOActive: simcore.Bool(true)}))
	require.NoError(t, b.sim.SetSignals("worker-2", simcore.Signals{Connected: simcore.Bool(false), IOActive: simcore.Bool(false)}))
	post := func(body string) (int, []byte) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, b.url+"/api/types/Sdc/instances/action/querySelectedStatistics", strings.NewReader(body))
		require.NoError(t, err)
		req.SetBasicAuth("", c.GetToken())
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer func() { _ = res.Body.Close() }()
		out, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		return res.StatusCode, out
	}
	status, body := post(`{"ids":["` + w1 + `","` + w2 + `"],"properties":["userDataReadBwc","userDataWriteBwc"]}`)
	require.Equal(t, http.StatusOK, status, string(body))
	var got map[string]map[string]siotypes.BWC
	require.NoError(t, json.Unmarshal(body, &got))
	require.Len(t, got, 2)
	assert.Len(t, got[w1], 2, "only the properties asked for")
	assert.Positive(t, got[w1]["userDataWriteBwc"].NumOccured)
	assert.Zero(t, got[w2]["userDataReadBwc"].NumOccured)
	assert.Equal(t, 1, got[w2]["userDataReadBwc"].NumSeconds)

	status, body = post(`{"allIds":"","properties":["numOfMappedVolumes"]}`)
	require.Equal(t, http.StatusOK, status, string(body))
	var all map[string]map[string]int
	require.NoError(t, json.Unmarshal(body, &all))
	assert.Len(t, all, 2, "every SDC (worker-3 has none)")
	assert.Equal(t, 4, all[w1]["numOfMappedVolumes"])

	for body, want := range map[string]string{
		`{"ids":["` + w1 + `"],"properties":["bogus"]}`:                 "bogus",
		`{"ids":["` + w1 + `"]}`:                                        "properties",
		`{"properties":["userDataReadBwc"]}`:                            "allIds",
		`{"ids":["00000000deadbeef"],"properties":["userDataReadBwc"]}`: "Could not find the SDC",
		`not json`: "Request message is not valid",
	} {
		status, out := post(body)
		assert.GreaterOrEqual(t, status, 400, body)
		assert.Contains(t, string(out), want, body)
	}
	assert.Empty(t, b.srv.AuditWrites(), "a statistics query is no array write")
}
