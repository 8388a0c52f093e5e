package main

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// sizes are the node counts of the steady-state runs: the -steady-nodes
// flag, a comma-separated list (a single number is a list of one; 0 is
// none). They are kept ascending, without repeats.
type sizes []int

func (s *sizes) String() string {
	if s == nil {
		return ""
	}
	parts := make([]string, len(*s))
	for i, n := range *s {
		parts[i] = strconv.Itoa(n)
	}
	return strings.Join(parts, ",")
}

// Set parses the flag's value.
func (s *sizes) Set(v string) error {
	var out []int
	for _, f := range strings.Split(v, ",") {
		f = strings.TrimSpace(f)
		n, err := strconv.Atoi(f)
		if err != nil || n < 0 {
			return fmt.Errorf("node count %q: not a whole number ≥ 0", f)
		}
		if n > 0 {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	*s = slices.Compact(out)
	return nil
}

// kubeletLeaseSeconds is the kubelet's default nodeLeaseDurationSeconds;
// kubeletRenewal, in seconds, is how often it renews its Lease then (a
// quarter of the duration).
const (
	kubeletLeaseSeconds = 40
	kubeletRenewal      = kubeletLeaseSeconds / 4.0
)

// Renewal is how often the run's nodes renewed their Leases, in seconds.
func (s SteadyResult) Renewal() float64 {
	if s.RenewalSeconds == 0 {
		return kubeletRenewal
	}
	return s.RenewalSeconds
}

// kubeletPaced reports whether the run's nodes renewed at the kubelet's
// default pace: only those runs make the growth fit and the steady section.
func (s SteadyResult) kubeletPaced() bool { return s.Renewal() == kubeletRenewal }

// mergeGrowth adds the sizes measured now to those of an earlier run: a
// size measured again at the same renewal pace replaces the earlier
// figures. The result is in ascending order of nodes, then of the pace.
func mergeGrowth(old, now []SteadyResult) []SteadyResult {
	var out []SteadyResult
	for _, o := range old {
		if !slices.ContainsFunc(now, func(s SteadyResult) bool { return s.Nodes == o.Nodes && s.Renewal() == o.Renewal() }) {
			out = append(out, o)
		}
	}
	out = append(out, now...)
	slices.SortStableFunc(out, func(a, b SteadyResult) int {
		if a.Nodes != b.Nodes {
			return a.Nodes - b.Nodes
		}
		return cmp.Compare(a.Renewal(), b.Renewal())
	})
	return out
}

// largest is the steady run at the kubelet's pace with the most nodes that
// completed, or nil.
func largest(growth []SteadyResult) *SteadyResult {
	var best *SteadyResult
	for i := range growth {
		if g := &growth[i]; g.Error == "" && g.kubeletPaced() && (best == nil || g.Nodes > best.Nodes) {
			best = g
		}
	}
	if best == nil {
		return nil
	}
	c := *best
	return &c
}

// GrowthFit is a straight line through each steady-state figure against
// the node count, and where it leads.
type GrowthFit struct {
	// Sizes are the node counts of the completed runs the fit is made of.
	Sizes   []int `json:"sizes"`
	Figures []Fit `json:"figures"`
}

// Fit is the ordinary least squares line figure = a + b·nodes of one
// figure.
type Fit struct {
	Figure string `json:"figure"`
	// Intercept is a; SlopePer1000 is b·1000, the growth per 1,000 nodes.
	Intercept    float64 `json:"intercept"`
	SlopePer1000 float64 `json:"slopePer1000Nodes"`
	// R2 is the coefficient of determination of the line over the
	// measured sizes (1 when every figure is the same).
	R2 float64 `json:"r2"`
	// At2000 and At10000 are the line's values at 2,000 and 10,000 nodes.
	At2000  float64 `json:"projectedAt2000"`
	At10000 float64 `json:"projectedAt10000"`
}

// The figures of the growth fit.
const (
	figLeaderCPU   = "leader CPU (% of a core)"
	figLeaderRSS   = "leader RSS (MB)"
	figFollowerCPU = "follower CPU (% of a core)"
	figFollowerRSS = "follower RSS (MB)"
)

// growthFigure is one figure of a steady run that the growth fit covers.
type growthFigure struct {
	name  string
	value func(SteadyResult) float64
}

// growthFigures are the figures fitted, in the order of the fit table.
func growthFigures() []growthFigure {
	return []growthFigure{
		{figLeaderCPU, func(s SteadyResult) float64 { return s.Leader.CPUPercent }},
		{figLeaderRSS, func(s SteadyResult) float64 { return float64(s.Leader.RSSBytes) / 1e6 }},
		{figFollowerCPU, func(s SteadyResult) float64 { return s.Follower.CPUPercent }},
		{figFollowerRSS, func(s SteadyResult) float64 { return float64(s.Follower.RSSBytes) / 1e6 }},
	}
}

// fitGrowth fits every figure of the completed runs at the kubelet's
// renewal pace against their node counts; nil with fewer than two distinct
// sizes.
func fitGrowth(growth []SteadyResult) *GrowthFit {
	var done []SteadyResult
	for _, g := range growth {
		if g.Error == "" && g.Nodes > 0 && g.kubeletPaced() {
			done = append(done, g)
		}
	}
	xs := make([]float64, len(done))
	f := &GrowthFit{}
	for i, g := range done {
		xs[i] = float64(g.Nodes)
		if !slices.Contains(f.Sizes, g.Nodes) {
			f.Sizes = append(f.Sizes, g.Nodes)
		}
	}
	if len(f.Sizes) < 2 {
		return nil
	}
	slices.Sort(f.Sizes)
	for _, fig := range growthFigures() {
		ys := make([]float64, len(done))
		for i, g := range done {
			ys[i] = fig.value(g)
		}
		a, b, r2 := leastSquares(xs, ys)
		f.Figures = append(f.Figures, Fit{Figure: fig.name, Intercept: a, SlopePer1000: 1000 * b, R2: r2,
			At2000: a + 2000*b, At10000: a + 10000*b})
	}
	return f
}

// leastSquares fits y = a + b·x by ordinary least squares and returns a,
// b and R². It needs at least two distinct xs; R² is 1 when the ys do not
// vary (the line is then exact).
func leastSquares(xs, ys []float64) (a, b, r2 float64) {
	n := float64(len(xs))
	var mx, my float64
	for i := range xs {
		mx += xs[i]
		my += ys[i]
	}
	mx, my = mx/n, my/n
	var sxx, sxy, syy float64
	for i := range xs {
		dx, dy := xs[i]-mx, ys[i]-my
		sxx += dx * dx
		sxy += dx * dy
		syy += dy * dy
	}
	b = sxy / sxx
	a = my - b*mx
	if syy == 0 {
		return a, b, 1
	}
	var ssRes float64
	for i := range xs {
		r := ys[i] - (a + b*xs[i])
		ssRes += r * r
	}
	return a, b, 1 - ssRes/syy
}

// figure returns the fit of the named figure (zero when absent).
func (g *GrowthFit) figure(name string) Fit {
	for _, f := range g.Figures {
		if f.Figure == name {
			return f
		}
	}
	return Fit{}
}

// at is the line's value at n nodes.
func (f Fit) at(n int) float64 { return f.Intercept + f.SlopePer1000*float64(n)/1000 }
