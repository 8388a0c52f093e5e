package kube

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"

	"github.com/fenced-project/fenced/arrayclients"
	"github.com/fenced-project/fenced/arrayclients/powerscale"
)

// NodeInputs builds what the arrays resolve a node's identity from: its
// InternalIP and ExternalIP addresses (in the Node's order, without
// duplicates), its Hostname address, an FQDN (the first InternalDNS or
// ExternalDNS address with a dot, else a Hostname or node name with a dot),
// the IPs of its csi-isilon AzNetwork labels (powerscale.PowerScaleLabelIPs)
// and the node ID each CSI driver reported in the CSINode. csi may be nil.
// Override is left for the caller (configuration).
func NodeInputs(cluster string, node *corev1.Node, csi *storagev1.CSINode) arrayclients.Node {
	out := arrayclients.Node{Cluster: cluster}
	if node == nil {
		return out
	}
	out.Name = node.Name
	out.LabelIPs = powerscale.PowerScaleLabelIPs(node.Labels)
	var dns []string
	for _, a := range node.Status.Addresses {
		switch a.Type {
		case corev1.NodeInternalIP, corev1.NodeExternalIP:
			if a.Address != "" && !slices.Contains(out.Addresses, a.Address) {
				out.Addresses = append(out.Addresses, a.Address)
			}
		case corev1.NodeHostName:
			if out.Hostname == "" {
				out.Hostname = a.Address
			}
		case corev1.NodeInternalDNS, corev1.NodeExternalDNS:
			dns = append(dns, a.Address)
		}
	}
	for _, cand := range append(dns, out.Hostname, node.Name) {
		if strings.Contains(cand, ".") && !strings.HasSuffix(cand, ".") {
			out.FQDN = cand
			break
		}
	}
	if csi != nil {
		for _, d := range csi.Spec.Drivers {
			if d.Name == "" || d.NodeID == "" {
				continue
			}
			if out.CSINodeIDs == nil {
				out.CSINodeIDs = map[string]string{}
			}
			out.CSINodeIDs[d.Name] = d.NodeID
		}
	}
	return out
}
