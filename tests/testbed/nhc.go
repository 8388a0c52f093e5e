package testbed

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
)

// The medik8s NodeHealthCheck operator the test bed runs: the real one,
// built from its Go module.
const (
	// NHCVersion is the release of github.com/medik8s/node-healthcheck-operator.
	NHCVersion = "v0.12.0"
	// NHCModule is its module path.
	NHCModule = "github.com/medik8s/node-healthcheck-operator"
	// nhcReplace is added to the module copy's go.mod: the module's own
	// requirement of k8s.io/kube-aggregator v0.34.7 is refused by the
	// module proxy, and `go install module@version` cannot add a replace.
	nhcReplace = "k8s.io/kube-aggregator => k8s.io/kube-aggregator v0.34.2"
	// BinNHC is the operator's binary name in its cache.
	BinNHC = "node-healthcheck-operator"
	// NHCNamespace is the namespace the operator is told it is deployed in
	// (DEPLOYMENT_NAMESPACE), where the test bed creates it.
	NHCNamespace = "medik8s"
	// nhcWebhookPort is the operator's webhook port: fixed in its main
	// (cmd/main.go getWebhookServer, Port 9443), so one operator runs on
	// a host at a time (StartNHC takes a lock for it).
	nhcWebhookPort = 9443
	// nhcCRDFile is its CRD inside the module.
	nhcCRDFile = "config/crd/bases/remediation.medik8s.io_nodehealthchecks.yaml"
)

// NHCBuild is the cached build of the operator.
type NHCBuild struct {
	// Binary is the operator's executable.
	Binary string
	// SourceDir is the copy of the module it was built from (its CRDs and
	// examples are there).
	SourceDir string
}

// CRDPath returns the path of the NodeHealthCheck CRD.
func (b NHCBuild) CRDPath() string { return filepath.Join(b.SourceDir, nhcCRDFile) }

// nhcLDFlags are the operator's build flags.
const nhcLDFlags = "-s -w"

// nhcVersionKey names the cache directory of one operator build.
func nhcVersionKey() string { return "nhc-" + NHCVersion }

// nhcStamp hashes what the build depends on.
func nhcStamp() string {
	h := sha256.Sum256([]byte(strings.Join([]string{NHCModule, NHCVersion, nhcReplace, nhcLDFlags}, "\n")))
	return hex.EncodeToString(h[:])
}

// EnsureNHC returns the cached build of the NodeHealthCheck operator,
// building it first when it is missing: the module is downloaded through
// the Go module proxy, copied, the replace added to the copy's go.mod and
// its ./cmd built. Concurrent callers wait for one build. Output goes to
// logw (may be nil) and build.log in the cache.
func EnsureNHC(ctx context.Context, logw io.Writer) (NHCBuild, error) {
	root, err := RepoRoot()
	if err != nil {
		return NHCBuild{}, err
	}
	return ensureNHCIn(ctx, root, logw)
}

func ensureNHCIn(ctx context.Context, root string, logw io.Writer) (NHCBuild, error) {
	dir := filepath.Join(root, ".cache", "nhc", nhcVersionKey())
	b := NHCBuild{Binary: filepath.Join(dir, "bin", BinNHC), SourceDir: filepath.Join(dir, "src")}
	stamp := nhcStamp()
	if nhcUpToDate(dir, b, stamp) {
		return b, nil
	}
	if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
		return NHCBuild{}, fmt.Errorf("create operator cache %s: %w", dir, err)
	}
	ignore := filepath.Join(root, ".cache", ".gitignore")
	if _, err := os.Stat(ignore); errors.Is(err, os.ErrNotExist) {
		if err := os.WriteFile(ignore, []byte("*\n"), 0o644); err != nil {
			return NHCBuild{}, fmt.Errorf("write %s: %w", ignore, err)
		}
	}
	unlock, err := lockFile(ctx, filepath.Join(dir, ".lock"))
	if err != nil {
		return NHCBuild{}, err
	}
	defer unlock()
	if nhcUpToDate(dir, b, stamp) {
		return b, nil
	}
	stampPath := filepath.Join(dir, "stamp")
	if err := os.Remove(stampPath); err != nil && !errors.Is(err, os.ErrNotExist) {
		return NHCBuild{}, fmt.Errorf("remove stale stamp: %w", err)
	}
	logFile, err := os.Create(filepath.Join(dir, "build.log"))
	if err != nil {
		return NHCBuild{}, fmt.Errorf("create build log: %w", err)
	}
	defer logFile.Close()
	out := io.Writer(logFile)
	if logw != nil {
		out = io.MultiWriter(logFile, logw)
	}
	if err := buildNHC(ctx, dir, b, out); err != nil {
		return NHCBuild{}, fmt.Errorf("build %s@%s (log: %s): %w", NHCModule, NHCVersion, logFile.Name(), err)
	}
	if err := os.WriteFile(stampPath, []byte(stamp+"\n"), 0o644); err != nil {
		return NHCBuild{}, fmt.Errorf("write stamp: %w", err)
	}
	return b, nil
}

func nhcUpToDate(dir string, b NHCBuild, stamp string) bool {
	data, err := os.ReadFile(filepath.Join(dir, "stamp"))
	if err != nil || strings.TrimSpace(string(data)) != stamp {
		return false
	}
	st, err := os.Stat(b.Binary)
	if err != nil || !st.Mode().IsRegular() || st.Mode().Perm()&0o100 == 0 {
		return false
	}
	_, err = os.Stat(b.CRDPath())
	return err == nil
}

// buildNHC downloads the module, copies it to b.SourceDir with the replace
// and builds the binary.
func buildNHC(ctx context.Context, dir string, b NHCBuild, out io.Writer) error {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("find the go command: %w", err)
	}
	run := func(wd string, args ...string) ([]byte, error) {
		name, cmdArgs := goBin, args
		if nice, err := exec.LookPath("nice"); err == nil {
			name, cmdArgs = nice, append([]string{"-n", "10", goBin}, args...)
		}
		cmd := exec.CommandContext(ctx, name, cmdArgs...)
		cmd.Dir = wd
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
		var stdout bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, out
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		fmt.Fprintf(out, "+ (cd %s && go %s)\n", wd, strings.Join(args, " "))
		if err := cmd.Run(); err != nil {
			return nil, fmt.Errorf("go %s in %s: %w", strings.Join(args, " "), wd, err)
		}
		return stdout.Bytes(), nil
	}
	// `go mod download` of a path@version needs no main module.
	js, err := run(dir, "mod", "download", "-json", NHCModule+"@"+NHCVersion)
	if err != nil {
		return err
	}
	var mod struct{ Dir, Error string }
	if err := json.Unmarshal(js, &mod); err != nil {
		return fmt.Errorf("read go mod download output: %w", err)
	}
	if mod.Error != "" || mod.Dir == "" {
		return fmt.Errorf("download %s@%s: %s", NHCModule, NHCVersion, mod.Error)
	}
	if err := os.RemoveAll(b.SourceDir); err != nil {
		return fmt.Errorf("remove old module copy: %w", err)
	}
	if err := copyTree(mod.Dir, b.SourceDir); err != nil {
		return err
	}
	gomod := filepath.Join(b.SourceDir, "go.mod")
	f, err := os.OpenFile(gomod, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("open the copy's go.mod: %w", err)
	}
	_, werr := fmt.Fprintf(f, "\nreplace %s\n", nhcReplace)
	if err := errors.Join(werr, f.Close()); err != nil {
		return fmt.Errorf("add the replace to the copy's go.mod: %w", err)
	}
	tmp := b.Binary + ".tmp"
	start := time.Now()
	if _, err := run(b.SourceDir, "build", "-ldflags", nhcLDFlags, "-o", tmp, "./cmd"); err != nil {
		return err
	}
	fmt.Fprintf(out, "built %s in %s\n", BinNHC, time.Since(start).Round(time.Second))
	if err := os.Rename(tmp, b.Binary); err != nil {
		return fmt.Errorf("install %s: %w", BinNHC, err)
	}
	return nil
}

// copyTree copies a read-only module directory into dst, writable.
func copyTree(src, dst string) error {
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, 0o644)
	})
	if err != nil {
		return fmt.Errorf("copy module %s to %s: %w", src, dst, err)
	}
	return nil
}

// NHCOptions configures StartNHC. The zero value is usable.
type NHCOptions struct {
	// BuildLog receives the build's output when one is needed.
	BuildLog io.Writer
	// Kubeconfig is what the operator authenticates with; default the
	// admin's.
	Kubeconfig string
}

// StartNHC starts the NodeHealthCheck operator against the test bed's API
// server, as its deployment would run it minus OLM: its CRD applied, the
// namespace DEPLOYMENT_NAMESPACE names, a webhook serving certificate in
// controller-runtime's default directory (OLM's is absent), no leader
// election. It returns once the operator's readiness probe answers. Stop
// it with cp.NHC.Stop; the control plane's Stop stops it too.
func (cp *ControlPlane) StartNHC(ctx context.Context, opts NHCOptions) error {
	build, err := EnsureNHC(ctx, opts.BuildLog)
	if err != nil {
		return err
	}
	if err := cp.ApplyManifests(ctx, build.CRDPath()); err != nil {
		return err
	}
	if err := cp.waitCRDEstablished(ctx, "nodehealthchecks.remediation.medik8s.io"); err != nil {
		return err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: NHCNamespace}}
	if _, err := cp.Client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", NHCNamespace, err)
	}
	// controller-runtime's webhook server reads its certificate from
	// $TMPDIR/k8s-webhook-server/serving-certs (webhook.Options.CertDir's
	// default) when the operator finds no OLM certificate.
	tmp := filepath.Join(cp.Dir, "nhc-tmp")
	certDir := filepath.Join(tmp, "k8s-webhook-server", "serving-certs")
	if err := os.MkdirAll(certDir, 0o755); err != nil {
		return fmt.Errorf("create webhook certificate directory: %w", err)
	}
	certPEM, keyPEM, err := cp.pki.issue("node-healthcheck-webhook", []string{"localhost"}, []net.IP{net.ParseIP("127.0.0.1")})
	if err != nil {
		return err
	}
	if err := errors.Join(os.WriteFile(filepath.Join(certDir, "tls.crt"), certPEM, 0o644),
		os.WriteFile(filepath.Join(certDir, "tls.key"), keyPEM, 0o600)); err != nil {
		return fmt.Errorf("write webhook certificate: %w", err)
	}
	kc := opts.Kubeconfig
	if kc == "" {
		kc = cp.KubeconfigPath
	}
	// The webhook port is fixed: one operator per host at a time.
	unlock, err := lockFile(ctx, filepath.Join(os.TempDir(), "fenced-testbed-nhc-"+strconv.Itoa(nhcWebhookPort)+".lock"))
	if err != nil {
		return err
	}
	var p *Process
	err = withPortRetry(func() error {
		port, err := freePort()
		if err != nil {
			return err
		}
		args := []string{
			"-kubeconfig=" + kc,
			"-leader-elect=false",
			"-metrics-bind-address=0",
			"-health-probe-bind-address=127.0.0.1:" + strconv.Itoa(port),
		}
		p = newProcess(cp.spawner, BinNHC, build.Binary, args, filepath.Join(cp.Dir, BinNHC+".log"))
		p.env = []string{"DEPLOYMENT_NAMESPACE=" + NHCNamespace, "TMPDIR=" + tmp}
		cp.mu.Lock()
		cp.NHC = p
		cp.mu.Unlock()
		url := "http://127.0.0.1:" + strconv.Itoa(port) + "/readyz"
		return startAndWait(ctx, p, httpReady(&http.Client{Timeout: 2 * time.Second}, url, ""))
	})
	exited := (<-chan struct{})(nil)
	if err == nil {
		exited = p.Exited()
	}
	if exited == nil {
		unlock()
		return err
	}
	go func() { // the lock is held while the operator runs
		<-exited
		unlock()
	}()
	return nil
}

// ApplyManifests creates or updates every object of the YAML files
// (documents separated by ---) with the admin's dynamic client.
func (cp *ControlPlane) ApplyManifests(ctx context.Context, paths ...string) error {
	dyn, err := dynamic.NewForConfig(cp.RESTConfig)
	if err != nil {
		return fmt.Errorf("create dynamic client: %w", err)
	}
	for _, path := range paths {
		data, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("read manifest: %w", err)
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			var obj map[string]any
			if err := dec.Decode(&obj); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				return fmt.Errorf("decode %s: %w", path, err)
			}
			if len(obj) == 0 {
				continue
			}
			if err := cp.applyObject(ctx, dyn, &unstructured.Unstructured{Object: obj}); err != nil {
				return fmt.Errorf("apply %s: %w", path, err)
			}
		}
	}
	return nil
}

func (cp *ControlPlane) applyObject(ctx context.Context, dyn dynamic.Interface, u *unstructured.Unstructured) error {
	gvk := u.GroupVersionKind()
	gvr, namespaced, err := cp.resourceFor(gvk)
	if err != nil {
		return err
	}
	var ri dynamic.ResourceInterface = dyn.Resource(gvr)
	if namespaced {
		ns := u.GetNamespace()
		if ns == "" {
			ns = metav1.NamespaceDefault
		}
		ri = dyn.Resource(gvr).Namespace(ns)
	}
	_, err = ri.Create(ctx, u, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		cur, gerr := ri.Get(ctx, u.GetName(), metav1.GetOptions{})
		if gerr != nil {
			return fmt.Errorf("get %s %s: %w", gvk.Kind, u.GetName(), gerr)
		}
		u.SetResourceVersion(cur.GetResourceVersion())
		_, err = ri.Update(ctx, u, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("create %s %s: %w", gvk.Kind, u.GetName(), err)
	}
	return nil
}

// resourceFor finds the resource of a kind through discovery.
func (cp *ControlPlane) resourceFor(gvk schema.GroupVersionKind) (schema.GroupVersionResource, bool, error) {
	list, err := cp.Client.Discovery().ServerResourcesForGroupVersion(gvk.GroupVersion().String())
	if err != nil {
		return schema.GroupVersionResource{}, false, fmt.Errorf("discover %s: %w", gvk.GroupVersion(), err)
	}
	for _, r := range list.APIResources {
		if r.Kind == gvk.Kind && !strings.Contains(r.Name, "/") {
			return gvk.GroupVersion().WithResource(r.Name), r.Namespaced, nil
		}
	}
	return schema.GroupVersionResource{}, false, fmt.Errorf("no resource of kind %s in %s", gvk.Kind, gvk.GroupVersion())
}

// waitCRDEstablished waits until the CRD's API is served (its kind is
// discoverable).
func (cp *ControlPlane) waitCRDEstablished(ctx context.Context, name string) error {
	dyn, err := dynamic.NewForConfig(cp.RESTConfig)
	if err != nil {
		return fmt.Errorf("create dynamic client: %w", err)
	}
	crds := dyn.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		crd, err := crds.Get(ctx, name, metav1.GetOptions{})
		if err == nil && crdEstablished(crd) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for CRD %s to be established: %w (last error: %w)", name, ctx.Err(), err)
		case <-tick.C:
		}
	}
}

func crdEstablished(crd *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Established" && m["status"] == "True" {
			return true
		}
	}
	return false
}

// WaitCRDs waits until every named CRD is established.
func (cp *ControlPlane) WaitCRDs(ctx context.Context, names ...string) error {
	for _, n := range names {
		if err := cp.waitCRDEstablished(ctx, n); err != nil {
			return err
		}
	}
	return nil
}

// LogTail returns the last n bytes of a component's log file.
func LogTail(path string, n int64) string { return logTail(path, n) }
