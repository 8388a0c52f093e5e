package auditcheck

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Violation is a pod deletion the arrays' record does not show preceded
// by its node's fence.
type Violation struct {
	Pod, Node, Array string
	At               time.Time
	Problem          string
}

func (v Violation) String() string {
	return fmt.Sprintf("%s: pod %s of node %s deleted, array %s: %s", v.At.UTC().Format(time.RFC3339Nano), v.Pod, v.Node, v.Array, v.Problem)
}

// Cut is the write that cut a node's access on an array before a deletion.
type Cut struct {
	Pod, Node, Array string
	// Seq is the write's sequence number in the array's file; Requester
	// and Path name it.
	Seq       int64
	Requester string
	Method    string
	Path      string
	// Done is when the array answered it; Lead how long before the
	// deletion arrived.
	Done time.Time
	Lead time.Duration
}

// Report is what the check found.
type Report struct {
	// Deletions counts the pod deletions by fenced's users checked.
	Deletions int
	// Cuts are the writes that showed each deletion's fence, one per
	// deletion and array.
	Cuts       []Cut
	Violations []Violation
}

// OK reports whether no deletion lacked its fence.
func (r *Report) OK() bool { return len(r.Violations) == 0 }

func (r *Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d pod deletions by fenced, %d array cuts before them, %d violations", r.Deletions, len(r.Cuts), len(r.Violations))
	for _, v := range r.Violations {
		fmt.Fprintf(&b, "\n  %s", v)
	}
	return b.String()
}

// Options name what the check cannot read from the files.
type Options struct {
	// FencedUsers are the Kubernetes users fenced deletes pods as.
	FencedUsers []string
	// DriverRequesters are the requester tags of the CSI drivers' writes:
	// they give access and take it back on their own account, never as a
	// fence. Default ["csi"].
	DriverRequesters []string
}

// CheckFiles checks every <array>.jsonl in arraysDir against the API
// server's audit log at kubeAudit.
func CheckFiles(arraysDir, kubeAudit string, opts Options) (*Report, error) {
	kf, err := os.Open(kubeAudit)
	if err != nil {
		return nil, fmt.Errorf("open the API server audit log: %w", err)
	}
	defer kf.Close()
	kube, err := readKube(kf, opts.FencedUsers)
	if err != nil {
		return nil, err
	}
	paths, err := filepath.Glob(filepath.Join(arraysDir, "*.jsonl"))
	if err != nil {
		return nil, err
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("no array audit file (*.jsonl) in %s", arraysDir)
	}
	sort.Strings(paths)
	var arrays []*arrayFile
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return nil, fmt.Errorf("open the array audit file: %w", err)
		}
		a, err := readArray(strings.TrimSuffix(filepath.Base(p), ".jsonl"), f)
		_ = f.Close()
		if err != nil {
			return nil, err
		}
		arrays = append(arrays, a)
	}
	return check(kube, arrays, opts), nil
}

// check judges every deletion on every array.
func check(kube *kubeFacts, arrays []*arrayFile, opts Options) *Report {
	drivers := opts.DriverRequesters
	if drivers == nil {
		drivers = []string{"csi"}
	}
	isDriver := func(r string) bool {
		for _, d := range drivers {
			if r == d {
				return true
			}
		}
		return false
	}
	rep := &Report{}
	for _, d := range kube.deletions {
		rep.Deletions++
		node, ok := kube.nodeOf(d.pod, d.at)
		if !ok {
			rep.Violations = append(rep.Violations, Violation{Pod: d.pod, Array: "-", At: d.at,
				Problem: "no binding of the pod to a node before its deletion in the API server audit log"})
			continue
		}
		names := kube.names[node]
		if len(names) == 0 {
			rep.Violations = append(rep.Violations, Violation{Pod: d.pod, Node: node, Array: "-", At: d.at,
				Problem: "the node's creation is not in the API server audit log"})
			continue
		}
		for _, a := range arrays {
			cut, problem := judge(a, names, d.at, isDriver)
			switch {
			case problem != "":
				rep.Violations = append(rep.Violations, Violation{Pod: d.pod, Node: node, Array: a.name, At: d.at, Problem: problem})
			case cut != nil:
				rep.Cuts = append(rep.Cuts, Cut{Pod: d.pod, Node: node, Array: a.name, Seq: cut.Seq, Requester: cut.Requester,
					Method: cut.Method, Path: cut.Path, Done: cut.Done, Lead: d.at.Sub(cut.Done)})
			}
		}
	}
	return rep
}

// judge replays an array's record up to a deletion at t. It returns the
// last write before t that cut the node's access (by a requester that is
// no driver), or why there is none; (nil, "") when the node never had
// access on the array.
func judge(a *arrayFile, names []string, t time.Time, isDriver func(string) bool) (*arrayLine, string) {
	store := map[string]json.RawMessage{}
	for k, v := range a.start {
		store[k] = v
	}
	hadAccess := hasAccess(store, names)
	var cut, grantAfter *arrayLine
	for i := range a.lines {
		l := &a.lines[i]
		if !l.Time.Before(t) {
			break
		}
		// References resolve against the objects as they were before the
		// write.
		named := namedIDs(store, names)
		cuts, grants := false, false
		for _, o := range l.Objects {
			c, g := compare(o.Object, o.Before, o.After, names, named)
			cuts, grants = cuts || c, grants || g
		}
		for _, o := range l.Objects {
			if len(o.After) == 0 || string(o.After) == "null" {
				delete(store, o.Object)
			} else {
				store[o.Object] = o.After
			}
		}
		hadAccess = hadAccess || hasAccess(store, names)
		switch {
		case cuts && !isDriver(l.Requester) && l.Done.Before(t):
			cut, grantAfter = l, nil
		case grants && cut != nil:
			grantAfter = l
		}
	}
	switch {
	case !hadAccess:
		return nil, ""
	case cut == nil:
		return nil, "no write cut the node's access before the deletion"
	case grantAfter != nil:
		return nil, fmt.Sprintf("write %d (%s %s by %q) gave the node access again after the cut (write %d) and before the deletion",
			grantAfter.Seq, grantAfter.Method, grantAfter.Path, grantAfter.Requester, cut.Seq)
	}
	return cut, ""
}

// namesNode reports whether s names the node: it is one of names, or holds
// one between separators (a host "csi-k8s-worker-2", an FQDN
// "worker-2.cluster.test").
func namesNode(s string, names []string) bool {
	for _, n := range names {
		for from := 0; ; {
			i := strings.Index(s[from:], n)
			if i < 0 {
				break
			}
			i += from
			end := i + len(n)
			before := i == 0 || strings.ContainsRune("-_.,=:/@", rune(s[i-1]))
			after := end == len(s) || strings.ContainsRune(".,=:/", rune(s[end]))
			if before && after {
				return true
			}
			from = i + 1
		}
	}
	return false
}

// direct reports whether any string of an object names the node.
func direct(raw json.RawMessage, names []string) bool {
	for _, s := range stringsOf(raw) {
		if namesNode(s, names) {
			return true
		}
	}
	return false
}

// namedIDs returns the ids of the objects that name the node directly.
func namedIDs(store map[string]json.RawMessage, names []string) map[string]bool {
	out := map[string]bool{}
	for k, v := range store {
		if direct(v, names) {
			for _, id := range identifiers(k, v) {
				out[id] = true
			}
		}
	}
	return out
}

// ownNames reports whether an object's own ids or names name the node:
// an object of the node's (its host, its SDC).
func ownNames(object string, raw json.RawMessage, names []string) bool {
	for _, id := range identifiers(object, raw) {
		if namesNode(id, names) {
			return true
		}
	}
	return false
}

// hasAccess reports whether an object that is not the node's own refers
// to the node: a volume mapped to its SDC, an export listing its address,
// a masking view of its host.
func hasAccess(store map[string]json.RawMessage, names []string) bool {
	named := namedIDs(store, names)
	for k, v := range store {
		if ownNames(k, v, names) {
			continue
		}
		for _, s := range stringsOf(v) {
			if named[s] || namesNode(s, names) {
				return true
			}
		}
	}
	return false
}

// compare says whether a change of one object took access from the node
// (cut) or gave it (grant): a string naming the node, or an id of an
// object naming it, left or came; or, for an object of the node's own,
// any string left or came.
func compare(object string, before, after json.RawMessage, names []string, named map[string]bool) (cut, grant bool) {
	own := ownNames(object, before, names) || ownNames(object, after, names)
	count := func(raw json.RawMessage) map[string]int {
		m := map[string]int{}
		for _, s := range stringsOf(raw) {
			if own || named[s] || namesNode(s, names) {
				m[s]++
			}
		}
		return m
	}
	b, a := count(before), count(after)
	for s, n := range b {
		if a[s] < n {
			cut = true
		}
	}
	for s, n := range a {
		if b[s] < n {
			grant = true
		}
	}
	return cut, grant
}
