package main

import (
	"bufio"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/fenced-project/fenced/cluster/ledger"
	"github.com/fenced-project/fenced/stonith"
)

// The bench gives its times from two references. The power-off is the
// moment the harness stops a node: its kubelet port closes and kwok stops
// renewing its Lease, as when the power goes. The last renewal is the last
// renewTime of the node's Lease, which came up to one renewal interval
// (10 s) before the power-off. fenced's heartbeat grace counts from the
// last renewal, so figures from it show what fenced adds to the grace;
// figures from the power-off are what the workload sees.

// secondsAfter is at − ref in seconds, or 0 when either is not recorded.
func secondsAfter(ref, at time.Time) float64 {
	if ref.IsZero() || at.IsZero() {
		return 0
	}
	return at.Sub(ref).Seconds()
}

// Since are the milestones of one node's death in seconds after one
// reference instant (the power-off or the last renewal); 0 where the
// milestone was not reached or not recorded.
type Since struct {
	// Verdict is the Failed verdict; Opened the fence's intent; Fenced
	// every array fenced and read back; Evicted every pod force-deleted;
	// Running every replacement pod Running.
	Verdict float64 `json:"verdictSeconds,omitempty"`
	Opened  float64 `json:"fenceOpenedSeconds,omitempty"`
	Fenced  float64 `json:"fencedSeconds,omitempty"`
	Evicted float64 `json:"evictedSeconds,omitempty"`
	Running float64 `json:"replacementsRunningSeconds,omitempty"`
}

// since are the trial's milestones after ref.
func (tr Trial) since(ref time.Time) Since {
	return Since{
		Verdict: secondsAfter(ref, tr.Verdict),
		Opened:  secondsAfter(ref, tr.Intent),
		Fenced:  secondsAfter(ref, tr.Fenced),
		Evicted: secondsAfter(ref, tr.Evicted),
		Running: secondsAfter(ref, tr.Recovered),
	}
}

// fromPowerOff are the trial's milestones after its power-off: the
// recorded figures, or, for a run from before they were recorded, the
// same figures derived from its timestamps.
func (tr Trial) fromPowerOff() Since {
	if tr.FromPowerOff != nil {
		return *tr.FromPowerOff
	}
	return tr.since(tr.Killed)
}

// fromRenewal are the trial's milestones after its last renewal, like
// fromPowerOff.
func (tr Trial) fromRenewal() Since {
	if tr.FromRenewal != nil {
		return *tr.FromRenewal
	}
	return tr.since(tr.LastRenew)
}

// leaseAge is how long before the power-off the node's Lease was last
// renewed, in seconds (negative: a renewal landed after it); 0 when either
// is not recorded.
func (tr Trial) leaseAge() float64 { return secondsAfter(tr.LastRenew, tr.Killed) }

// present drops the figures that were not recorded (0).
func present(xs []float64) []float64 {
	var out []float64
	for _, x := range xs {
		if x != 0 {
			out = append(out, x)
		}
	}
	return out
}

// StormInstants are when the harness, polling the leader's status, saw
// the storm's milestones.
type StormInstants struct {
	FirstOpened time.Time `json:"firstOpened,omitzero"`
	AllOpened   time.Time `json:"allOpened,omitzero"`
	AllFenced   time.Time `json:"allFenced,omitzero"`
	AllEvicted  time.Time `json:"allEvicted,omitzero"`
	AllRunning  time.Time `json:"allReplacementsRunning,omitzero"`
}

// StormSince are the storm's milestones in seconds after one reference
// instant; 0 where not reached.
type StormSince struct {
	FirstOpened float64 `json:"firstOpenedSeconds,omitempty"`
	AllOpened   float64 `json:"allOpenedSeconds,omitempty"`
	AllFenced   float64 `json:"allFencedSeconds,omitempty"`
	AllEvicted  float64 `json:"allEvictedSeconds,omitempty"`
	AllRunning  float64 `json:"allReplacementsRunningSeconds,omitempty"`
}

// since are the milestones after ref.
func (at StormInstants) since(ref time.Time) StormSince {
	return StormSince{
		FirstOpened: secondsAfter(ref, at.FirstOpened),
		AllOpened:   secondsAfter(ref, at.AllOpened),
		AllFenced:   secondsAfter(ref, at.AllFenced),
		AllEvicted:  secondsAfter(ref, at.AllEvicted),
		AllRunning:  secondsAfter(ref, at.AllRunning),
	}
}

// fromRenewal are the storm's figures after the last renewal of the dying
// nodes' Leases (the figures every run has recorded).
func (s *StormResult) fromRenewal() StormSince {
	return StormSince{FirstOpened: s.FirstOpened, AllOpened: s.AllOpened, AllFenced: s.AllFenced, AllEvicted: s.AllEvicted, AllRunning: s.AllRunning}
}

// fromPowerOff are the storm's figures after the power-off; zero for a run
// from before it was recorded.
func (s *StormResult) fromPowerOff() StormSince {
	if s.FromPowerOff != nil {
		return *s.FromPowerOff
	}
	return s.At.since(s.PowerOff)
}

// StormNode is one dying node of the storm: its power-off, last renewal
// and fence steps (from the ledger).
type StormNode struct {
	Node      string    `json:"node"`
	PowerOff  time.Time `json:"powerOff"`
	LastRenew time.Time `json:"lastRenew,omitzero"`
	FenceID   string    `json:"fenceID,omitempty"`
	Intent    time.Time `json:"intent,omitzero"`
	Fenced    time.Time `json:"fenced,omitzero"`
	Evicted   time.Time `json:"evicted,omitzero"`
	// Early is set when the fence was opened on an early verdict.
	Early bool `json:"early,omitempty"`
}

// StepSpread is one fence step over the storm's dying nodes: how many
// reached it, the first-to-last spread of its instants, and the times
// after each node's own power-off and own last renewal.
type StepSpread struct {
	Step  string `json:"step"`
	Nodes int    `json:"nodes"`
	// Spread is the last node's step − the first node's, in seconds.
	Spread float64 `json:"spreadSeconds"`
	// After each node's power-off and last renewal: median, p90 and max.
	PowerOffMedian float64 `json:"fromPowerOffMedianSeconds"`
	PowerOffP90    float64 `json:"fromPowerOffP90Seconds"`
	PowerOffMax    float64 `json:"fromPowerOffMaxSeconds"`
	RenewalMedian  float64 `json:"fromLastRenewalMedianSeconds,omitempty"`
	RenewalP90     float64 `json:"fromLastRenewalP90Seconds,omitempty"`
	RenewalMax     float64 `json:"fromLastRenewalMaxSeconds,omitempty"`
}

// stepSpreads summarises the fence steps over the dying nodes.
func stepSpreads(nodes []StormNode) []StepSpread {
	steps := []struct {
		name string
		at   func(StormNode) time.Time
	}{
		{"fence opened (intent)", func(n StormNode) time.Time { return n.Intent }},
		{"fenced (every array fenced and read back)", func(n StormNode) time.Time { return n.Fenced }},
		{"evicted (pods force-deleted)", func(n StormNode) time.Time { return n.Evicted }},
	}
	var out []StepSpread
	for _, st := range steps {
		var first, last time.Time
		var off, ren []float64
		for _, n := range nodes {
			at := st.at(n)
			if at.IsZero() {
				continue
			}
			if first.IsZero() || at.Before(first) {
				first = at
			}
			if at.After(last) {
				last = at
			}
			off = append(off, secondsAfter(n.PowerOff, at))
			ren = append(ren, secondsAfter(n.LastRenew, at))
		}
		if first.IsZero() {
			continue
		}
		o, r := summarize(present(off)), summarize(present(ren))
		out = append(out, StepSpread{Step: st.name, Nodes: len(off), Spread: last.Sub(first).Seconds(),
			PowerOffMedian: o.med, PowerOffP90: o.p90, PowerOffMax: o.max, RenewalMedian: r.med, RenewalP90: r.p90, RenewalMax: r.max})
	}
	return out
}

// stormNodeSteps fills the nodes' fence steps from the ledger's fences. A
// node's fence is the first opened after its power-off that evicted, or
// else the last opened after it.
func stormNodeSteps(nodes []StormNode, fences []*ledger.Fence) {
	for i := range nodes {
		n := &nodes[i]
		var pick *ledger.Fence
		for _, f := range fences {
			if f == nil || f.Node != n.Node || f.Kind == ledger.KindUnfence || f.OpenedAt.Before(n.PowerOff) {
				continue
			}
			switch {
			case pick == nil:
				pick = f
			case evictedAt(pick).IsZero() != evictedAt(f).IsZero():
				if !evictedAt(f).IsZero() {
					pick = f
				}
			case evictedAt(f).IsZero():
				if f.OpenedAt.After(pick.OpenedAt) { // neither evicted: the last opened
					pick = f
				}
			default:
				if f.OpenedAt.Before(pick.OpenedAt) { // both evicted: the first
					pick = f
				}
			}
		}
		if pick == nil {
			continue
		}
		n.FenceID, n.Intent = pick.ID, pick.OpenedAt
		n.Early = strings.Contains(pick.Reason, stonith.EarlyReason)
		for _, s := range pick.Steps {
			switch s.To {
			case ledger.StateIntent:
				n.Intent = s.At
			case ledger.StateFenced:
				n.Fenced = s.At
			case ledger.StateEvicted:
				n.Evicted = s.At
			}
		}
	}
}

// evictedAt is when the fence's record entered evicted (zero if never).
func evictedAt(f *ledger.Fence) time.Time {
	for _, s := range f.Steps {
		if s.To == ledger.StateEvicted {
			return s.At
		}
	}
	return time.Time{}
}

// FamilyTime is where the storm's time went on one array family.
type FamilyTime struct {
	Family string   `json:"family"`
	Arrays []string `json:"arrays"`
	// Fences counts the dying nodes' fences that confirmed the family's
	// arrays fenced (a read-back); Done is, over them, the seconds from
	// the fence's intent to the last operation recorded on the array (the
	// read-back that confirmed it).
	Fences     int     `json:"fences"`
	DoneMedian float64 `json:"doneAfterIntentMedianSeconds"`
	DoneP90    float64 `json:"doneAfterIntentP90Seconds"`
	DoneMax    float64 `json:"doneAfterIntentMaxSeconds"`
	// Attempts and Failures are the array operations the fences recorded
	// in the ledger (writes and read-backs) and those that failed.
	Attempts int `json:"attempts"`
	Failures int `json:"failures"`
	// Calls are the family's array requests during the storm by operation
	// (plan, apply, verify, health, ...), from the replicas'
	// fenced_array_request_duration_seconds; absent when not scraped.
	Calls map[string]OpTime `json:"calls,omitempty"`
}

// OpTime is a number of array requests and their total duration.
type OpTime struct {
	Count   float64 `json:"count"`
	Seconds float64 `json:"seconds"`
}

// mean is the mean duration of a request, in seconds.
func (o OpTime) mean() float64 {
	if o.Count == 0 {
		return 0
	}
	return o.Seconds / o.Count
}

// arrayOp keys request figures by array and operation.
type arrayOp struct{ array, op string }

// familyTimes summarises, per array family, the dying nodes' fences (from
// their ledger records) and the array requests made during the storm
// (calls, by array and operation; nil when not scraped). family maps an
// array's name to its family.
func familyTimes(nodes []StormNode, fences []*ledger.Fence, family map[string]string, calls map[arrayOp]OpTime) []FamilyTime {
	byID := map[string]*ledger.Fence{}
	for _, f := range fences {
		if f != nil {
			byID[f.ID] = f
		}
	}
	fams := map[string]*FamilyTime{}
	done := map[string][]float64{}
	get := func(array string) *FamilyTime {
		name := family[array]
		if name == "" {
			name = array
		}
		ft := fams[name]
		if ft == nil {
			ft = &FamilyTime{Family: name}
			fams[name] = ft
		}
		for _, a := range ft.Arrays {
			if a == array {
				return ft
			}
		}
		ft.Arrays = append(ft.Arrays, array)
		sort.Strings(ft.Arrays)
		return ft
	}
	for array := range family {
		get(array)
	}
	for _, n := range nodes {
		f := byID[n.FenceID]
		if f == nil {
			continue
		}
		for array, r := range f.Results {
			if r == nil {
				continue
			}
			ft := get(array)
			ft.Attempts += r.Attempts
			ft.Failures += r.Failures
			if r.Verified && !n.Intent.IsZero() {
				ft.Fences++
				done[ft.Family] = append(done[ft.Family], secondsAfter(n.Intent, r.LastAt))
			}
		}
	}
	for k, v := range calls {
		ft := get(k.array)
		if ft.Calls == nil {
			ft.Calls = map[string]OpTime{}
		}
		c := ft.Calls[k.op]
		c.Count += v.Count
		c.Seconds += v.Seconds
		ft.Calls[k.op] = c
	}
	var out []FamilyTime
	for name, ft := range fams {
		s := summarize(done[name])
		ft.DoneMedian, ft.DoneP90, ft.DoneMax = s.med, s.p90, s.max
		out = append(out, *ft)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Family < out[j].Family })
	return out
}

// arrayRequestMetric is the histogram of array request durations.
const arrayRequestMetric = "fenced_array_request_duration_seconds"

// parseArrayRequests reads the count and total duration of array requests
// by array and operation from a replica's /metrics (Prometheus text
// format).
func parseArrayRequests(text string) (map[arrayOp]OpTime, error) {
	out := map[arrayOp]OpTime{}
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		var sum bool
		switch {
		case strings.HasPrefix(line, arrayRequestMetric+"_sum{"):
			sum = true
		case strings.HasPrefix(line, arrayRequestMetric+"_count{"):
		default:
			continue
		}
		open, closing := strings.IndexByte(line, '{'), strings.LastIndexByte(line, '}')
		if closing < open {
			return nil, fmt.Errorf("parse metrics line %q: no label set", line)
		}
		labels := parseLabels(line[open+1 : closing])
		v, err := strconv.ParseFloat(strings.Fields(line[closing+1:] + " x")[0], 64)
		if err != nil {
			return nil, fmt.Errorf("parse metrics line %q: %w", line, err)
		}
		k := arrayOp{labels["array"], labels["op"]}
		o := out[k]
		if sum {
			o.Seconds = v
		} else {
			o.Count = v
		}
		out[k] = o
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read metrics: %w", err)
	}
	return out, nil
}

// parseLabels reads a Prometheus label set without its braces: name="value",...
func parseLabels(s string) map[string]string {
	out := map[string]string{}
	for s != "" {
		eq := strings.IndexByte(s, '=')
		if eq < 0 || eq+1 >= len(s) || s[eq+1] != '"' {
			return out
		}
		name := strings.TrimSpace(s[:eq])
		rest := s[eq+2:]
		var val strings.Builder
		i := 0
		for ; i < len(rest) && rest[i] != '"'; i++ {
			if rest[i] == '\\' && i+1 < len(rest) {
				i++
			}
			val.WriteByte(rest[i])
		}
		out[name] = val.String()
		if i >= len(rest) {
			return out
		}
		s = strings.TrimPrefix(strings.TrimSpace(rest[i+1:]), ",")
	}
	return out
}

// requestsDelta is after − before, summed over replicas: the requests made
// between the two scrapes. A replica whose counters went back (it
// restarted) counts from zero.
func requestsDelta(before, after []map[arrayOp]OpTime) map[arrayOp]OpTime {
	out := map[arrayOp]OpTime{}
	for i, a := range after {
		var b map[arrayOp]OpTime
		if i < len(before) {
			b = before[i]
		}
		for k, v := range a {
			if p, ok := b[k]; ok && p.Count <= v.Count {
				v.Count -= p.Count
				v.Seconds -= p.Seconds
			}
			if v.Count == 0 {
				continue
			}
			o := out[k]
			o.Count += v.Count
			o.Seconds += v.Seconds
			out[k] = o
		}
	}
	return out
}

// BaselineSince are the baseline's milestones after the node's last Lease
// renewal; 0 where not reached.
type BaselineSince struct {
	NotReady    float64 `json:"notReadySeconds,omitempty"`
	Terminating float64 `json:"terminatingSeconds,omitempty"`
	Running     float64 `json:"replacementsRunningSeconds,omitempty"`
}

// fromRenewal moves the baseline's figures (after the power-off) to after
// the last renewal; zero for a run from before it was recorded.
func (bl *BaselineResult) fromRenewal() BaselineSince {
	if bl.FromRenewal != nil {
		return *bl.FromRenewal
	}
	age := secondsAfter(bl.LastRenew, bl.PowerOff)
	if bl.LastRenew.IsZero() || bl.PowerOff.IsZero() {
		return BaselineSince{}
	}
	shift := func(v float64) float64 {
		if v == 0 {
			return 0
		}
		return v + age
	}
	return BaselineSince{NotReady: shift(bl.NotReadyAfter), Terminating: shift(bl.TerminatingAfter), Running: shift(bl.ReplacedAfter)}
}
