package powerflex_test

import (
	"testing"
	"time"

	sio "github.com/dell/goscaleio"
	siotypes "github.com/dell/goscaleio/types/v1"
	"github.com/stretchr/testify/require"
)

// BenchmarkFenceRoundTrip drives one fence round trip per iteration with the
// real goscaleio client over HTTPS: read the SDC and its volumes, unmap the
// four volumes, read back, map them back, restore three limits, read back.
// It reports the simulator's throughput in requests per second.
func BenchmarkFenceRoundTrip(b *testing.B) {
	bd := newBedB(b)
	c := bd.clientB(b)
	sys := sio.NewSystem(c)
	sdcID, _ := bd.sim.SDCID("worker-1")
	start := bd.srv.LastSeq()
	began := time.Now()
	for b.Loop() {
		sdc, err := sys.GetSdcByID(sdcID)
		require.NoError(b, err)
		vols, err := sdc.GetVolume()
		require.NoError(b, err)
		type rec struct {
			vol, mode string
			iops, bw  int
		}
		var plan []rec
		for _, v := range vols {
			for _, m := range v.MappedSdcInfo {
				if m.SdcID == sdcID {
					plan = append(plan, rec{v.ID, m.AccessMode, m.LimitIops, m.LimitBwInMbps})
				}
			}
		}
		for _, p := range plan {
			v := sio.NewVolume(c)
			v.Volume.ID = p.vol
			require.NoError(b, v.UnmapVolumeSdc(&siotypes.UnmapVolumeSdcParam{SdcID: sdcID, IgnoreScsiInitiators: "TRUE"}))
		}
		_, err = sdc.GetVolume()
		require.NoError(b, err)
		for _, p := range plan {
			v := sio.NewVolume(c)
			v.Volume.ID = p.vol
			require.NoError(b, v.MapVolumeSdc(&siotypes.MapVolumeSdcParam{SdcID: sdcID, AllowMultipleMappings: "TRUE", AccessMode: p.mode}))
			if p.iops != 0 || p.bw != 0 {
				require.NoError(b, v.SetMappedSdcLimits(&siotypes.SetMappedSdcLimitsParam{
					SdcID: sdcID, IopsLimit: itoa(p.iops), BandwidthLimitInKbps: itoa(p.bw * 1024)}))
			}
		}
		_, err = sdc.GetVolume()
		require.NoError(b, err)
	}
	elapsed := time.Since(began).Seconds()
	requests := float64(bd.srv.LastSeq() - start)
	b.ReportMetric(requests/elapsed, "req/s")
	b.ReportMetric(requests/float64(b.N), "req/roundtrip")
}
