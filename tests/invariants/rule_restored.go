package invariants

import (
	"strings"

	"github.com/fenced-project/fenced/cluster/ledger"
)

// stillFenced reports whether the record's last step leaves the node
// fenced, or possibly fenced, on its arrays at the end of the run.
func stillFenced(f *ledger.Fence) bool {
	st := steps(f)
	if len(st) == 0 {
		return false
	}
	switch st[len(st)-1].To {
	case ledger.StateIntent, ledger.StateRestored, ledger.StateUntainted, ledger.StateClosed, ledger.StateAborted:
		return false
	}
	return true
}

// checkArrayRestored is rule array-restored (see the package doc).
func (c *checker) checkArrayRestored() {
	for _, arr := range sortedKeys(c.in.ArrayEnd) {
		start, ok := c.in.ArrayStart[arr]
		if !ok {
			c.violate(RuleEvidence, timeZero, arr, "an end state dump but no start state dump")
			continue
		}
		diffs, err := DiffStates(start, c.in.ArrayEnd[arr], c.opts.SignalKeys)
		if err != nil {
			c.violate(RuleEvidence, timeZero, arr, "compare state dumps: %v", err)
			continue
		}
		c.count(RuleArrayRestored, 1)
		var fencedTokens []nodeTokens
		for _, nt := range c.tokensOnArray(arr) {
			for _, f := range c.h.fencesOf(nt.cluster, nt.node) {
				if stillFenced(f) {
					fencedTokens = append(fencedTokens, nt)
					break
				}
			}
		}
		moved := c.movedObjects(arr)
		for _, d := range diffs {
			text := d.Path + " " + d.Before + " " + d.After
			explained := false
			for _, nt := range fencedTokens {
				if mentionsAny(text, nt.tokens) {
					explained = true
					break
				}
			}
			if !explained && mentionsAny(text, moved) {
				// A volume that moved to another node, or was detached from
				// this one, before the unfence: not given back (invariant 5;
				// no-regrant checks that it was not).
				explained = true
			}
			if !explained && (c.driverWrote(arr, d.Path) || c.driverListWrote(arr, d)) {
				// The last write there was not fenced's (a CSI driver
				// publishing a volume that moved): not fenced's to restore.
				explained = true
			}
			if !explained && c.reregistered(arr, d, diffs) {
				// Removed here and now under another object that a CSI
				// driver wrote: the node registered again under a new
				// name (a new IP) with what fenced had removed.
				explained = true
			}
			if !explained {
				c.violate(RuleArrayRestored, timeZero, arr, "state differs from the start at %s, and no node still fenced explains it", d)
			}
		}
	}
}

// reregistered reports whether difference d removed an element (a host's
// initiator) that another difference shows added under another object
// whose last write was a CSI driver's: csi-powerstore's node plugin
// registering a node that came back with a new IP under a new host, with
// the initiators the fence left free. What fenced removed then belongs to
// the node's new host; giving it back to the old one is what the array
// refuses.
func (c *checker) reregistered(array string, d Difference, diffs []Difference) bool {
	if d.Before == "" || d.After != "" {
		return false
	}
	for _, o := range diffs {
		if o.Path == d.Path || strings.HasPrefix(o.Path, d.Path) || strings.HasPrefix(d.Path, o.Path) || o.After == "" {
			continue
		}
		if strings.Contains(o.After, d.Before) && c.driverWrote(array, o.Path) {
			return true
		}
	}
	return false
}

// driverListWrote is driverWrote for a difference of a list compared as a
// multiset ("$.storageGroups[sg].volumes[-]"), which the audit names by
// position: the last write that changed the list must be a driver's, and
// the element must name no node fenced on the array (a node's own entry
// missing after its unfence is fenced's to give back, whoever wrote the
// list last).
func (c *checker) driverListWrote(array string, d Difference) bool {
	list, ok := "", false
	for _, suffix := range []string{"[-]", "[+]", "(order)"} {
		if p, cut := strings.CutSuffix(d.Path, suffix); cut {
			list, ok = p, true
		}
	}
	if !ok {
		return false
	}
	for _, nt := range c.tokensOnArray(array) {
		if mentionsAny(d.Before+" "+d.After, nt.tokens) {
			return false
		}
	}
	return c.driverWrote(array, list)
}

// driverWrote reports whether the last audited write that changed path (or
// a path above or below it) on the array came from a CSI driver.
func (c *checker) driverWrote(array, path string) bool {
	last := -1
	for i, e := range c.in.Arrays[array] {
		if !e.Changed {
			continue
		}
		for _, ch := range strings.Fields(e.Change) {
			p := strings.TrimLeft(ch, "+-~")
			if strings.HasPrefix(path, p) || strings.HasPrefix(p, path) {
				last = i
				break
			}
		}
	}
	return last >= 0 && c.opts.isDriver(c.in.Arrays[array][last].Remote)
}

// movedObjects names the objects on the array of footprint volumes that
// Kubernetes no longer wanted on the fenced node when the record's unfence
// was restored: held by another node then, or detached from the node (its
// VolumeAttachment deleted, e.g. by the force-detach that follows the
// out-of-service taint). Invariant 5 gives neither back.
func (c *checker) movedObjects(array string) []string {
	var out []string
	for _, f := range c.h.Fences {
		from, to, ok := restoreWindow(f)
		if !ok || !f.FootprintRecorded {
			continue
		}
		t := to.At
		if t.IsZero() {
			t = from.At
		}
		for _, v := range f.Footprint {
			if v.MultiNode || v.Handle == "" || v.Driver == "" {
				continue
			}
			n, attached := attachedAt(c.in.Placements[f.Cluster], AttachmentName(v.Handle, v.Driver, f.Node), t)
			wanted := attached && n == f.Node
			if wanted && c.holderAt(f.Cluster, v, f.Node, t) == "" {
				continue
			}
			for _, pl := range v.Placements {
				if pl.Array == array {
					out = append(out, pl.Object)
				}
			}
		}
	}
	return out
}
