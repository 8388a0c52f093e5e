package testbed

// Versions of the components the test bed runs. They must match the
// requirements of the tools modules under tests/tools (a test checks this).
const (
	// KubernetesVersion is the release of kube-apiserver,
	// kube-controller-manager and kube-scheduler.
	KubernetesVersion = "v1.34.2"
	// EtcdVersion is the release of the etcd server.
	EtcdVersion = "v3.5.21"
	// KwokVersion is the release of kwok.
	KwokVersion = "v0.7.0"
)

// Binary names inside the cache's bin directory.
const (
	BinEtcd              = "etcd"
	BinKubeAPIServer     = "kube-apiserver"
	BinControllerManager = "kube-controller-manager"
	BinScheduler         = "kube-scheduler"
	BinKwok              = "kwok"
)

// versionKey names the cache directory of one set of component versions.
func versionKey() string {
	return "kube-" + KubernetesVersion + "_etcd-" + EtcdVersion + "_kwok-" + KwokVersion
}
