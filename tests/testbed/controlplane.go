package testbed

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/fenced-project/fenced/tests/csidriver"
)

// Options configures a control plane. The zero value is usable.
type Options struct {
	// Dir is where configuration, data and logs go. Empty: a new temporary
	// directory, removed by Stop.
	Dir string
	// NodeLeaseDurationSeconds is the duration set on node Leases, renewed
	// every quarter of it as the kubelet does. Default 40.
	NodeLeaseDurationSeconds int
	// AuditLeases also records Lease renewals in kube-node-lease in the audit
	// log (left out by default: they would be most of it).
	AuditLeases bool
	// Tokens are extra static bearer tokens the apiserver accepts, e.g. a
	// user with limited RBAC rights for the code under test.
	Tokens []Token
	// APIServerArgs, ControllerManagerArgs, SchedulerArgs and KwokArgs are
	// appended to the components' command lines (later flags win).
	APIServerArgs         []string
	ControllerManagerArgs []string
	SchedulerArgs         []string
	KwokArgs              []string
	// StartTimeout bounds the start of the components, not counting the
	// build of the binaries. Default 3 minutes.
	StartTimeout time.Duration
	// BuildLog receives the output of the binaries' build if one is needed.
	BuildLog io.Writer
}

// Token is a static bearer token of the apiserver's token file.
type Token struct {
	Token  string
	User   string
	UID    string
	Groups []string
}

// ControlPlane is a running etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler and kwok on loopback ports.
type ControlPlane struct {
	// Dir holds the configuration, etcd data and component logs
	// (<Name>.log for each component).
	Dir string
	// Binaries is the cache the components run from.
	Binaries Binaries
	// Client is a clientset authenticated as the admin (system:masters).
	Client kubernetes.Interface
	// RESTConfig is the admin's client configuration.
	RESTConfig *rest.Config
	// KubeconfigPath is a kubeconfig file for the admin (bearer token).
	KubeconfigPath string
	// AdminToken is the admin's bearer token.
	AdminToken string
	// CAFile is the PEM file of the CA that signed the apiserver's certificate.
	CAFile string
	// APIServerURL is https://127.0.0.1:<port>; it stays the same across
	// restarts of the apiserver.
	APIServerURL string
	// EtcdURL is etcd's client URL.
	EtcdURL string
	// AuditLogPath is the apiserver's audit log (JSON lines, Metadata level
	// for create, update, patch and delete; Request level, with the body,
	// for creating Nodes and pods' bindings).
	AuditLogPath string

	// The components. Stop, Start and Restart them directly for raw control;
	// StopAPIServer, StartAPIServer and RestartAPIServer also wait for
	// readiness.
	Etcd, APIServer, ControllerManager, Scheduler, Kwok *Process
	// NHC is the medik8s node-healthcheck-operator, once StartNHC ran.
	NHC *Process

	opts                 Options
	pki                  *pki
	spawner              *spawner
	httpClient           *http.Client
	componentKubeconfigs map[string]string
	removeDir            bool

	attacherToken string
	stopAttacher  func()
	csi           *csidriver.Registry
	fakeAttach    atomic.Bool
	// reconcileSync, reconcileWake and republished are the attacher's
	// reconcile period, its wake-up and its count of forced publishes.
	reconcileSync atomic.Int64
	reconcileWake chan struct{}
	republished   atomic.Int64
	// reconcilePasses counts the attacher's reconcile passes.
	reconcilePasses atomic.Int64

	mu       sync.Mutex
	nodes    map[string]*Node
	leases   *leaseRenewer
	light    *lightWriter
	stopOnce sync.Once
}

// Start builds the binaries if needed, starts a control plane for the test
// and stops it when the test ends. On failure the components' logs are
// printed. Any error fails the test.
func Start(t testing.TB, opts Options) *ControlPlane {
	t.Helper()
	if opts.BuildLog == nil {
		opts.BuildLog = testWriter{t}
	}
	cp, err := StartControlPlane(t.Context(), opts)
	if err != nil {
		t.Fatalf("start control plane: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			cp.dumpLogs(t)
		}
		cp.Stop()
	})
	return cp
}

// StartControlPlane builds the binaries if needed and starts a control plane.
// The caller must call Stop.
func StartControlPlane(ctx context.Context, opts Options) (_ *ControlPlane, err error) {
	if opts.NodeLeaseDurationSeconds == 0 {
		opts.NodeLeaseDurationSeconds = 40
	}
	if opts.StartTimeout == 0 {
		opts.StartTimeout = 3 * time.Minute
	}
	bins, err := EnsureBinaries(ctx, opts.BuildLog)
	if err != nil {
		return nil, fmt.Errorf("build control-plane binaries: %w", err)
	}
	cp := &ControlPlane{Binaries: bins, opts: opts, nodes: map[string]*Node{}, Dir: opts.Dir,
		reconcileWake: make(chan struct{}, 1)}
	if cp.Dir == "" {
		if cp.Dir, err = os.MkdirTemp("", "testbed-"); err != nil {
			return nil, fmt.Errorf("create control-plane directory: %w", err)
		}
		cp.removeDir = true
	} else if err := os.MkdirAll(cp.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("create control-plane directory: %w", err)
	}
	cp.spawner = newSpawner()
	defer func() {
		if err != nil {
			cp.Stop()
		}
	}()
	ctx, cancel := context.WithTimeout(ctx, opts.StartTimeout)
	defer cancel()

	if cp.pki, err = newPKI(cp.Dir); err != nil {
		return nil, err
	}
	cp.CAFile = cp.pki.caFile
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(cp.pki.caPEM)
	cp.httpClient = &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	cp.AuditLogPath = filepath.Join(cp.Dir, "audit.log")
	if err := cp.writeTokens(); err != nil {
		return nil, err
	}

	if err := cp.startEtcd(ctx); err != nil {
		return nil, err
	}
	if err := cp.startAPIServer(ctx); err != nil {
		return nil, err
	}
	if err := cp.writeKubeconfigs(); err != nil {
		return nil, err
	}

	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i, start := range []func(context.Context) error{cp.startControllerManager, cp.startScheduler, cp.startKwok} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = start(ctx)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	cp.csi = csidriver.NewRegistry()
	if err := cp.startAttacher(cp.attacherToken); err != nil {
		return nil, err
	}
	// The service-account controllers work once the default namespace's
	// default ServiceAccount exists; pods need it.
	if err := cp.waitServiceAccount(ctx, metav1.NamespaceDefault); err != nil {
		return nil, fmt.Errorf("%w; kube-controller-manager log ends:\n%s", err, logTail(cp.ControllerManager.LogPath, 4000))
	}
	return cp, nil
}

// waitServiceAccount waits for the "default" ServiceAccount of a namespace.
func (cp *ControlPlane) waitServiceAccount(ctx context.Context, ns string) error {
	for {
		_, err := cp.Client.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		if err == nil {
			return nil
		}
		if !apierrors.IsNotFound(err) && ctx.Err() != nil {
			return fmt.Errorf("wait for service account %s/default: %w", ns, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for service account %s/default: %w", ns, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// writeTokens writes the apiserver's token file: the admin, one identity per
// component, and the extra tokens of Options.
func (cp *ControlPlane) writeTokens() error {
	cp.AdminToken = randomHex(16)
	tokens := []Token{
		{Token: cp.AdminToken, User: "admin", UID: "admin", Groups: []string{"system:masters"}},
		{Token: randomHex(16), User: "system:kube-controller-manager", UID: "kube-controller-manager"},
		{Token: randomHex(16), User: "system:kube-scheduler", UID: "kube-scheduler"},
		{Token: randomHex(16), User: "kwok", UID: "kwok", Groups: []string{"system:masters"}},
		{Token: randomHex(16), User: AttacherUser, UID: AttacherUser, Groups: []string{"system:masters"}},
	}
	cp.attacherToken = tokens[4].Token
	tokens = append(tokens, cp.opts.Tokens...)
	var b strings.Builder
	for _, tk := range tokens {
		if tk.Token == "" || tk.User == "" || strings.ContainsAny(tk.Token+tk.User+tk.UID+strings.Join(tk.Groups, ""), ",\"\n") {
			return fmt.Errorf("token for user %q: token and user must be set and no field may contain a comma, quote or newline", tk.User)
		}
		uid := tk.UID
		if uid == "" {
			uid = tk.User
		}
		fmt.Fprintf(&b, "%s,%s,%s", tk.Token, tk.User, uid)
		if len(tk.Groups) > 0 {
			fmt.Fprintf(&b, ",\"%s\"", strings.Join(tk.Groups, ","))
		}
		b.WriteString("\n")
	}
	cp.componentKubeconfigs = map[string]string{}
	for _, tk := range tokens[1:4] {
		cp.componentKubeconfigs[tk.UID] = tk.Token // replaced by paths in writeKubeconfigs
	}
	return os.WriteFile(filepath.Join(cp.Dir, "tokens.csv"), []byte(b.String()), 0o600)
}

// writeKubeconfigs writes the admin's and the components' kubeconfig files
// and builds the admin client.
func (cp *ControlPlane) writeKubeconfigs() error {
	leases, err := cp.newLeaseRenewer(cp.componentKubeconfigs[BinKwok])
	if err != nil {
		return err
	}
	cp.leases = leases
	if cp.light, err = newLightWriter(cp.RESTConfigFor(cp.componentKubeconfigs[BinKwok]), leases); err != nil {
		return err
	}
	for _, name := range []string{BinControllerManager, BinScheduler, BinKwok} {
		path := filepath.Join(cp.Dir, name+".kubeconfig")
		if err := cp.WriteKubeconfig(path, cp.componentKubeconfigs[name]); err != nil {
			return err
		}
		cp.componentKubeconfigs[name] = path
	}
	cp.KubeconfigPath = filepath.Join(cp.Dir, "admin.kubeconfig")
	if err := cp.WriteKubeconfig(cp.KubeconfigPath, cp.AdminToken); err != nil {
		return err
	}
	cp.RESTConfig = cp.RESTConfigFor(cp.AdminToken)
	client, err := kubernetes.NewForConfig(cp.RESTConfig)
	if err != nil {
		return fmt.Errorf("create admin client: %w", err)
	}
	cp.Client = client
	return nil
}

// RESTConfigFor returns a client configuration authenticating with token.
// Its rate limits are high enough to create a thousand nodes quickly.
func (cp *ControlPlane) RESTConfigFor(token string) *rest.Config {
	return &rest.Config{
		Host:            cp.APIServerURL,
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{CAData: append([]byte(nil), cp.pki.caPEM...)},
		QPS:             500,
		Burst:           1000,
	}
}

// WriteKubeconfig writes a kubeconfig file for the apiserver that
// authenticates with token (e.g. one of Options.Tokens).
func (cp *ControlPlane) WriteKubeconfig(path, token string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["testbed"] = &clientcmdapi.Cluster{Server: cp.APIServerURL, CertificateAuthorityData: cp.pki.caPEM}
	cfg.AuthInfos["user"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["testbed"] = &clientcmdapi.Context{Cluster: "testbed", AuthInfo: "user"}
	cfg.CurrentContext = "testbed"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("write kubeconfig %s: %w", path, err)
	}
	return nil
}

// StopAPIServer stops the apiserver (SIGTERM, SIGKILL after 10 s). The other
// components keep running and retry.
func (cp *ControlPlane) StopAPIServer() error {
	return cp.APIServer.Stop(10 * time.Second)
}

// StartAPIServer starts a stopped apiserver on the same port and waits until
// it is ready.
func (cp *ControlPlane) StartAPIServer(ctx context.Context) error {
	return startAndWait(ctx, cp.APIServer, cp.apiServerReady)
}

// RestartAPIServer stops and starts the apiserver and waits until it is ready.
func (cp *ControlPlane) RestartAPIServer(ctx context.Context) error {
	if err := cp.StopAPIServer(); err != nil {
		return err
	}
	return cp.StartAPIServer(ctx)
}

// Processes returns the components in start order (nil ones left out).
func (cp *ControlPlane) Processes() []*Process {
	var ps []*Process
	for _, p := range []*Process{cp.Etcd, cp.APIServer, cp.ControllerManager, cp.Scheduler, cp.Kwok, cp.NHC} {
		if p != nil {
			ps = append(ps, p)
		}
	}
	return ps
}

// RSS returns the resident set size in bytes of each running component, by
// name, and their sum.
func (cp *ControlPlane) RSS() (map[string]int64, int64, error) {
	out := map[string]int64{}
	var total int64
	for _, p := range cp.Processes() {
		rss, err := p.RSS()
		if err != nil {
			return nil, 0, err
		}
		out[p.Name] = rss
		total += rss
	}
	return out, total, nil
}

// Stop kills every component, closes the nodes' kubelet listeners and
// removes the directory if Start created it. It is safe to call twice.
func (cp *ControlPlane) Stop() {
	cp.stopOnce.Do(func() {
		cp.mu.Lock()
		nodes := cp.nodes
		cp.nodes = map[string]*Node{}
		cp.mu.Unlock()
		// The nodes' renewals stop before the API server does, so that they
		// do not fill the lease log with refused connections.
		for _, n := range nodes {
			n.stopHeartbeat()
		}
		cp.light.stop()
		if cp.stopAttacher != nil {
			cp.stopAttacher()
		}
		var wg sync.WaitGroup
		for _, p := range cp.Processes() {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_ = p.Stop(3 * time.Second)
			}()
		}
		wg.Wait()
		for _, n := range nodes {
			n.release()
		}
		cp.leases.close()
		cp.spawner.close()
		if cp.removeDir {
			_ = os.RemoveAll(cp.Dir)
		}
	})
}

// dumpLogs prints the end of every component's log to the test log.
func (cp *ControlPlane) dumpLogs(t testing.TB) {
	for _, p := range cp.Processes() {
		t.Logf("--- end of %s (%s):\n%s", p.Name, p.LogPath, logTail(p.LogPath, 3000))
	}
	t.Logf("--- end of the CSI attacher (%s):\n%s", cp.attacherLogPath(), logTail(cp.attacherLogPath(), 1500))
	leases := filepath.Join(cp.Dir, "kubelet-leases.log")
	t.Logf("--- end of the kubelets' lease log (%s):\n%s", leases, logTail(leases, 1500))
}

// testWriter sends build output to the test log.
type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Logf("%s", strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
