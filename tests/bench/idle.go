package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fenced-project/fenced/tests/e2e"
	"github.com/fenced-project/fenced/tests/testbed"
)

// Writers of the steady-state runs' nodes (-steady-writer).
const (
	// writerKwok: kwok keeps the Nodes, the test bed's per-node lease
	// controllers renew the Leases.
	writerKwok = "kwok"
	// writerLight: the test bed's light writer (testbed.AddLightNodes)
	// writes the Nodes' conditions and renews their Leases with a few
	// workers, no kwok node.
	writerLight = "light"
)

// IdleRequests is the array requests of one family and operation at rest,
// summed over the three replicas.
type IdleRequests struct {
	Family    string  `json:"family"`
	Op        string  `json:"op"`
	PerMinute float64 `json:"perMinute"`
	// MeanSeconds is a request's mean duration.
	MeanSeconds float64 `json:"meanSeconds"`
}

// LightRenewals is the light writer's work over a steady window.
type LightRenewals struct {
	// PerSecond is the Lease renewals made per second; Failed those that
	// failed over the window.
	PerSecond float64 `json:"perSecond"`
	Failed    int64   `json:"failed"`
	// Renewals is the renewals made over the window; Skipped those not
	// made because the node's last renewal was still in flight.
	Renewals int64 `json:"renewals,omitempty"`
	Skipped  int64 `json:"skipped"`
	// LateP99Seconds and LateMaxSeconds are how late after its due time
	// a renewal was answered by the API server (p99 and the latest).
	LateP99Seconds float64 `json:"lateP99Seconds"`
	LateMaxSeconds float64 `json:"lateMaxSeconds"`
	// WholeRun: the figures cover the run from the replicas' start, not
	// the window (a run that never reached its window).
	WholeRun bool `json:"wholeRun,omitempty"`
}

// lightRenewals gives the light writer's work d over elapsed.
func lightRenewals(d testbed.LightStats, elapsed time.Duration) *LightRenewals {
	return &LightRenewals{
		PerSecond: float64(d.Renewals) / elapsed.Seconds(), Failed: d.Failures,
		Renewals: d.Renewals, Skipped: d.Skipped,
		LateP99Seconds: d.Lateness(0.99).Seconds(), LateMaxSeconds: d.MaxLateness().Seconds(),
	}
}

// idleExtras samples, over the same window as measureIdle, what else the
// steady run reports: the array requests of every replica, the light
// writer's renewals and, with -steady-profile, the leader's and a
// follower's CPU profile (their heap profiles after the window). start is
// called at the window's beginning, and the returned function at its end.
func idleExtras(ctx context.Context, h *e2e.Harness, p params, res *SteadyResult) (start func(window time.Duration), end func()) {
	var before []map[arrayOp]OpTime
	var light testbed.LightStats
	var began time.Time
	var wg sync.WaitGroup
	var profiled []string
	var mu sync.Mutex
	start = func(window time.Duration) {
		began = time.Now()
		before = scrapeRequests(ctx, h)
		light = h.CP.LightStats()
		if !p.SteadyProfile {
			return
		}
		lead, err := h.Leader(ctx)
		if err != nil {
			return
		}
		for _, id := range []string{lead, h.Follower(lead)} {
			role := "follower"
			if id == lead {
				role = "leader"
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				path := filepath.Join(p.Out, "profiles", fmt.Sprintf("steady-%d-%s-%s-cpu.pb.gz", res.Nodes, res.Writer, role))
				q := fmt.Sprintf("profile?seconds=%d", int(window.Seconds()))
				if err := saveProfile(ctx, h, id, q, path); err != nil {
					fmt.Fprintf(os.Stderr, "steady: CPU profile of %s: %v\n", id, err)
					return
				}
				mu.Lock()
				profiled = append(profiled, role+" ("+id+") CPU: "+filepath.Base(path))
				mu.Unlock()
				path = strings.Replace(path, "-cpu.", "-heap.", 1)
				if err := saveProfile(ctx, h, id, "heap", path); err != nil {
					fmt.Fprintf(os.Stderr, "steady: heap profile of %s: %v\n", id, err)
					return
				}
				mu.Lock()
				profiled = append(profiled, role+" ("+id+") heap: "+filepath.Base(path))
				mu.Unlock()
			}()
		}
	}
	end = func() {
		elapsed := time.Since(began)
		after := scrapeRequests(ctx, h)
		if before != nil && after != nil {
			res.ArrayRequests = idleRequests(requestsDelta(before, after), h, elapsed)
		}
		if res.Writer == writerLight {
			res.LightRenewals = lightRenewals(h.CP.LightStats().Since(light), elapsed)
		}
		wg.Wait()
		slices.Sort(profiled)
		res.Profiles = profiled
	}
	return start, end
}

// idleRequests turns the requests of a window into per-minute figures by
// family and operation.
func idleRequests(calls map[arrayOp]OpTime, h *e2e.Harness, window time.Duration) []IdleRequests {
	byFam := map[[2]string]OpTime{}
	for k, v := range calls {
		fam := k.array
		if a, ok := h.Arrays[k.array]; ok {
			fam = a.Family
		}
		o := byFam[[2]string{fam, k.op}]
		o.Count += v.Count
		o.Seconds += v.Seconds
		byFam[[2]string{fam, k.op}] = o
	}
	var out []IdleRequests
	for k, v := range byFam {
		out = append(out, IdleRequests{Family: k[0], Op: k[1], PerMinute: v.Count / window.Minutes(), MeanSeconds: v.mean()})
	}
	slices.SortFunc(out, func(a, b IdleRequests) int {
		if c := strings.Compare(a.Family, b.Family); c != 0 {
			return c
		}
		return strings.Compare(a.Op, b.Op)
	})
	return out
}

// saveProfile fetches /debug/pprof/<query> from replica id with the API
// token and writes it to path.
func saveProfile(ctx context.Context, h *e2e.Harness, id, query, path string) error {
	tok, err := os.ReadFile(h.TokenFile)
	if err != nil {
		return fmt.Errorf("read the API token: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, h.Replicas[id].HTTPURL+"/debug/pprof/"+query, nil)
	if err != nil {
		return fmt.Errorf("profile request: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("fetch profile %s: %w", query, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("fetch profile %s: %s", query, resp.Status)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("profile directory: %w", err)
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("write profile: %w", err)
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		_ = f.Close()
		return fmt.Errorf("write profile %s: %w", path, err)
	}
	return f.Close()
}

// idleNotes says who wrote each size's nodes and gives the array requests
// at rest, for the growth section; empty for runs from before either.
func idleNotes(growth []SteadyResult) string {
	var b strings.Builder
	for _, g := range growth {
		if g.Writer == writerLight {
			components := "kube-apiserver with etcd, kube-controller-manager and kube-scheduler"
			if g.Bare {
				components = "kube-apiserver with etcd (the controller manager and the scheduler were stopped once the nodes were written: " +
					"nothing at rest needs them, and the API server needed their CPU to keep the renewals on time)"
			}
			pace := "every 10 s (a quarter of the 40 s Lease, as the kubelet does; "
			if !g.kubeletPaced() {
				pace = fmt.Sprintf("every %g s (a quarter of a %g s Lease, as a kubelet with nodeLeaseDurationSeconds %g does; "+
					"fenced's heartbeatGrace and earlyVerdict after and probeFrom scaled from their defaults by the same factor; ",
					g.Renewal(), 4*g.Renewal(), 4*g.Renewal())
			}
			fmt.Fprintf(&b, "%d nodes: written by the light writer, not kwok. Real: %s, "+
				"the three fenced replicas and the array simulators; the Nodes, their status "+
				"and conditions, CSINodes and Leases are real API objects. The light writer (one client in the bench process) creates "+
				"each Node, its CSINode and Lease, renews every Lease "+pace+
				"each renewal one Lease update, started at its due time, the renewals spread evenly over the interval) and patches "+
				"each Node's conditions every 5 min (the kubelet's status report); each node's kubelet port is the test bed's TLS "+
				"listener, as for a kwok node. No kwok node (kwok runs with none to manage), no pod", g.Nodes, components)
			if r := g.LightRenewals; r != nil {
				over := "the window"
				if r.WholeRun {
					over = "the run (from the replicas' start; it never reached its window)"
				}
				fmt.Fprintf(&b, ". Over %s: %.0f renewals/s", over, r.PerSecond)
				if r.Renewals > 0 || r.Skipped > 0 {
					fmt.Fprintf(&b, " (%d renewals), %d failed, %d skipped (the last one still in flight); answered after their due time "+
						"p99 %.3f s, at most %.3f s", r.Renewals, r.Failed, r.Skipped, r.LateP99Seconds, r.LateMaxSeconds)
				} else {
					fmt.Fprintf(&b, ", %d failed", r.Failed)
				}
			}
			b.WriteString(".\n\n")
		}
	}
	var with []SteadyResult
	for _, g := range growth {
		if len(g.ArrayRequests) > 0 {
			with = append(with, g)
		}
	}
	if len(with) == 0 {
		return b.String()
	}
	b.WriteString("Array requests at rest, per minute, the three replicas together (fenced_array_request_duration_seconds over the window):\n\n" +
		"| Nodes | Lease renewed every (s) | family | operation | per minute | mean (s) |\n|---|---|---|---|---|---|\n")
	for _, g := range with {
		for _, r := range g.ArrayRequests {
			fmt.Fprintf(&b, "| %d | %g | %s | %s | %.1f | %.3f |\n", g.Nodes, g.Renewal(), r.Family, r.Op, r.PerMinute, r.MeanSeconds)
		}
	}
	b.WriteString("\n")
	return b.String()
}
