package invariants

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// Rule names, as reported in Violation.Rule.
const (
	RuleFenceBeforeDelete = "fence-before-delete"
	RuleOneActor          = "one-actor"
	RuleArrayChangeWindow = "array-change-window"
	RuleUnfenceOnce       = "unfence-once"
	RuleArrayRestored     = "array-restored"
	RuleNoActionOnDoubt   = "no-action-on-doubt"
	RuleDryRun            = "dry-run"
	RuleFootprintCovered  = "footprint-covered"
	RuleNoRegrant         = "no-regrant"
	RuleHeld              = "held"
	RuleEvidence          = "evidence"
)

// Rules lists every rule Check runs, in the order it runs them.
func Rules() []string {
	return []string{RuleEvidence, RuleFenceBeforeDelete, RuleOneActor, RuleArrayChangeWindow,
		RuleUnfenceOnce, RuleArrayRestored, RuleNoActionOnDoubt, RuleDryRun, RuleFootprintCovered, RuleNoRegrant, RuleHeld}
}

// Violation is one broken invariant.
type Violation struct {
	Rule string `json:"rule"`
	// At is the time of the offending action (zero when it has none).
	At time.Time `json:"at"`
	// Subject names what is concerned: "cluster/node", an array, a replica.
	Subject string `json:"subject"`
	Message string `json:"message"`
}

// String formats the violation on one line.
func (v Violation) String() string {
	at := "-"
	if !v.At.IsZero() {
		at = v.At.UTC().Format("15:04:05.000000")
	}
	return fmt.Sprintf("[%s] %s %s: %s", v.Rule, at, v.Subject, v.Message)
}

// Report is the outcome of Check.
type Report struct {
	Violations []Violation `json:"violations"`
	// Checked counts what each rule examined, so a report that checked
	// nothing is visible as such.
	Checked map[string]int `json:"checked"`
	// Held lists every access a held node regained (rule held), judged or
	// not, with the write that ended it: what a chaos run's figures count.
	Held []HeldAccess `json:"held,omitempty"`
}

// HeldAccess is one array write that gave a node access again while its
// fence was held (from the eviction to the unfence), and the first later
// write that took the access away.
type HeldAccess struct {
	// Fence is the record's ID; Subject its "cluster/node".
	Fence   string `json:"fence"`
	Subject string `json:"subject"`
	Array   string `json:"array"`
	// GrantAt and GrantBy are the granting write's time and remote
	// address ("<tag>/<address>": a replica ID, or the emulated driver's
	// "csi").
	GrantAt time.Time `json:"grantAt"`
	GrantBy string    `json:"grantBy"`
	// CutAt and CutBy are the revoking write's; CutAt is zero when no
	// later write took the access away.
	CutAt time.Time `json:"cutAt,omitzero"`
	CutBy string    `json:"cutBy,omitempty"`
}

// Cut reports whether a later write took the access away, and how long
// after the grant.
func (a HeldAccess) Cut() (time.Duration, bool) {
	if a.CutAt.IsZero() {
		return 0, false
	}
	return a.CutAt.Sub(a.GrantAt), true
}

// OK reports whether no invariant was broken.
func (r *Report) OK() bool { return len(r.Violations) == 0 }

// ByRule returns the violations of one rule.
func (r *Report) ByRule(rule string) []Violation {
	var out []Violation
	for _, v := range r.Violations {
		if v.Rule == rule {
			out = append(out, v)
		}
	}
	return out
}

// String lists the counts and every violation.
func (r *Report) String() string {
	var b strings.Builder
	keys := make([]string, 0, len(r.Checked))
	for k := range r.Checked {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	b.WriteString("checked:")
	for _, k := range keys {
		fmt.Fprintf(&b, " %s=%d", k, r.Checked[k])
	}
	fmt.Fprintf(&b, "\nviolations: %d\n", len(r.Violations))
	for _, v := range r.Violations {
		b.WriteString(v.String())
		b.WriteByte('\n')
	}
	return b.String()
}

// checker carries the inputs through the rules.
type checker struct {
	in   Inputs
	opts Options
	h    *History
	rep  *Report
}

func (c *checker) violate(rule string, at time.Time, subject, format string, args ...any) {
	c.rep.Violations = append(c.rep.Violations, Violation{Rule: rule, At: at, Subject: subject,
		Message: fmt.Sprintf(format, args...)})
}

func (c *checker) count(what string, n int) { c.rep.Checked[what] += n }

// Check runs every rule over the inputs of one run. It does no I/O.
func Check(in Inputs, opts Options) *Report {
	if opts.SignalKeys == nil {
		opts.SignalKeys = DefaultSignalKeys
	}
	h := in.Ledger
	if h == nil {
		h = &History{}
	}
	h.normalize()
	c := &checker{in: in, opts: opts, h: h, rep: &Report{Checked: map[string]int{}}}
	c.checkEvidence()
	c.checkFenceBeforeDelete()
	c.checkOneActor()
	c.checkArrayChangeWindow()
	c.checkUnfenceOnce()
	c.checkArrayRestored()
	c.checkNoActionOnDoubt()
	c.checkDryRun()
	c.checkFootprintCovered()
	c.checkNoRegrant()
	c.checkHeld()
	sort.SliceStable(c.rep.Violations, func(i, j int) bool {
		return c.rep.Violations[i].At.Before(c.rep.Violations[j].At)
	})
	return c.rep
}

// checkEvidence reports inputs that make other rules blind: a record whose
// steps are not in log order with times that go backwards, or array audit
// logs that are not in sequence order.
func (c *checker) checkEvidence() {
	for _, f := range c.h.Fences {
		st := steps(f)
		for i := 1; i < len(st); i++ {
			if st[i].At.Before(st[i-1].At) {
				c.violate(RuleEvidence, st[i].At, f.Cluster+"/"+f.Node,
					"%s: step %s (index %d) is timed before the step %s (index %d) it follows",
					f.ID, st[i].To, st[i].Index, st[i-1].To, st[i-1].Index)
			}
		}
	}
	for _, name := range sortedKeys(c.in.Arrays) {
		entries := c.in.Arrays[name]
		for i := 1; i < len(entries); i++ {
			if entries[i].Seq <= entries[i-1].Seq {
				c.violate(RuleEvidence, entries[i].Time, name,
					"audit entry seq %d follows seq %d: the log is not in order or has duplicates",
					entries[i].Seq, entries[i-1].Seq)
				break
			}
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func splitSubject(s string) (string, string) {
	a, b, _ := strings.Cut(s, "/")
	return a, b
}
