package testbed

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/fenced-project/fenced/cluster/clustertest"
)

// auditPolicy logs every write at Metadata level, except the Lease renewals
// of the kubelets (kwok), which would otherwise make up most of the log,
// and the creation of Nodes and of pods' bindings, logged with their
// request bodies (Request level): which node a pod was bound to and the
// node's CSI node IDs (its csi.volume.kubernetes.io/nodeid annotation), so
// that a checker reading only this log and the arrays' own audit files
// can tell which array writes concern a pod's node.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: None
  verbs: ["update", "patch"]
  namespaces: ["kube-node-lease"]
  resources:
  - group: coordination.k8s.io
    resources: ["leases"]
` + auditPolicyBodies + `- level: Metadata
  verbs: ["create", "update", "patch", "delete", "deletecollection"]
- level: None
`

// auditPolicyBodies are the rules that log request bodies.
const auditPolicyBodies = `- level: Request
  verbs: ["create"]
  resources:
  - group: ""
    resources: ["nodes", "pods/binding"]
`

// auditPolicyWithLeases also logs the Lease renewals.
const auditPolicyWithLeases = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
` + auditPolicyBodies + `- level: Metadata
  verbs: ["create", "update", "patch", "delete", "deletecollection"]
- level: None
`

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago and
// not handed out before in this process (another process may still take
// it: starts retry on errPortTaken).
func freePort() (int, error) {
	return clustertest.FreePort()
}

// errPortTaken marks a start that failed because a port chosen by freePort
// was taken in the meantime; the caller retries with other ports.
var errPortTaken = errors.New("port taken")

// startAndWait starts p and polls ready until it returns nil. It fails if the
// process exits first (wrapping errPortTaken when its log says a port was in
// use) or when ctx ends.
func startAndWait(ctx context.Context, p *Process, ready func(context.Context) error) error {
	if err := p.Start(); err != nil {
		return err
	}
	exited := p.Exited()
	var lastErr error
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		if lastErr = ready(ctx); lastErr == nil {
			return nil
		}
		select {
		case <-exited:
			tail := logTail(p.LogPath, 4000)
			err := fmt.Errorf("%s exited before it was ready; log %s ends:\n%s", p.Name, p.LogPath, tail)
			if strings.Contains(tail, "address already in use") {
				err = fmt.Errorf("%w: %w", errPortTaken, err)
			}
			return err
		case <-ctx.Done():
			p.Kill()
			return fmt.Errorf("wait for %s to be ready: %w (last check: %w); log %s ends:\n%s",
				p.Name, ctx.Err(), lastErr, p.LogPath, logTail(p.LogPath, 4000))
		case <-tick.C:
		}
	}
}

// withPortRetry runs start up to three times while it fails with errPortTaken.
func withPortRetry(start func() error) error {
	var err error
	for range 3 {
		if err = start(); err == nil || !errors.Is(err, errPortTaken) {
			return err
		}
	}
	return err
}

// httpReady returns a readiness check that GETs url and wants a 200.
func httpReady(client *http.Client, url, bearer string) func(context.Context) error {
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 2048))
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
		}
		return nil
	}
}

// insecureClient talks to the self-signed health endpoints of the
// controller manager and the scheduler.
func insecureClient() *http.Client {
	return &http.Client{
		Timeout:   2 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, //nolint:gosec // loopback health checks only
	}
}

func (cp *ControlPlane) startEtcd(ctx context.Context) error {
	return withPortRetry(func() error {
		client, err := freePort()
		if err != nil {
			return err
		}
		peer, err := freePort()
		if err != nil {
			return err
		}
		clientURL := "http://127.0.0.1:" + strconv.Itoa(client)
		peerURL := "http://127.0.0.1:" + strconv.Itoa(peer)
		args := []string{
			"--name=testbed",
			"--data-dir=" + filepath.Join(cp.Dir, "etcd"),
			"--listen-client-urls=" + clientURL,
			"--advertise-client-urls=" + clientURL,
			"--listen-peer-urls=" + peerURL,
			"--initial-advertise-peer-urls=" + peerURL,
			"--initial-cluster=testbed=" + peerURL,
			"--unsafe-no-fsync=true",
			"--log-level=warn",
		}
		cp.Etcd = newProcess(cp.spawner, BinEtcd, cp.Binaries.Path(BinEtcd), args, filepath.Join(cp.Dir, "etcd.log"))
		cp.EtcdURL = clientURL
		hc := &http.Client{Timeout: 2 * time.Second}
		return startAndWait(ctx, cp.Etcd, httpReady(hc, clientURL+"/health", ""))
	})
}

func (cp *ControlPlane) apiServerArgs(port int) []string {
	policy := filepath.Join(cp.Dir, "audit-policy.yaml")
	args := []string{
		"--etcd-servers=" + cp.EtcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + filepath.Join(cp.Dir, "apiserver-certs"),
		"--tls-cert-file=" + cp.pki.serverCert,
		"--tls-private-key-file=" + cp.pki.serverKey,
		"--service-cluster-ip-range=10.0.0.0/24",
		"--service-account-key-file=" + cp.pki.saPub,
		"--service-account-signing-key-file=" + cp.pki.saKey,
		"--service-account-issuer=https://kubernetes.default.svc",
		"--token-auth-file=" + filepath.Join(cp.Dir, "tokens.csv"),
		"--authorization-mode=RBAC",
		"--audit-log-path=" + cp.AuditLogPath,
		"--audit-policy-file=" + policy,
		"--audit-log-format=json",
		"--audit-log-mode=blocking",
		"--audit-log-maxsize=0",
		"--profiling=false",
	}
	return append(args, cp.opts.APIServerArgs...)
}

func (cp *ControlPlane) startAPIServer(ctx context.Context) error {
	policy := auditPolicy
	if cp.opts.AuditLeases {
		policy = auditPolicyWithLeases
	}
	if err := os.WriteFile(filepath.Join(cp.Dir, "audit-policy.yaml"), []byte(policy), 0o644); err != nil {
		return fmt.Errorf("write audit policy: %w", err)
	}
	return withPortRetry(func() error {
		port, err := freePort()
		if err != nil {
			return err
		}
		cp.APIServerURL = "https://127.0.0.1:" + strconv.Itoa(port)
		cp.APIServer = newProcess(cp.spawner, BinKubeAPIServer, cp.Binaries.Path(BinKubeAPIServer),
			cp.apiServerArgs(port), filepath.Join(cp.Dir, "kube-apiserver.log"))
		return startAndWait(ctx, cp.APIServer, cp.apiServerReady)
	})
}

// apiServerReady checks the apiserver's /readyz with the admin token.
func (cp *ControlPlane) apiServerReady(ctx context.Context) error {
	return httpReady(cp.httpClient, cp.APIServerURL+"/readyz", cp.AdminToken)(ctx)
}

func (cp *ControlPlane) startControllerManager(ctx context.Context) error {
	return withPortRetry(func() error {
		port, err := freePort()
		if err != nil {
			return err
		}
		kc := cp.componentKubeconfigs[BinControllerManager]
		args := []string{
			"--kubeconfig=" + kc,
			"--authentication-kubeconfig=" + kc,
			"--authorization-kubeconfig=" + kc,
			"--service-account-private-key-file=" + cp.pki.saKey,
			"--root-ca-file=" + cp.pki.caFile,
			"--use-service-account-credentials=true",
			"--leader-elect=false",
			"--controllers=*,-csrsigning,-csrapproving,-csrcleaner",
			"--bind-address=127.0.0.1",
			"--secure-port=" + strconv.Itoa(port),
			"--cert-dir=" + filepath.Join(cp.Dir, "kcm-certs"),
			"--profiling=false",
		}
		args = append(args, cp.opts.ControllerManagerArgs...)
		cp.ControllerManager = newProcess(cp.spawner, BinControllerManager, cp.Binaries.Path(BinControllerManager),
			args, filepath.Join(cp.Dir, "kube-controller-manager.log"))
		url := "https://127.0.0.1:" + strconv.Itoa(port) + "/healthz"
		return startAndWait(ctx, cp.ControllerManager, httpReady(insecureClient(), url, ""))
	})
}

func (cp *ControlPlane) startScheduler(ctx context.Context) error {
	return withPortRetry(func() error {
		port, err := freePort()
		if err != nil {
			return err
		}
		kc := cp.componentKubeconfigs[BinScheduler]
		args := []string{
			"--kubeconfig=" + kc,
			"--authentication-kubeconfig=" + kc,
			"--authorization-kubeconfig=" + kc,
			"--leader-elect=false",
			"--bind-address=127.0.0.1",
			"--secure-port=" + strconv.Itoa(port),
			"--cert-dir=" + filepath.Join(cp.Dir, "scheduler-certs"),
			"--profiling=false",
		}
		args = append(args, cp.opts.SchedulerArgs...)
		cp.Scheduler = newProcess(cp.spawner, BinScheduler, cp.Binaries.Path(BinScheduler),
			args, filepath.Join(cp.Dir, "kube-scheduler.log"))
		url := "https://127.0.0.1:" + strconv.Itoa(port) + "/healthz"
		return startAndWait(ctx, cp.Scheduler, httpReady(insecureClient(), url, ""))
	})
}

func (cp *ControlPlane) startKwok(ctx context.Context) error {
	return withPortRetry(func() error {
		port, err := freePort()
		if err != nil {
			return err
		}
		args := []string{
			"--kubeconfig=" + cp.componentKubeconfigs[BinKwok],
			"--manage-nodes-with-label-selector=" + KwokLabel + "=" + KwokLabelValue,
			// Pod IPs are only data here; keep them on loopback anyway.
			"--cidr=127.244.0.1/16",
			"--node-ip=127.0.0.1",
			// The nodes' Leases are the test bed's (heartbeat.go).
			"--node-lease-duration-seconds=0",
			"--server-address=127.0.0.1:" + strconv.Itoa(port),
		}
		args = append(args, cp.opts.KwokArgs...)
		cp.Kwok = newProcess(cp.spawner, BinKwok, cp.Binaries.Path(BinKwok), args, filepath.Join(cp.Dir, "kwok.log"))
		hc := &http.Client{Timeout: 2 * time.Second}
		return startAndWait(ctx, cp.Kwok, httpReady(hc, "http://127.0.0.1:"+strconv.Itoa(port)+"/healthz", ""))
	})
}
