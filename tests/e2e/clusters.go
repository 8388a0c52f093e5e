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

// clusterSpecs lists the run's clusters: ClusterName with worker-N nodes,
// and SecondClusterName with other-N nodes when asked for.
func (h *Harness) clusterSpecs() []clusterSpec {
	out := []clusterSpec{{ClusterName, "worker", h.opts.Nodes}}
	if h.opts.SecondCluster > 0 {
		out = append(out, clusterSpec{SecondClusterName, "other", h.opts.SecondCluster})
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
