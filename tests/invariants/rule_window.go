package invariants

import (
	"sort"
	"strings"

	"github.com/fenced-project/fenced/arrayclients"
	"github.com/fenced-project/fenced/cluster/ledger"
)

// nodeTokens are the identifiers of one node on one array.
type nodeTokens struct {
	cluster, node string
	tokens        []string
}

// tokensOnArray returns, per node with a record that names array, the
// node's identifiers there (object ID and name, keys), from every record's
// identity set and plans.
func (c *checker) tokensOnArray(array string) []nodeTokens {
	byNode := map[string]map[string]bool{}
	add := func(key string, id arrayclients.Identity) {
		m := byNode[key]
		if m == nil {
			m = map[string]bool{}
			byNode[key] = m
		}
		for _, t := range append([]string{id.ObjectID, id.ObjectName}, id.Keys...) {
			if len(t) >= 3 {
				m[t] = true
			}
		}
	}
	for _, f := range c.h.Fences {
		key := f.Cluster + "/" + f.Node
		if id, ok := f.Identities[array]; ok {
			add(key, id)
		}
		for _, p := range f.Plans {
			if p.Array == array {
				add(key, p.Identity)
			}
		}
	}
	var out []nodeTokens
	for _, key := range sortedKeys(byNode) {
		cl, n := splitSubject(key)
		nt := nodeTokens{cluster: cl, node: n}
		for t := range byNode[key] {
			nt.tokens = append(nt.tokens, t)
		}
		sort.Strings(nt.tokens)
		out = append(out, nt)
	}
	return out
}

// mentions reports whether s contains token as a whole word: not preceded
// or followed by a letter, digit, '_', '-' or '.'.
func mentions(s, token string) bool {
	if token == "" {
		return false
	}
	ls, lt := strings.ToLower(s), strings.ToLower(token)
	for off := 0; ; {
		i := strings.Index(ls[off:], lt)
		if i < 0 {
			return false
		}
		i += off
		end := i + len(lt)
		if (i == 0 || !wordByte(ls[i-1])) && (end == len(ls) || !wordByte(ls[end])) {
			return true
		}
		off = i + 1
	}
}

func wordByte(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= '0' && b <= '9' || b == '_' || b == '-' || b == '.'
}

func mentionsAny(s string, tokens []string) bool {
	for _, t := range tokens {
		if mentions(s, t) {
			return true
		}
	}
	return false
}

// checkArrayChangeWindow is rule array-change-window (see the package doc).
// A write is attributed to a node by its path and its change summary; a
// write that names the node only in its body (a whole export client list,
// a LUN's host-access list) is not attributed, since that body also names
// every other node on the list.
func (c *checker) checkArrayChangeWindow() {
	for _, arr := range sortedKeys(c.in.Arrays) {
		nodes := c.tokensOnArray(arr)
		if len(nodes) == 0 {
			continue
		}
		for _, e := range c.in.Arrays[arr] {
			if !e.Changed || c.opts.isDriver(e.Remote) {
				continue
			}
			text := e.Path + " " + e.Change
			for _, nt := range nodes {
				if !mentionsAny(text, nt.tokens) {
					continue
				}
				c.count(RuleArrayChangeWindow, 1)
				ok := false
				for _, f := range c.h.fencesOf(nt.cluster, nt.node) {
					for _, w := range windows(f, ledger.StateFencing, ledger.StateUnfenceIntent) {
						if w.From.Before(e.Time) && w.contains(e.Time) {
							ok = true
						}
					}
				}
				if !ok {
					c.violate(RuleArrayChangeWindow, e.Time, nt.cluster+"/"+nt.node,
						"array %s: write %s %s (seq %d, change %q) while no record of the node allowed array changes (%s)",
						arr, e.Method, e.Path, e.Seq, e.Change, c.fenceSummary(nt.cluster, nt.node))
				}
			}
		}
	}
}
