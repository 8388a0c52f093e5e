package testbed

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// NodeState is what a simulated node is doing.
type NodeState string

// Node states, changed by the fault methods of Node.
const (
	// NodeUp: the Lease is renewed, kwok keeps the Node's status and
	// pods, and the kubelet port accepts.
	NodeUp NodeState = "up"
	// NodeKilled: no heartbeat and the kubelet port refuses connections.
	NodeKilled NodeState = "killed"
	// NodeHung: no heartbeat but the kubelet port still accepts connections.
	NodeHung NodeState = "hung"
)

// Node is a simulated worker node: a Node object managed by kwok, its
// CSINode, and a TLS listener on <IP>:10250 standing in for its kubelet.
type Node struct {
	// Spec is the node's completed spec (IP, identities, first boot ID).
	Spec NodeSpec

	cp *ControlPlane

	mu        sync.Mutex
	state     NodeState
	bootID    string
	uid       types.UID
	lock      *ipLock
	listener  *kubeletListener
	heartbeat *heartbeat
}

// Name returns the node's name.
func (n *Node) Name() string { return n.Spec.Name }

// IP returns the node's InternalIP.
func (n *Node) IP() string { return n.Spec.IP }

// KubeletAddr returns <IP>:10250, the address of the node's kubelet listener.
func (n *Node) KubeletAddr() string { return net.JoinHostPort(n.Spec.IP, strconv.Itoa(KubeletPort)) }

// BootID returns the boot ID the node currently reports.
func (n *Node) BootID() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.bootID
}

// State returns what the node is doing.
func (n *Node) State() NodeState {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.state
}

// release closes the listener and gives up the IP reservation; the
// heartbeat must have been stopped.
func (n *Node) release() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.listener.close()
	n.listener = nil
	n.lock.release()
	n.lock = nil
}

// Node returns the simulated node called name, or nil.
func (cp *ControlPlane) Node(name string) *Node {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	return cp.nodes[name]
}

// AddNodes creates one kwok-managed worker node per spec, through the API:
// the Node (labels type=kwok and kubernetes.io/hostname, the annotation
// volumes.kubernetes.io/controller-managed-attach-detach=true and the CSI
// node-ID annotation), its status (InternalIP, Hostname, kubelet port,
// boot ID, machine ID, capacity) and its CSINode listing the five Dell CSI
// drivers. Each node gets a kubelet listener on <IP>:10250. It returns when
// every node was created; use WaitNodesReady to wait for kwok.
func (cp *ControlPlane) AddNodes(ctx context.Context, specs ...NodeSpec) ([]*Node, error) {
	return cp.addNodes(ctx, false, specs)
}

// addNodes adds the nodes of specs, managed by kwok or, when light, by the
// light writer (AddLightNodes).
func (cp *ControlPlane) addNodes(ctx context.Context, light bool, specs []NodeSpec) ([]*Node, error) {
	nodes := make([]*Node, len(specs))
	// Reserve addresses one at a time so explicit IPs are not handed out
	// twice. The addresses in use are a set, and each generated address
	// is looked for after the batch's last one: with thousands of nodes a
	// scan from the first address, each candidate compared with every
	// node, took minutes (cubic in the nodes).
	used := map[string]bool{}
	for _, s := range specs {
		if s.IP != "" {
			used[s.IP] = true
		}
	}
	cp.mu.Lock()
	for _, n := range cp.nodes {
		used[n.Spec.IP] = true
	}
	cp.mu.Unlock()
	taken := func(ip string) bool { return used[ip] }
	var from netip.Addr
	// Generated port names have 24 random bits: among thousands of nodes
	// two would clash now and then, which the arrays (and the fixture)
	// refuse. Draw again until they are unique.
	wwpnUsed := map[string]bool{}
	cp.mu.Lock()
	for _, n := range cp.nodes {
		for _, w := range n.Spec.WWPNs {
			wwpnUsed[w] = true
		}
	}
	cp.mu.Unlock()
	clash := func(ws []string) bool {
		return len(ws) != 2 || ws[0] == ws[1] || wwpnUsed[ws[0]] || wwpnUsed[ws[1]]
	}
	var err error
	for i, s := range specs {
		generated := len(s.WWPNs) == 0
		if s, err = s.Complete(); err != nil {
			break
		}
		for generated && clash(s.WWPNs) {
			s.WWPNs = newWWPNs()
		}
		for _, w := range s.WWPNs {
			wwpnUsed[w] = true
		}
		cp.mu.Lock()
		_, dup := cp.nodes[s.Name]
		cp.mu.Unlock()
		if dup {
			err = fmt.Errorf("add node %s: already exists", s.Name)
			break
		}
		lock, kl, ip, rerr := cp.reserveIP(s.IP, from, taken)
		if rerr != nil {
			err = fmt.Errorf("add node %s: %w", s.Name, rerr)
			break
		}
		used[ip] = true
		if s.IP == "" {
			from = netip.MustParseAddr(ip).Next()
		}
		s.IP = ip
		nodes[i] = &Node{Spec: s, cp: cp, state: NodeUp, bootID: s.BootID, lock: lock, listener: kl}
		cp.mu.Lock()
		cp.nodes[s.Name] = nodes[i]
		cp.mu.Unlock()
	}
	if err != nil {
		return nil, err
	}

	const workers = 16
	work := make(chan *Node)
	errs := make(chan error, len(nodes))
	var wg sync.WaitGroup
	for range min(workers, len(nodes)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range work {
				if err := cp.registerNode(ctx, n, light); err != nil {
					errs <- err
				}
			}
		}()
	}
	for _, n := range nodes {
		work <- n
	}
	close(work)
	wg.Wait()
	close(errs)
	var all []error
	for e := range errs {
		all = append(all, e)
	}
	if len(all) > 0 {
		return nil, fmt.Errorf("add %d nodes: %d failed: %w", len(nodes), len(all), errors.Join(all[:min(len(all), 5)]...))
	}
	return nodes, nil
}

// registerNode creates the Node, sets its status, creates its CSINode and
// labels it for kwok, so kwok's first status write keeps the addresses and
// boot ID set here, and finally starts renewing its Lease. A light node is
// handed to the light writer instead of kwok and the lease controller.
func (cp *ControlPlane) registerNode(ctx context.Context, n *Node, light bool) error {
	s := n.Spec
	ids, err := json.Marshal(s.CSINodeIDs())
	if err != nil {
		return fmt.Errorf("encode CSI node IDs of %s: %w", s.Name, err)
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: s.Name,
			Labels: map[string]string{
				corev1.LabelHostname:   s.Name,
				corev1.LabelOSStable:   "linux",
				corev1.LabelArchStable: "amd64",
			},
			Annotations: map[string]string{
				"volumes.kubernetes.io/controller-managed-attach-detach": "true",
				"csi.volume.kubernetes.io/nodeid":                        string(ids),
				"node.alpha.kubernetes.io/ttl":                           "0",
			},
		},
	}
	created, err := cp.Client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create node %s: %w", s.Name, err)
	}
	n.setUID(created.UID)
	if s.NVMeTCP {
		if err := cp.nameNVMeHost(ctx, n, string(created.UID)); err != nil {
			return err
		}
		s = n.Spec
	}
	if err := cp.patchNodeStatus(ctx, s.Name, nodeStatus(s, n.BootID())); err != nil {
		return err
	}
	csiNode := &storagev1.CSINode{
		ObjectMeta: metav1.ObjectMeta{
			Name: s.Name,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1", Kind: "Node", Name: s.Name, UID: created.UID,
			}},
		},
	}
	csiIDs := s.CSINodeIDs()
	for _, d := range s.CSIDrivers() {
		csiNode.Spec.Drivers = append(csiNode.Spec.Drivers, storagev1.CSINodeDriver{Name: d, NodeID: csiIDs[d]})
	}
	if _, err := cp.Client.StorageV1().CSINodes().Create(ctx, csiNode, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create CSINode %s: %w", s.Name, err)
	}
	if light {
		return cp.light.add(ctx, n)
	}
	if err := cp.setKwokLabel(ctx, s.Name, true); err != nil {
		return err
	}
	n.startHeartbeat()
	return nil
}

// nodeStatus is the part of a Node's status the kubelet would report about
// the machine; kwok keeps these fields when it writes conditions.
func nodeStatus(s NodeSpec, bootID string) map[string]any {
	res := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("32"),
		corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	return map[string]any{
		"addresses": []corev1.NodeAddress{
			{Type: corev1.NodeInternalIP, Address: s.IP},
			{Type: corev1.NodeHostName, Address: s.Name},
		},
		"daemonEndpoints": corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: KubeletPort}},
		"capacity":        res,
		"allocatable":     res,
		"nodeInfo": corev1.NodeSystemInfo{
			MachineID:               s.MachineID,
			SystemUUID:              s.SDCGUID,
			BootID:                  bootID,
			KernelVersion:           "6.1.0-testbed",
			OSImage:                 "Debian GNU/Linux 12 (bookworm)",
			ContainerRuntimeVersion: "kwok://" + KwokVersion,
			KubeletVersion:          KubernetesVersion,
			OperatingSystem:         "linux",
			Architecture:            "amd64",
		},
	}
}

// patchNodeStatus merges fields into a Node's status.
func (cp *ControlPlane) patchNodeStatus(ctx context.Context, name string, status map[string]any) error {
	data, err := json.Marshal(map[string]any{"status": status})
	if err != nil {
		return fmt.Errorf("encode status of node %s: %w", name, err)
	}
	if _, err := cp.Client.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, data, metav1.PatchOptions{}, "status"); err != nil {
		return fmt.Errorf("patch status of node %s: %w", name, err)
	}
	return nil
}

// setKwokLabel adds or removes the label that makes kwok manage a node.
func (cp *ControlPlane) setKwokLabel(ctx context.Context, name string, on bool) error {
	var value any // nil removes the label
	if on {
		value = KwokLabelValue
	}
	data, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]any{KwokLabel: value}}})
	if err != nil {
		return fmt.Errorf("encode label patch: %w", err)
	}
	if _, err := cp.Client.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, data, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("set label %s on node %s to %v: %w", KwokLabel, name, on, err)
	}
	return nil
}

// WaitNodesReady waits until every named node is Ready and its Lease in
// kube-node-lease was renewed after the call began.
func (cp *ControlPlane) WaitNodesReady(ctx context.Context, names ...string) error {
	since := time.Now().Add(-time.Second) // renewTime has microsecond precision; allow for clock rounding
	pending := map[string]bool{}
	for _, n := range names {
		pending[n] = true
	}
	for {
		nodes, err := cp.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err == nil {
			for _, n := range nodes.Items {
				if pending[n.Name] && nodeReady(&n) {
					pending[n.Name] = false
				}
			}
		}
		leases, err := cp.Client.CoordinationV1().Leases(corev1.NamespaceNodeLease).List(ctx, metav1.ListOptions{})
		if err == nil {
			renewed := map[string]bool{}
			for _, l := range leases.Items {
				if l.Spec.RenewTime != nil && l.Spec.RenewTime.After(since) {
					renewed[l.Name] = true
				}
			}
			for name, p := range pending {
				if !p && renewed[name] {
					delete(pending, name)
				}
			}
		}
		if len(pending) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for %d nodes to be ready: %d not ready: %w", len(names), len(pending), ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// nodeReady reports whether a Node's Ready condition is True.
func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// NodeLease returns the node's Lease in kube-node-lease.
func (cp *ControlPlane) NodeLease(ctx context.Context, name string) (*coordinationv1.Lease, error) {
	l, err := cp.Client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("get lease of node %s: %w", name, err)
	}
	return l, nil
}

// LeaseRenewTime returns when the node's Lease was last renewed (zero if never).
func (cp *ControlPlane) LeaseRenewTime(ctx context.Context, name string) (time.Time, error) {
	l, err := cp.NodeLease(ctx, name)
	if err != nil {
		return time.Time{}, err
	}
	if l.Spec.RenewTime == nil {
		return time.Time{}, nil
	}
	return l.Spec.RenewTime.Time, nil
}

// nameNVMeHost sets an NVMe/TCP node's csi-vxflexos node ID from its Node
// UID, "<IP>-<hex sha256(UID)>" cut to 31 characters (dell/csi-powerflex
// service/service.go generateNodeID), and writes it into the Node's
// node-ID annotation as the kubelet does when the driver registers.
func (cp *ControlPlane) nameNVMeHost(ctx context.Context, n *Node, uid string) error {
	sum := sha256.Sum256([]byte(uid))
	n.Spec.NVMeHost = (n.Spec.IP + "-" + hex.EncodeToString(sum[:]))[:31]
	ids, err := json.Marshal(n.Spec.CSINodeIDs())
	if err != nil {
		return fmt.Errorf("encode CSI node IDs of %s: %w", n.Spec.Name, err)
	}
	data, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{
		"csi.volume.kubernetes.io/nodeid": string(ids)}}})
	if err != nil {
		return fmt.Errorf("encode node-ID annotation of %s: %w", n.Spec.Name, err)
	}
	if _, err := cp.Client.CoreV1().Nodes().Patch(ctx, n.Spec.Name, types.MergePatchType, data, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("set the node-ID annotation of %s: %w", n.Spec.Name, err)
	}
	return nil
}
