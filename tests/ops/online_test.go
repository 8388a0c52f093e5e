package ops

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fenced-project/fenced/tests/e2e"
	"github.com/fenced-project/fenced/tests/testbed"
)

// onlineFixture is one simulator of each array family.
const onlineFixture = `
- name: pflex-1
  family: powerflex
  spec: {username: admin, password: Password123!, systems: [{id: 1a2b3c4d5e6f7a8b, name: sys-1}], perNode: {volumes: 0}}
- name: pstore-1
  family: powerstore
  spec: {username: admin, password: Password123!, perNode: {volumes: 0}}
- name: pscale-1
  family: powerscale
  spec: {username: admin, password: Password123!, perNode: {exports: 0, shared: 0}}
- name: pmax-1
  family: powermax
  spec: {username: admin, password: Password123!, symmetrixID: "000197900046", generate: {clusterPrefix: TST, volumesPerNode: 0}}
- name: unity-1
  family: unity
  spec: {username: admin, password: Password123!, generate: {lunsPerNode: 0}}
`

// onlineTarget is a target of validate -o json's output.
type onlineTarget struct {
	Kind    string `json:"kind"`
	Name    string `json:"name"`
	Outcome string `json:"outcome"`
	Version string `json:"version"`
	Missing []struct {
		Group, Resource, Verb, Namespace string
	} `json:"missing"`
	Error string `json:"error"`
}

// TestValidateOnline runs `fenced config validate --online` against a
// simulator of every array family and the test bed's real kube-apiserver:
// each array and each API server is reported reachable; an array whose
// password is wrong and an API server whose token is unknown are
// wrong-credentials; an array and an API server on a closed port are
// refused; a user bound to a role without "delete pods" is missing-rbac
// naming that permission. The exit code is 3 while a target fails and 0
// once every target passes.
func TestValidateOnline(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane: skipped under -short")
	}
	bin := fencedBinary(t)
	cp := testbed.Start(t, testbed.Options{Tokens: []testbed.Token{
		{Token: "full-token-0123456789", User: "fenced-full", UID: "u-full"},
		{Token: "partial-token-0123456789", User: "fenced-partial", UID: "u-partial"},
	}})
	ctx := t.Context()
	root := repoRoot(t)
	applyManifest(ctx, t, cp.Client, filepath.Join(root, "deploy", "kubernetes", "rbac.yaml"))
	// fenced-full gets the manifest's roles; fenced-partial the same but
	// for deleting pods.
	role, err := cp.Client.RbacV1().ClusterRoles().Get(ctx, "fenced", metav1.GetOptions{})
	require.NoError(t, err)
	partial := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "fenced-partial"}}
	for _, r := range role.Rules {
		r = *r.DeepCopy()
		if len(r.Resources) == 1 && r.Resources[0] == "pods" {
			r.Verbs = []string{"get", "list", "watch"}
		}
		partial.Rules = append(partial.Rules, r)
	}
	_, err = cp.Client.RbacV1().ClusterRoles().Create(ctx, partial, metav1.CreateOptions{})
	require.NoError(t, err)
	for user, clusterRole := range map[string]string{"fenced-full": "fenced", "fenced-partial": "fenced-partial"} {
		subj := []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}
		_, err = cp.Client.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: user}, Subjects: subj,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: clusterRole}}, metav1.CreateOptions{})
		require.NoError(t, err)
		_, err = cp.Client.RbacV1().RoleBindings("kube-node-lease").Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: user, Namespace: "kube-node-lease"}, Subjects: subj,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "fenced-node-leases"}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}

	dir := t.TempDir()
	creds := filepath.Join(dir, "credentials")
	require.NoError(t, os.Mkdir(creds, 0o700))
	writeCred := func(name, content string) {
		require.NoError(t, os.WriteFile(filepath.Join(creds, name), []byte(content), 0o600))
	}
	for name, token := range map[string]string{"full": "full-token-0123456789", "partial": "partial-token-0123456789", "wrong": "no-such-token-0123456789"} {
		require.NoError(t, cp.WriteKubeconfig(filepath.Join(creds, "kubeconfig-"+name), token))
	}
	// A kubeconfig whose API server's port nobody listens on.
	closed := freeAddr(t)
	kc, err := os.ReadFile(filepath.Join(creds, "kubeconfig-full"))
	require.NoError(t, err)
	writeCred("kubeconfig-closed", strings.Replace(string(kc), cp.APIServerURL, "https://"+closed, 1))

	fx, err := e2e.MakeFixture(nil, []byte(onlineFixture))
	require.NoError(t, err)
	arrays, err := e2e.StartArrays(fx, []string{"ops"}, filepath.Join(dir, "certs"), slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	for _, a := range arrays {
		t.Cleanup(a.Close)
	}
	options := map[string]string{
		"pflex-1":  "    powerflex: {systemID: 1a2b3c4d5e6f7a8b}\n",
		"pmax-1":   "    powermax: {symmetrixID: \"000197900046\", clusterPrefix: TST}\n",
		"pstore-1": "", "pscale-1": "", "unity-1": "",
	}
	// arraysYAML lists every simulator; wrong names an array given a
	// wrong password, and refused one given a closed port.
	arraysYAML := func(wrong, refused string) string {
		var b strings.Builder
		for _, name := range []string{"pflex-1", "pstore-1", "pscale-1", "pmax-1", "unity-1"} {
			a := arrays[name]
			pw := a.Password
			if name == wrong {
				pw = "not-the-password"
			}
			writeCred(name+".password", pw+"\n")
			endpoint := a.Listeners["ops"].URL
			if name == refused {
				endpoint = "https://" + closed
			}
			fmt.Fprintf(&b, "  - name: %s\n    family: %s\n    endpoint: %s\n    username: %s\n    passwordFile: credential:%s.password\n    insecure: true\n    requestTimeout: 5s\n%s",
				name, a.Family, endpoint, a.Username, name, options[name])
		}
		return b.String()
	}
	writeConfig := func(arraysPart string, kubeconfigs ...string) string {
		var b strings.Builder
		fmt.Fprintf(&b, "replica:\n  id: ops\n  dataDir: %s\n  raftBindAddress: %s\nhttp:\n  listen: %s\nclusters:\n",
			filepath.Join(dir, "data"), freeAddr(t), freeAddr(t))
		for _, k := range kubeconfigs {
			fmt.Fprintf(&b, "  - name: %s\n    kubeconfig: credential:kubeconfig-%s\n    arrays: [pflex-1, pstore-1, pscale-1, pmax-1, unity-1]\n", k, k)
		}
		b.WriteString("arrays:\n" + arraysPart)
		path := filepath.Join(dir, "fenced.yaml")
		require.NoError(t, os.WriteFile(path, []byte(b.String()), 0o600))
		return path
	}
	validate := func(t *testing.T, cfg string, args ...string) (int, string, string) {
		t.Helper()
		cmd := exec.CommandContext(ctx, bin, append([]string{"config", "validate", "--online", "--credentials-dir", creds, cfg}, args...)...)
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			require.NoError(t, err)
		}
		return cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()
	}

	t.Run("every target reachable", func(t *testing.T) {
		code, out, errOut := validate(t, writeConfig(arraysYAML("", ""), "full"))
		assert.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
		for _, name := range []string{"pflex-1", "pstore-1", "pscale-1", "pmax-1", "unity-1"} {
			assert.Contains(t, out, "array "+name+" (", out)
		}
		assert.Contains(t, out, "cluster full ("+cp.APIServerURL+"): reachable, version v1.")
		assert.Equal(t, 6, strings.Count(out, ": reachable"), out)
	})

	t.Run("refused, wrong credentials, missing RBAC", func(t *testing.T) {
		cfg := writeConfig(arraysYAML("pstore-1", "unity-1"), "full", "partial", "wrong", "closed")
		code, out, errOut := validate(t, cfg)
		assert.Equal(t, 3, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
		t.Logf("text output:\n%s\nstderr:\n%s", out, errOut)
		assert.NotContains(t, errOut, "Session management", "the array libraries' own log lines are no part of the report")
		for _, secret := range []string{"Password123!", "full-token-0123456789", "partial-token-0123456789", "no-such-token-0123456789"} {
			assert.NotContains(t, out+errOut, secret, "a credential in the report")
		}
		assert.Contains(t, out, "array pstore-1 (")
		assert.Contains(t, out, "cluster partial ("+cp.APIServerURL+"): missing-rbac, version v1.")
		assert.Contains(t, out, "not allowed to delete pods")

		code, out, errOut = validate(t, cfg, "-o", "json")
		assert.Equal(t, 3, code, errOut)
		var results []struct {
			Valid   bool           `json:"valid"`
			Targets []onlineTarget `json:"targets"`
		}
		require.NoError(t, json.Unmarshal([]byte(out), &results), out)
		require.Len(t, results, 1)
		assert.True(t, results[0].Valid)
		got := map[string]onlineTarget{}
		for _, tg := range results[0].Targets {
			got[tg.Kind+"/"+tg.Name] = tg
		}
		want := map[string]string{
			"array/pflex-1": "reachable", "array/pstore-1": "wrong-credentials", "array/pscale-1": "reachable",
			"array/pmax-1": "reachable", "array/unity-1": "refused",
			"cluster/full": "reachable", "cluster/partial": "missing-rbac", "cluster/wrong": "wrong-credentials",
			"cluster/closed": "refused",
		}
		require.Len(t, got, len(want))
		for k, o := range want {
			assert.Equal(t, o, got[k].Outcome, "%s: %s", k, got[k].Error)
		}
		missing := got["cluster/partial"].Missing
		require.Len(t, missing, 1, "%+v", missing)
		assert.Equal(t, "delete", missing[0].Verb)
		assert.Equal(t, "pods", missing[0].Resource)
	})

	t.Run("wrong password of every family", func(t *testing.T) {
		for _, name := range []string{"pflex-1", "pscale-1", "pmax-1", "unity-1"} {
			code, out, errOut := validate(t, writeConfig(arraysYAML(name, ""), "full"), "-o", "json")
			assert.Equal(t, 3, code, errOut)
			var results []struct {
				Targets []onlineTarget `json:"targets"`
			}
			require.NoError(t, json.Unmarshal([]byte(out), &results), out)
			for _, tg := range results[0].Targets {
				if tg.Name == name {
					assert.Equal(t, "wrong-credentials", tg.Outcome, "%s: %s", name, tg.Error)
				} else {
					assert.Equal(t, "reachable", tg.Outcome, "%s: %s", tg.Name, tg.Error)
				}
			}
		}
	})
}
