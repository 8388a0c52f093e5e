package auditcheck

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"strings"
	"time"
)

// kubeEvent is the part of an audit.k8s.io/v1 Event the check reads.
type kubeEvent struct {
	Stage string `json:"stage"`
	Verb  string `json:"verb"`
	User  struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
	Response *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	RequestObject json.RawMessage `json:"requestObject"`
	Received      time.Time       `json:"requestReceivedTimestamp"`
}

func (e kubeEvent) ok() bool {
	return e.Stage == "ResponseComplete" && e.ObjectRef != nil && e.Response != nil &&
		e.Response.Code >= 200 && e.Response.Code < 300
}

// nodeIDAnnotation is where the kubelet keeps the CSI node IDs of a node.
const nodeIDAnnotation = "csi.volume.kubernetes.io/nodeid"

// binding is a pod bound to a node.
type binding struct {
	pod  string // namespace/name
	node string
	at   time.Time
}

// deletion is a pod deleted by one of fenced's users.
type deletion struct {
	pod  string
	user string
	at   time.Time
}

// kubeFacts is what the API server's audit log says.
type kubeFacts struct {
	// names maps a node to the strings that name it.
	names     map[string][]string
	bindings  []binding
	deletions []deletion
}

// readKube reads an API server audit log. A last line without its newline
// (still being written) is left out.
func readKube(r io.Reader, fencedUsers []string) (*kubeFacts, error) {
	users := map[string]bool{}
	for _, u := range fencedUsers {
		users[u] = true
	}
	out := &kubeFacts{names: map[string][]string{}}
	br := bufio.NewReader(r)
	for line := 1; ; line++ {
		b, err := br.ReadBytes('\n')
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read the API server audit log: %w", err)
		}
		var e kubeEvent
		if err := json.Unmarshal(b, &e); err != nil {
			return nil, fmt.Errorf("API server audit log line %d: %w", line, err)
		}
		if !e.ok() {
			continue
		}
		ref := e.ObjectRef
		switch {
		case e.Verb == "create" && ref.Resource == "nodes" && ref.Subresource == "":
			var n struct {
				Metadata struct {
					Name        string            `json:"name"`
					Annotations map[string]string `json:"annotations"`
				} `json:"metadata"`
			}
			if err := json.Unmarshal(e.RequestObject, &n); err != nil || n.Metadata.Name == "" {
				return nil, fmt.Errorf("API server audit log line %d: node creation without the node in its requestObject (the audit policy must log nodes at Request level)", line)
			}
			out.names[n.Metadata.Name] = nodeNames(n.Metadata.Name, n.Metadata.Annotations[nodeIDAnnotation])
		case e.Verb == "create" && ref.Resource == "pods" && ref.Subresource == "binding":
			var b struct {
				Target struct {
					Name string `json:"name"`
				} `json:"target"`
			}
			if err := json.Unmarshal(e.RequestObject, &b); err != nil || b.Target.Name == "" {
				return nil, fmt.Errorf("API server audit log line %d: binding of %s/%s without its target node (the audit policy must log pods/binding at Request level)", line, ref.Namespace, ref.Name)
			}
			out.bindings = append(out.bindings, binding{pod: ref.Namespace + "/" + ref.Name, node: b.Target.Name, at: e.Received})
		case e.Verb == "delete" && ref.Resource == "pods" && ref.Subresource == "" && users[e.User.Username]:
			out.deletions = append(out.deletions, deletion{pod: ref.Namespace + "/" + ref.Name, user: e.User.Username, at: e.Received})
		}
	}
}

// nodeOf is the node pod was last bound to before t.
func (k *kubeFacts) nodeOf(pod string, t time.Time) (string, bool) {
	node, found := "", false
	for _, b := range k.bindings {
		if b.pod == pod && !b.at.After(t) {
			node, found = b.node, true
		}
	}
	return node, found
}

// nodeNames returns the strings that name a node: its name, and from each
// CSI node ID (a JSON object of driver to ID) the ID itself, its parts
// between "," and "=#=#=" (csi-unity's "<name>,<FQDN>", csi-isilon's
// "<name>=#=#=<FQDN>=#=#=<IP>") and any IP address between "-"
// (csi-powerstore's "<prefix>-<machine ID>-<IP>").
func nodeNames(node, idsJSON string) []string {
	set := map[string]bool{node: true}
	var ids map[string]string
	_ = json.Unmarshal([]byte(idsJSON), &ids)
	for _, id := range ids {
		if id == "" {
			continue
		}
		set[id] = true
		for _, part := range strings.FieldsFunc(strings.ReplaceAll(id, "=#=#=", ","), func(r rune) bool { return r == ',' }) {
			set[part] = true
		}
		for _, part := range strings.Split(id, "-") {
			if _, err := netip.ParseAddr(part); err == nil {
				set[part] = true
			}
		}
	}
	var out []string
	for s := range set {
		if len(s) >= 3 {
			out = append(out, s)
		}
	}
	return out
}
