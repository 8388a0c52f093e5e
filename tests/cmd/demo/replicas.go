package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"time"

	"go.yaml.in/yaml/v3"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/fenced-project/fenced/cluster/clustertest"
	"github.com/fenced-project/fenced/cmd/fenced/status"
	"github.com/fenced-project/fenced/stonith"
	"github.com/fenced-project/fenced/tests/e2e"
)

// replica is one `fenced run` process with its directory, configuration
// and log.
type replica struct {
	child
	id         string
	dir        string
	configPath string
	dataDir    string
	httpURL    string
	raftAddr   string
	kubeToken  string
	client     *http.Client
}

// timing is the demo cluster's detection timing, the same in every
// replica's configuration.
type timing struct {
	leaseSeconds   int           // node Lease duration; kwok renews every quarter of it
	heartbeatGrace time.Duration // clusters[].heartbeatGrace
	pollInterval   time.Duration // clusters[].pollInterval
	ioWindow       time.Duration // clusters[].ioWindow
}

// newReplicas lays out the replicas' directories and picks their ports.
func newReplicas(root string, ids []string) ([]*replica, error) {
	var out []*replica
	for _, id := range ids {
		dir := filepath.Join(root, "replica-"+id)
		r := &replica{id: id, dir: dir, configPath: filepath.Join(dir, "fenced.yaml"), dataDir: filepath.Join(dir, "data"),
			kubeToken: randomHex(16), client: &http.Client{Timeout: 3 * time.Second}}
		r.name, r.logPath = "fenced-"+id, filepath.Join(dir, "fenced.log")
		if err := os.MkdirAll(r.dataDir, 0o700); err != nil {
			return nil, fmt.Errorf("replica %s: %w", id, err)
		}
		var err error
		if r.raftAddr, err = clustertest.FreeAddr(); err != nil {
			return nil, fmt.Errorf("replica %s: raft port: %w", id, err)
		}
		httpAddr, err := clustertest.FreeAddr()
		if err != nil {
			return nil, fmt.Errorf("replica %s: http port: %w", id, err)
		}
		r.httpURL = "http://" + httpAddr
		out = append(out, r)
	}
	return out, nil
}

// configEnv is what every replica's configuration shares.
type configEnv struct {
	ca         *clustertest.CA
	apiServer  string
	apiCAFile  string
	tokenFile  string
	cluster    string
	timing     timing
	arrays     map[string]*e2e.Array
	allReplica []*replica
}

// writeConfig writes the replica's certificates, kubeconfig, array
// passwords and fenced.yaml.
func (r *replica) writeConfig(env configEnv) error {
	certs, err := env.ca.WriteFiles(r.dir, r.id) // a replica certificate names its replica ID
	if err != nil {
		return fmt.Errorf("replica %s: certificates: %w", r.id, err)
	}
	caPEM, err := os.ReadFile(env.apiCAFile)
	if err != nil {
		return fmt.Errorf("replica %s: read the API server's CA: %w", r.id, err)
	}
	kubeconfig := filepath.Join(r.dir, "kubeconfig")
	kc := clientcmdapi.NewConfig()
	kc.Clusters[env.cluster] = &clientcmdapi.Cluster{Server: env.apiServer, CertificateAuthorityData: caPEM}
	kc.AuthInfos["fenced"] = &clientcmdapi.AuthInfo{Token: r.kubeToken}
	kc.Contexts[env.cluster] = &clientcmdapi.Context{Cluster: env.cluster, AuthInfo: "fenced"}
	kc.CurrentContext = env.cluster
	if err := clientcmd.WriteToFile(*kc, kubeconfig); err != nil {
		return fmt.Errorf("replica %s: write kubeconfig: %w", r.id, err)
	}

	var peers []map[string]any
	for _, p := range env.allReplica {
		if p.id != r.id {
			peers = append(peers, map[string]any{"id": p.id, "raftAddress": p.raftAddr, "httpAddress": p.httpURL})
		}
	}
	var arrays []map[string]any
	var names []string
	for _, a := range sortedArrays(env.arrays) {
		l := a.Listeners[r.id]
		pw := filepath.Join(r.dir, a.Name+".password")
		if err := os.WriteFile(pw, []byte(a.Password+"\n"), 0o600); err != nil {
			return fmt.Errorf("replica %s: %w", r.id, err)
		}
		m := map[string]any{"name": a.Name, "family": a.Family, "endpoint": l.URL, "username": a.Username,
			"passwordFile": pw, "caFile": l.CAFile, "requestTimeout": "5s"}
		if a.Family == "powerscale" || a.Family == "unity" {
			// goisilon and gounity trust only the system's roots: the
			// simulator's throwaway certificate cannot be pinned with caFile.
			delete(m, "caFile")
			m["insecure"] = true
		}
		if opts := familyOptions(a); opts != nil {
			m[a.Family] = opts
		}
		arrays = append(arrays, m)
		names = append(names, a.Name)
	}
	doc := map[string]any{
		"replica": map[string]any{
			"id": r.id, "dataDir": r.dataDir, "raftBindAddress": r.raftAddr,
			"tls": map[string]any{"certFile": certs.CertFile, "keyFile": certs.KeyFile, "caFile": certs.CAFile},
		},
		"peers": peers,
		"http":  map[string]any{"listen": r.httpURL[len("http://"):], "advertiseURL": r.httpURL, "tokenFile": env.tokenFile},
		"log":   map[string]any{"format": "text", "level": "info"},
		"clusters": []any{map[string]any{
			"name": env.cluster, "kubeconfig": kubeconfig,
			"heartbeatGrace": env.timing.heartbeatGrace.String(), "pollInterval": env.timing.pollInterval.String(),
			"ioWindow":     env.timing.ioWindow.String(),
			"settlePeriod": "30s", "stormCooldown": "1m", "arrays": names,
		}},
		"arrays": arrays,
	}
	b, err := yaml.Marshal(doc)
	if err != nil {
		return fmt.Errorf("replica %s: encode configuration: %w", r.id, err)
	}
	if err := os.WriteFile(r.configPath, b, 0o600); err != nil {
		return fmt.Errorf("replica %s: write configuration: %w", r.id, err)
	}
	return nil
}

// familyOptions returns the family block of an array's configuration from
// its fixture spec: the PowerFlex system, the PowerStore global ID, the
// Unity array ID and PowerScale cluster name the emulated drivers write
// into handles, the PowerMax array ID and the csi-powermax cluster prefix
// its hosts are named with.
func familyOptions(a *e2e.Array) map[string]any {
	switch a.Family {
	case "powerflex":
		if systems, ok := a.Spec["systems"].([]any); ok && len(systems) > 0 {
			if s, ok := systems[0].(map[string]any); ok {
				return map[string]any{"systemID": s["id"]}
			}
		}
	case "powerstore":
		// csi-powerstore's handles name the array by its global ID.
		if a.Driver != nil {
			return map[string]any{"globalID": a.Driver.ArrayID}
		}
	case "unity":
		// csi-unity's handles name the array by the secret's arrayId.
		if a.Driver != nil {
			return map[string]any{"arrayID": a.Driver.ArrayID}
		}
	case "powerscale":
		// csi-isilon's handles name the cluster by the secret's clusterName.
		if a.Driver != nil {
			return map[string]any{"clusterName": a.Driver.ArrayID}
		}
	case "powermax":
		opts := map[string]any{"symmetrixID": a.Spec["symmetrixID"]}
		if g, ok := a.Spec["generate"].(map[string]any); ok && g["clusterPrefix"] != nil {
			opts["clusterPrefix"] = g["clusterPrefix"]
		}
		return opts
	}
	return nil
}

// sortedArrays returns the arrays by name.
func sortedArrays(m map[string]*e2e.Array) []*e2e.Array {
	out := make([]*e2e.Array, 0, len(m))
	for _, a := range m {
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// run starts `fenced run` for the replica.
func (r *replica) run(sp *spawner, binary string) error {
	return r.start(sp, binary, "run", "--config", r.configPath, "--log-output", "stream")
}

// getJSON decodes the JSON document at the replica's path into v.
func (r *replica) getJSON(ctx context.Context, path string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.httpURL+path, nil)
	if err != nil {
		return err
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return fmt.Errorf("replica %s: GET %s: %w", r.id, path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("replica %s: GET %s: %s", r.id, path, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		return fmt.Errorf("replica %s: decode %s: %w", r.id, path, err)
	}
	return nil
}

// status reads the replica's /status.
func (r *replica) status(ctx context.Context) (*status.Status, error) {
	var st status.Status
	return &st, r.getJSON(ctx, "/status", &st)
}

// fences reads the pipeline's fence records, with their ledger steps, from
// the leader (any replica forwards the request).
func (r *replica) fences(ctx context.Context) (*stonith.Status, error) {
	var st stonith.Status
	return &st, r.getJSON(ctx, "/v1/fences", &st)
}

// metrics reads the replica's /metrics as text.
func (r *replica) metrics(ctx context.Context) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.httpURL+"/metrics", nil)
	if err != nil {
		return "", err
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return "", fmt.Errorf("replica %s: GET /metrics: %w", r.id, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", fmt.Errorf("replica %s: read /metrics: %w", r.id, err)
	}
	return string(b), nil
}
