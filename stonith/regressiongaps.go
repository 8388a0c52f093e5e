package stonith

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/fenced-project/fenced/arrayclients"
	"github.com/fenced-project/fenced/cluster/ledger"
)

// A regression that repeats (PRODUCT.md invariant 7): a held check that
// finds a fenced node's access to a volume again cuts it again (held.go),
// but when the same volume on the same array comes back again and again,
// something gives it back on its own (a driver's publish elsewhere, a
// sidecar's reconcile, a script), and between each re-grant and the next
// held check the fence does not hold. Such a volume is a gap with reason
// repeated-regression: shown in /status, fenced_nodes_unprotected, an
// Event and `fenced plan`, while the node is fenced as before.
const (
	// RepeatedRegressions is how many held regressions of one volume on
	// one array, over the node's fences, make it a gap.
	RepeatedRegressions = 3
	// RepeatedRegressionWindow is how recent those regressions must be:
	// the gap leaves once fewer than RepeatedRegressions fall within it.
	RepeatedRegressionWindow = time.Hour
)

// regressedVolumes reads the footprint volumes, by array, that a
// regression step's ledger note names (see regress: "<RegressionNote> (was
// <state>): <array>: <access>, ...; <array>: ..."; a volume the node
// reached is "volume <PV>"). Anything else in the note is skipped.
func regressedVolumes(note string) map[string][]string {
	if !strings.HasPrefix(note, RegressionNote) {
		return nil
	}
	_, rest, ok := strings.Cut(note, "): ")
	if !ok {
		return nil
	}
	out := map[string][]string{}
	for _, part := range strings.Split(rest, "; ") {
		array, items, ok := strings.Cut(part, ": ")
		if !ok || array == "" || strings.ContainsAny(array, " ,") {
			continue
		}
		for _, item := range strings.Split(items, ", ") {
			pv, ok := strings.CutPrefix(item, "volume ")
			if !ok || pv == "" || strings.ContainsAny(pv, " ,;") || strings.HasSuffix(pv, "...") {
				continue
			}
			if !slices.Contains(out[array], pv) {
				out[array] = append(out[array], pv)
			}
		}
	}
	return out
}

// repeatedRegressionGaps finds, in a node's fence records, each volume on
// an array whose access held checks found again at least
// RepeatedRegressions times within RepeatedRegressionWindow before now.
func repeatedRegressionGaps(records []*ledger.Fence, now time.Time) []VolumeGap {
	type at struct{ array, pv string }
	count := map[at]int{}
	fences := map[at][]string{}
	last := map[at]time.Time{}
	for _, f := range records {
		if f == nil {
			continue
		}
		for _, s := range f.Steps {
			if s.To != ledger.StateFencing || now.Sub(s.At) > RepeatedRegressionWindow || s.At.After(now) {
				continue
			}
			for array, pvs := range regressedVolumes(s.Note) {
				for _, pv := range pvs {
					k := at{array, pv}
					count[k]++
					if !slices.Contains(fences[k], f.ID) {
						fences[k] = append(fences[k], f.ID)
					}
					if s.At.After(last[k]) {
						last[k] = s.At
					}
				}
			}
		}
	}
	var out []VolumeGap
	for _, k := range slices.SortedFunc(maps.Keys(count), func(a, b at) int {
		return strings.Compare(a.pv+"\x00"+a.array, b.pv+"\x00"+b.array)
	}) {
		if count[k] < RepeatedRegressions {
			continue
		}
		out = append(out, VolumeGap{Volume: k.pv, Array: k.array, Reason: arrayclients.GapRepeatedRegression,
			Detail: fmt.Sprintf("held checks found the node's access to it on %s again %d times within %s after fences cut it "+
				"(fence %s, last at %s): something gives it back on its own; fenced fences the node and cuts it again at each held "+
				"check, but until then the fence does not hold", k.array, count[k], RepeatedRegressionWindow,
				strings.Join(fences[k], ", "), last[k].UTC().Format(time.RFC3339))})
	}
	return out
}

// regressionGaps are the node's repeated-regression gaps, from the
// ledger (the same records on every replica), read under its lock: only
// the regression steps within the window are parsed.
func (c *Controller) regressionGaps(cluster, node string) []VolumeGap {
	now := c.clk.Now()
	var gaps []VolumeGap
	c.cfg.Ledger.Read(func(s *ledger.State) {
		if n := s.Node(cluster, node); n != nil {
			gaps = repeatedRegressionGaps(append(slices.Clone(n.History), n.Fence), now)
		}
	})
	return gaps
}

// blockingGaps are the gaps that keep a node from being fenced on a
// verdict (all but repeated-regression).
func blockingGaps(gaps []VolumeGap) []VolumeGap {
	return slices.DeleteFunc(slices.Clone(gaps), func(g VolumeGap) bool { return !g.Reason.Blocking() })
}
