// Package kube is fenced's access to the Kubernetes API servers of the
// clusters it protects: clientsets built from a kubeconfig, shared informers
// for Nodes, node Leases and CSINodes, a liveness check of the API server,
// a direct probe of a node's kubelet port, and the conversion of a Node and
// its CSINode into the identity inputs the arrays are resolved from.
package kube

import (
	"errors"
	"fmt"
	"net"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// LeaseNamespace is where kubelets renew their node Leases.
const LeaseNamespace = "kube-node-lease"

// ErrNoKubeletAddress means a Node has no InternalIP to probe.
var ErrNoKubeletAddress = errors.New("node has no InternalIP address")

// Config says how to reach one cluster's API server.
type Config struct {
	// Kubeconfig is the path of the kubeconfig file. Required.
	Kubeconfig string
	// Context selects a kubeconfig context; empty uses the current one.
	Context string
	// QPS and Burst bound the client's request rate. Defaults 100 and
	// 200: informers cost one list and one watch each; the rest are
	// liveness checks and the detector's Lease read-backs, one per probed
	// node every poll interval. A hundred nodes dying at once (a rack)
	// are fifty read-backs a second on each replica: at 20 a second the
	// probes queued behind the limiter and each dying node's kubelet and
	// Lease evidence came seconds late (the storm in bench/results.md).
	QPS   float32
	Burst int
	// FenceQPS and FenceBurst bound the fencing pipeline's own client
	// (Clients.Fence). Defaults 100 and 200: a fence costs about ten
	// requests plus two per pod, and a hundred nodes dying at once must
	// not queue for a minute behind the client's rate limiter, nor behind
	// the detector's reads.
	FenceQPS   float32
	FenceBurst int
	// RequestTimeout bounds every request that is not a watch. Default 10s.
	RequestTimeout time.Duration
	// DialTimeout bounds TCP connects to the API server. Default 5s.
	DialTimeout time.Duration
	// UserAgent names the client in the API server's logs. Default "fenced".
	UserAgent string
}

// DefaultConfig returns the documented defaults (Kubeconfig unset).
func DefaultConfig() Config {
	return Config{QPS: 100, Burst: 200, FenceQPS: 100, FenceBurst: 200, RequestTimeout: 10 * time.Second,
		DialTimeout: 5 * time.Second, UserAgent: "fenced"}
}

// Clients holds a cluster's clientsets: one for watches (no overall
// request timeout, which would cut every watch short), one for plain
// requests (bounded by RequestTimeout) and one, like it, with its own rate
// limit for the fencing pipeline's reads and writes.
type Clients struct {
	Watch    kubernetes.Interface
	Requests kubernetes.Interface
	Fence    kubernetes.Interface
	// DynamicWatch and Dynamic reach custom resources (fenced's
	// NodeHealthCheck remediations): the first without a request timeout,
	// for informers; the second with the fencing client's limits.
	DynamicWatch dynamic.Interface
	Dynamic      dynamic.Interface
}

// CheckKubeconfig loads a kubeconfig the way NewClients does and returns
// the API server it names, refusing one that names none.
func CheckKubeconfig(path string) (string, error) {
	if err := CheckKubeconfigFiles(path); err != nil {
		return "", err
	}
	loading := &clientcmd.ClientConfigLoadingRules{ExplicitPath: path}
	rc, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(loading, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return "", fmt.Errorf("not a usable kubeconfig: %w", err)
	}
	if rc.Host == "" {
		return "", errors.New("the kubeconfig names no API server (clusters[].cluster.server of its current context)")
	}
	if _, err := NewClients(Config{Kubeconfig: path}); err != nil {
		return "", err
	}
	return rc.Host, nil
}

// NewClients builds the clientsets from the kubeconfig.
func NewClients(cfg Config) (*Clients, error) {
	if cfg.Kubeconfig == "" {
		return nil, errors.New("kubeconfig: path is empty")
	}
	def := DefaultConfig()
	if cfg.QPS <= 0 {
		cfg.QPS = def.QPS
	}
	if cfg.Burst <= 0 {
		cfg.Burst = def.Burst
	}
	if cfg.FenceQPS <= 0 {
		cfg.FenceQPS = def.FenceQPS
	}
	if cfg.FenceBurst <= 0 {
		cfg.FenceBurst = def.FenceBurst
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = def.RequestTimeout
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = def.DialTimeout
	}
	if cfg.UserAgent == "" {
		cfg.UserAgent = def.UserAgent
	}
	if err := CheckKubeconfigFiles(cfg.Kubeconfig); err != nil {
		return nil, err
	}
	loading := &clientcmd.ClientConfigLoadingRules{ExplicitPath: cfg.Kubeconfig}
	overrides := &clientcmd.ConfigOverrides{CurrentContext: cfg.Context}
	rc, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(loading, overrides).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", cfg.Kubeconfig, err)
	}
	rc.QPS, rc.Burst, rc.UserAgent = cfg.QPS, cfg.Burst, cfg.UserAgent
	// Protobuf instead of JSON for every built-in type: decoding the
	// Lease renewals of thousands of nodes is most of an idle leader's
	// work, and protobuf decodes several times cheaper.
	rc.ContentType = "application/vnd.kubernetes.protobuf"
	rc.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	dialer := &net.Dialer{Timeout: cfg.DialTimeout, KeepAlive: 30 * time.Second}
	rc.Dial = dialer.DialContext
	watch := rest.CopyConfig(rc)
	watch.Timeout = 0
	req := rest.CopyConfig(rc)
	req.Timeout = cfg.RequestTimeout
	wc, err := kubernetes.NewForConfig(watch)
	if err != nil {
		return nil, fmt.Errorf("watch client for %s: %w", rc.Host, err)
	}
	qc, err := kubernetes.NewForConfig(req)
	if err != nil {
		return nil, fmt.Errorf("request client for %s: %w", rc.Host, err)
	}
	fence := rest.CopyConfig(req)
	fence.QPS, fence.Burst = cfg.FenceQPS, cfg.FenceBurst
	fc, err := kubernetes.NewForConfig(fence)
	if err != nil {
		return nil, fmt.Errorf("fencing client for %s: %w", rc.Host, err)
	}
	// The dynamic client speaks JSON whatever the config says
	// (dynamic.ConfigFor).
	dw, err := dynamic.NewForConfig(watch)
	if err != nil {
		return nil, fmt.Errorf("dynamic watch client for %s: %w", rc.Host, err)
	}
	dc, err := dynamic.NewForConfig(fence)
	if err != nil {
		return nil, fmt.Errorf("dynamic client for %s: %w", rc.Host, err)
	}
	return &Clients{Watch: wc, Requests: qc, Fence: fc, DynamicWatch: dw, Dynamic: dc}, nil
}
