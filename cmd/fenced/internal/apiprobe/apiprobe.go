// Package apiprobe checks that each configured cluster's API server
// answers. It lets a replica report a cluster whose kubeconfig is missing or
// whose API server is unreachable as not ready, instead of failing to start.
package apiprobe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/fenced-project/fenced/cmd/fenced/status"
	"github.com/fenced-project/fenced/configs"
	"github.com/fenced-project/fenced/kube"
)

// Interval is how often a cluster is probed.
const Interval = 10 * time.Second

// requestTimeout bounds one probe.
const requestTimeout = 5 * time.Second

// errNotProbed is the readiness error before the first probe finished.
var errNotProbed = errors.New("API server not probed yet")

// Prober probes one cluster's API server.
type Prober struct {
	cluster configs.Cluster
	credDir string
	log     *slog.Logger
	now     func() time.Time

	mu        sync.Mutex
	err       error
	apiServer string
	version   string
	checkedAt time.Time
}

// New returns a prober for cluster c.
func New(c configs.Cluster, credDir string, log *slog.Logger) *Prober {
	return &Prober{cluster: c, credDir: credDir, log: log.With("cluster", c.Name), now: time.Now, err: errNotProbed}
}

// Run probes at once and then every Interval until ctx is cancelled.
func (p *Prober) Run(ctx context.Context) error {
	t := time.NewTicker(Interval)
	defer t.Stop()
	for {
		p.probe(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Check is the cluster's readiness check.
func (p *Prober) Check(context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// Status returns the cluster's /status entry.
func (p *Prober) Status() status.Cluster {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := status.Cluster{Name: p.cluster.Name, Ready: p.err == nil, APIServer: p.apiServer,
		ServerVersion: p.version, DryRun: p.cluster.DryRun}
	if p.err != nil {
		st.Error = p.err.Error()
	}
	if !p.checkedAt.IsZero() {
		t := p.checkedAt.UTC()
		st.CheckedAt = &t
	}
	return st
}

func (p *Prober) probe(ctx context.Context) {
	host, version, err := p.fetchVersion(ctx)
	if ctx.Err() != nil {
		return // stopping: keep the last result
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	changed := (err == nil) != (p.err == nil) || errors.Is(p.err, errNotProbed)
	p.err, p.checkedAt = err, p.now()
	if host != "" {
		p.apiServer = host
	}
	if err == nil {
		p.version = version
	}
	switch {
	case !changed:
	case err != nil:
		p.log.Warn("cluster API server unreachable; cluster not ready", "error", err)
	default:
		p.log.Info("cluster API server reachable", "apiServer", host, "serverVersion", version)
	}
}

// fetchVersion asks the API server for /version.
func (p *Prober) fetchVersion(ctx context.Context) (host, version string, err error) {
	path, err := configs.ResolveFile(p.cluster.Kubeconfig, p.credDir)
	if err != nil {
		return "", "", fmt.Errorf("kubeconfig: %w", err)
	}
	if err := kube.CheckKubeconfigFiles(path); err != nil {
		return "", "", fmt.Errorf("load kubeconfig %s: %w", path, err)
	}
	rc, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return "", "", fmt.Errorf("load kubeconfig %s: %w", path, err)
	}
	rc.Timeout = requestTimeout
	rc.UserAgent = "fenced"
	dc, err := discovery.NewDiscoveryClientForConfig(rc)
	if err != nil {
		return rc.Host, "", fmt.Errorf("client for %s: %w", rc.Host, err)
	}
	cctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	raw, err := dc.RESTClient().Get().AbsPath("/version").Do(cctx).Raw()
	if err != nil {
		return rc.Host, "", fmt.Errorf("GET %s/version: %w", rc.Host, err)
	}
	var v struct {
		GitVersion string `json:"gitVersion"`
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return rc.Host, "", fmt.Errorf("decode %s/version: %w", rc.Host, err)
	}
	return rc.Host, v.GitVersion, nil
}
