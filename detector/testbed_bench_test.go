package detector_test

import (
	"bufio"
	"context"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fenced-project/fenced/detector"
	"github.com/fenced-project/fenced/tests/testbed"
)

// BenchmarkThousandNodesOneKilled runs the detector with the default policy
// (40 s grace, 2 s poll) against 1,000 kwok nodes whose Leases last 40 s and
// are renewed every 10 s. Each iteration kills one node and reports the
// detector's overhead: the time from the node's last Lease renewal
// (spec.renewTime, written by kwok on this host's clock) to the Failed
// verdict, minus the grace. It also reports this process's CPU and memory
// while watching, net of the same process without the detector.
//
//	go test -run '^$' -bench ThousandNodesOneKilled -benchtime 3x -timeout 60m ./detector/
func BenchmarkThousandNodesOneKilled(b *testing.B) {
	const n = 1000
	const window = 30 * time.Second
	ctx, cancel := context.WithTimeout(b.Context(), 50*time.Minute)
	defer cancel()
	cp, err := testbed.StartControlPlane(ctx, testbed.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer cp.Stop()
	nodes, err := cp.AddNodes(ctx, testbed.NodeSpecs("kwok", n)...)
	if err != nil {
		b.Fatal(err)
	}
	names := make([]string, n)
	for i, nd := range nodes {
		names[i] = nd.Name()
	}
	if err := cp.WaitNodesReady(ctx, names...); err != nil {
		b.Fatal(err)
	}

	base := measure(ctx, window)
	p := detector.DefaultPolicy()
	r, log := startRunner(b, cp, p)
	if !waitFor(ctx, 5*time.Minute, allHealthy(r, n)) {
		b.Fatalf("not all %d nodes healthy: %+v", n, r.Status().Counts)
	}
	watching := measure(ctx, window)

	var overhead, observed []float64
	i := 0
	for b.Loop() {
		nd := nodes[i*97%n]
		i++
		if err := nd.Kill(ctx); err != nil {
			b.Fatal(err)
		}
		failed := func() bool { return log.latest(nd.Name()).State == detector.Failed }
		if !waitFor(ctx, 5*time.Minute, failed) {
			b.Fatalf("%s not failed: %+v", nd.Name(), log.latest(nd.Name()))
		}
		v := log.latest(nd.Name())
		renewed, err := cp.LeaseRenewTime(ctx, nd.Name())
		if err != nil {
			b.Fatal(err)
		}
		overhead = append(overhead, (v.Evidence.FailedAt.Sub(renewed) - p.HeartbeatGrace).Seconds())
		observed = append(observed, (v.Evidence.FailedAt.Sub(v.Evidence.RenewObservedAt) - p.HeartbeatGrace).Seconds())
		if err := nd.Return(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(mean(overhead), "overhead-s/op")
	b.ReportMetric(slices.Max(overhead), "overhead-max-s")
	b.ReportMetric(mean(observed), "overhead-from-observed-renewal-s/op")
	b.ReportMetric((watching.cpu-base.cpu)/window.Seconds(), "detector-cpu-cores")
	b.ReportMetric(float64(watching.rss-base.rss)/(1<<20), "detector-rss-MiB")
	b.ReportMetric(float64(watching.heap)/(1<<20), "process-heap-MiB")
	b.Logf("process while watching: cpu %.3f cores (baseline %.3f), rss %d MiB (baseline %d MiB), heap in use %d MiB",
		watching.cpu/window.Seconds(), base.cpu/window.Seconds(), watching.rss>>20, base.rss>>20, watching.heap>>20)
	b.Logf("overhead per kill (s): %v; from the renewal the detector saw (s): %v", overhead, observed)
}

type usage struct {
	cpu  float64 // CPU seconds used during the window
	rss  int64   // resident set at the end
	heap uint64  // Go heap in use at the end
}

// measure returns this process's CPU seconds over the window and its memory
// at the end.
func measure(ctx context.Context, window time.Duration) usage {
	c0 := cpuSeconds()
	select {
	case <-ctx.Done():
	case <-time.After(window):
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return usage{cpu: cpuSeconds() - c0, rss: rssBytes(), heap: ms.HeapInuse}
}

func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	tv := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	return tv(ru.Utime) + tv(ru.Stime)
}

func rssBytes() int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

func waitFor(ctx context.Context, limit time.Duration, cond func() bool) bool {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
	}
	return true
}

func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}
