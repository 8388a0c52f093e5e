package e2e

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sort"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// SecondClusterName is the name of the second test bed cluster
// (Options.SecondCluster).
const SecondClusterName = "e2e-2"

// clusterSpec is one test bed cluster of a run.
type clusterSpec struct {
	name, prefix string
	nodes        int
}

// ExtraClusterName is the name of the i-th (from 0) of
// Options.ExtraClusters: e2e-x1, e2e-x2, ...
func ExtraClusterName(i int) string { return fmt.Sprintf("e2e-x%d", i+1) }

// ExtraClusterNode is the name of the n-th (from 1) node of the i-th (from
// 0) of Options.ExtraClusters: x1-worker-1, ... The prefix keeps node names
// unique across the run's clusters, as the harness keys nodes by name.
func ExtraClusterNode(i, n int) string { return fmt.Sprintf("%s-%d", extraClusterPrefix(i), n) }

func extraClusterPrefix(i int) string { return fmt.Sprintf("x%d-worker", i+1) }

// clusterSpecs lists the run's clusters: ClusterName with worker-N nodes,
// SecondClusterName with other-N nodes when asked for, then the extra
// clusters.
func (h *Harness) clusterSpecs() []clusterSpec {
	return clusterSpecs(h.opts)
}

func clusterSpecs(opts Options) []clusterSpec {
	out := []clusterSpec{{ClusterName, "worker", opts.Nodes}}
	if opts.SecondCluster > 0 {
		out = append(out, clusterSpec{SecondClusterName, "other", opts.SecondCluster})
	}
	for i, n := range opts.ExtraClusters {
		out = append(out, clusterSpec{ExtraClusterName(i), extraClusterPrefix(i), n})
	}
	return out
}

// ClusterOf returns the cluster a node belongs to.
func (h *Harness) ClusterOf(node string) string {
	if c, ok := h.nodeCluster[node]; ok {
		return c
	}
	return ClusterName
}

// apiProxyOf names the proxy between a replica and a cluster's apiserver.
func apiProxyOf(replica, cluster string) string {
	if cluster == ClusterName {
		return apiProxy(replica)
	}
	return apiProxy(replica) + "@" + cluster
}

// writeKubeconfig writes a replica's kubeconfig for a cluster (through its
// proxy, with the replica's own token) and returns its path.
func (h *Harness) writeKubeconfig(id, cluster, token string) (string, error) {
	cp := h.CPs[cluster]
	api, err := url.Parse(cp.APIServerURL)
	if err != nil {
		return "", fmt.Errorf("apiserver URL of %s: %w", cluster, err)
	}
	caPEM, err := os.ReadFile(cp.CAFile)
	if err != nil {
		return "", fmt.Errorf("read the apiserver CA of %s: %w", cluster, err)
	}
	addr, err := h.Net.Add(apiProxyOf(id, cluster), api.Host)
	if err != nil {
		return "", err
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters[cluster] = &clientcmdapi.Cluster{Server: "https://" + addr, CertificateAuthorityData: caPEM}
	kc.AuthInfos["fenced"] = &clientcmdapi.AuthInfo{Token: token}
	kc.Contexts[cluster] = &clientcmdapi.Context{Cluster: cluster, AuthInfo: "fenced"}
	kc.CurrentContext = cluster
	path := filepath.Join(h.Replicas[id].Dir, "kubeconfig")
	if cluster != ClusterName {
		path += "-" + cluster
	}
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return "", fmt.Errorf("write kubeconfig of %s for %s: %w", id, cluster, err)
	}
	return path, nil
}

// NodesOf returns the names of a cluster's nodes.
func (h *Harness) NodesOf(cluster string) []string {
	var out []string
	for name := range h.Nodes {
		if h.ClusterOf(name) == cluster {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}
