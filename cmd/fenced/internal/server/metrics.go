package server

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/fenced-project/fenced/cmd/fenced/internal/buildinfo"
)

// newRegistry returns a registry with the Go runtime and process
// collectors and fenced_build_info.
func newRegistry(b buildinfo.Info) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	info := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "fenced_build_info",
		Help: "A metric with a constant '1' value labelled by the version, revision and Go version fenced was built with.",
	}, []string{"version", "revision", "goversion"})
	info.WithLabelValues(b.Version, b.Revision, b.GoVersion).Set(1)
	reg.MustRegister(info)
	return reg
}

func (s *Server) metricsHandler() http.Handler {
	return promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{
		Registry: s.reg,
		ErrorLog: slogPromLogger{s},
		// Under ProcSubset=pid some process metrics cannot be read; serve
		// the rest rather than failing the scrape.
		ErrorHandling:     promhttp.ContinueOnError,
		EnableOpenMetrics: true,
	})
}

// slogPromLogger adapts the server's logger to promhttp's Logger.
type slogPromLogger struct{ s *Server }

func (l slogPromLogger) Println(v ...any) { l.s.opts.Logger.Warn("metrics", "error", v) }
