package apiprobe

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/configs"
)

func TestCollectorReportsReachability(t *testing.T) {
	api := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`{"gitVersion":"v1.34.2"}`))
	}))
	defer api.Close()
	up, down := configs.DefaultCluster(), configs.DefaultCluster()
	up.Name, up.Kubeconfig = "up", kubeconfig(t, api.URL)
	down.Name, down.Kubeconfig = "down", kubeconfig(t, "https://"+closedPort(t))
	log := slog.New(slog.DiscardHandler)
	probers := []*Prober{New(up, "", log), New(down, "", log)}
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewCollector(probers))

	values := func() map[string]float64 {
		mfs, err := reg.Gather()
		require.NoError(t, err)
		out := map[string]float64{}
		for _, mf := range mfs {
			require.Equal(t, "fenced_apiserver_up", mf.GetName())
			require.Equal(t, "GAUGE", mf.GetType().String())
			for _, m := range mf.GetMetric() {
				require.Len(t, m.GetLabel(), 1)
				out[m.GetLabel()[0].GetValue()] = m.GetGauge().GetValue()
			}
		}
		return out
	}
	require.Equal(t, map[string]float64{"up": 0, "down": 0}, values(), "not probed yet: 0")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, p := range probers {
		go func() { _ = p.Run(ctx) }()
	}
	require.Eventually(t, func() bool {
		return probers[1].Status().CheckedAt != nil && values()["up"] == 1
	}, 10*time.Second, 20*time.Millisecond)
	require.Equal(t, map[string]float64{"up": 1, "down": 0}, values())
}
