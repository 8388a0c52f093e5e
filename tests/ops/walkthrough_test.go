package ops

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// atHosts stands in for the operator's edit of step 2: the example's host
// names and ports become this machine's loopback addresses (the three
// "hosts" share its network), the rest of the file stays as installed.
func atHosts(example, id string, raft, http map[string]string) string {
	for _, p := range []string{"mgmt1", "mgmt2", "mgmt3"} {
		example = strings.ReplaceAll(example, p+".example.net:7441", raft[p])
		example = strings.ReplaceAll(example, "https://"+p+".example.net:7440", "https://"+http[p])
	}
	example = strings.ReplaceAll(example, "0.0.0.0:7441", raft[id])
	return strings.ReplaceAll(example, "0.0.0.0:7440", http[id])
}

// TestWalkthrough follows the operator's guide's walkthrough
// (docs/operations.md, "Walkthrough: three hosts from the package") on
// three fresh Debian roots standing in for the management hosts, with the
// files the package installs: install the package, configure from the
// installed /etc/fenced/fenced.yaml (mgmt1) and examples (mgmt2, mgmt3) with
// the guide's commands, make the certificates with `fenced pki`, install
// them as credentials, validate, start three replicas, and run
// `fenced status` on each host with nothing but --config.
func TestWalkthrough(t *testing.T) {
	if testing.Short() {
		t.Skip("installs the package into three Debian roots: skipped under -short")
	}
	ids := []string{"mgmt1", "mgmt2", "mgmt3"}
	raft, http := map[string]string{}, map[string]string{}
	for _, id := range ids {
		raft[id], http[id] = freeAddr(t), freeAddr(t)
	}
	deb := buildDeb(t, "v1.0.0", t.TempDir())
	debBytes, err := os.ReadFile(deb)
	require.NoError(t, err)

	// 1. Install, and 2. configure, on each host.
	roots := map[string]string{}
	for _, id := range ids {
		root := debianRoot(t, "bookworm")
		roots[id] = root
		require.NoError(t, os.WriteFile(filepath.Join(root, "tmp", filepath.Base(deb)), debBytes, 0o644))
		mustInRoot(t, root, "dpkg", "-i", "/tmp/"+filepath.Base(deb))
		if id != "mgmt1" {
			mustInRoot(t, root, "cp", "/usr/share/doc/fenced/examples/production-"+id+".yaml", "/etc/fenced/fenced.yaml")
		}
		conf := filepath.Join(root, "etc/fenced/fenced.yaml")
		example, err := os.ReadFile(conf)
		require.NoError(t, err)
		require.Contains(t, string(example), "replica:\n  id: "+id+"\n", "the installed configuration of %s", id)
		require.NoError(t, os.WriteFile(conf, []byte(atHosts(string(example), id, raft, http)), 0o644))
		mustInRoot(t, root, "sed", "-i", "/^clusters:/,$d", "/etc/fenced/fenced.yaml")
		configured, err := os.ReadFile(conf)
		require.NoError(t, err)
		require.NotContains(t, string(configured), "arrays:", "step 2 leaves the clusters and arrays for later")
	}

	// 3. Make the certificates on one machine (the first root), from the
	// three configurations.
	ca := roots["mgmt1"]
	pki := filepath.Join(ca, "root/pki")
	require.NoError(t, os.MkdirAll(pki, 0o700))
	for _, id := range ids {
		b, err := os.ReadFile(filepath.Join(roots[id], "etc/fenced/fenced.yaml"))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(pki, id+".yaml"), b, 0o644))
	}
	inPKI := func(args string) string {
		t.Helper()
		return mustInRoot(t, ca, "sh", "-c", "cd /root/pki && "+args)
	}
	inPKI("fenced pki ca --name fenced-replica-ca")
	inPKI("fenced pki ca --name fenced-operator-ca")
	for _, id := range ids {
		inPKI("fenced pki replica --ca fenced-replica-ca --config " + id + ".yaml")
	}
	inPKI("fenced pki operator alice --ca fenced-operator-ca")
	shown := inPKI("fenced pki show mgmt1.crt")
	assert.Contains(t, shown, "serverAuth, clientAuth")
	assert.Contains(t, shown, "127.0.0.1")
	tokenBytes := make([]byte, 32)
	_, err = rand.Read(tokenBytes)
	require.NoError(t, err)
	token := base64.StdEncoding.EncodeToString(tokenBytes) + "\n"

	// 4. Install the credentials, and 5. validate.
	for _, id := range ids {
		creds := filepath.Join(roots[id], "etc/fenced/credentials")
		for name, src := range map[string]string{
			"raft.crt": id + ".crt", "raft.key": id + ".key",
			"http.crt": id + ".crt", "http.key": id + ".key",
			"fenced-ca.crt": "fenced-replica-ca.crt", "operator-ca.crt": "fenced-operator-ca.crt",
		} {
			b, err := os.ReadFile(filepath.Join(pki, src))
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(filepath.Join(creds, name), b, 0o600))
		}
		require.NoError(t, os.WriteFile(filepath.Join(creds, "api-token"), []byte(token), 0o600))
		// The public copy of the replica CA, for status without root.
		b, err := os.ReadFile(filepath.Join(pki, "fenced-replica-ca.crt"))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(roots[id], "tmp/fenced-replica-ca.crt"), b, 0o644))
		mustInRoot(t, roots[id], "install", "-m", "0644", "/tmp/fenced-replica-ca.crt", "/etc/fenced/public/fenced-ca.crt")
		out := mustInRoot(t, roots[id], "fenced", "config", "validate", "--credentials-dir", "/etc/fenced/credentials", "/etc/fenced/fenced.yaml")
		assert.Contains(t, out, ": valid: replica "+id, out)
	}

	// 5. Start the three replicas (as the unit would: credentials in
	// $CREDENTIALS_DIRECTORY).
	for _, id := range ids {
		startInRoot(t, roots[id], "CREDENTIALS_DIRECTORY=/etc/fenced/credentials", "fenced", "run", "--config", "/etc/fenced/fenced.yaml")
	}

	// 6. `fenced status` on each host with only --config: one leader, the
	// same on all three, three members, ready.
	type statusJSON struct {
		ReplicaID string `json:"replicaID"`
		Ready     bool   `json:"ready"`
		Raft      *struct {
			State    string `json:"state"`
			LeaderID string `json:"leaderID"`
			Members  []struct {
				ID string `json:"id"`
			} `json:"members"`
		} `json:"raft"`
	}
	leaders := map[string]string{}
	var last string
	require.Eventually(t, func() bool {
		for _, id := range ids {
			out, err := inRoot(roots[id], "fenced", "status", "--config", "/etc/fenced/fenced.yaml", "-o", "json")
			last = id + ": " + out
			if err != nil {
				return false
			}
			var st statusJSON
			if json.Unmarshal([]byte(out), &st) != nil || st.Raft == nil || st.Raft.LeaderID == "" || len(st.Raft.Members) != 3 || !st.Ready {
				return false
			}
			if st.ReplicaID != id {
				return false
			}
			leaders[id] = st.Raft.LeaderID
		}
		return leaders["mgmt1"] == leaders["mgmt2"] && leaders["mgmt2"] == leaders["mgmt3"]
	}, 90*time.Second, time.Second, "three replicas with one leader; last answer: %s", last)
	for _, id := range ids {
		table := mustInRoot(t, roots[id], "fenced", "status", "--config", "/etc/fenced/fenced.yaml")
		assert.Contains(t, table, id, "status table of %s", id)
		assert.Contains(t, table, leaders[id], "status table of %s names the leader", id)
		if id == "mgmt2" {
			t.Logf("fenced status --config /etc/fenced/fenced.yaml on mgmt2:\n%s", table)
		}
	}
	// As an operator without root (here nobody): the credentials directory
	// is closed to them; the public CA copy lets the command trust the
	// replica, and a follower shows the whole group as the leader sees it.
	for _, id := range ids {
		out, err := inRoot(roots[id], "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
			"fenced", "status", "--config", "/etc/fenced/fenced.yaml")
		require.NoError(t, err, "fenced status as nobody on %s: %s", id, out)
		assert.Contains(t, out, leaders[id], "status as nobody on %s names the leader", id)
		if id != leaders[id] {
			assert.Contains(t, out, "(reachability as the leader "+leaders[id]+" sees it)", "status as nobody on the follower %s", id)
		}
	}
	// Without the public copy, the refusal says what to do, and is no
	// usage error (exit 1, not 2).
	mustInRoot(t, roots["mgmt1"], "rm", "/etc/fenced/public/fenced-ca.crt")
	out, err := inRoot(roots["mgmt1"], "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
		"fenced", "status", "--config", "/etc/fenced/fenced.yaml")
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee, out)
	assert.Equal(t, 1, ee.ExitCode(), out)
	assert.Contains(t, out, "permission denied")
	assert.Contains(t, out, "install the CA certificates world-readable in /etc/fenced/public")
	t.Logf("leader %s; status from each host with --config only, as root and as nobody", leaders["mgmt1"])
}

// startInRoot runs a long-lived command in a Debian root with a clean
// environment plus env, and interrupts it when the test ends (before the
// root is unmounted).
func startInRoot(t *testing.T, root string, env string, args ...string) {
	t.Helper()
	full := append([]string{root, "/usr/bin/env", "-i",
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8", env}, args...)
	cmd := exec.Command("chroot", full...)
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	require.NoError(t, cmd.Start())
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		select {
		case <-exited:
		default:
			_ = cmd.Process.Signal(os.Interrupt)
			select {
			case <-exited:
			case <-time.After(15 * time.Second):
				_ = cmd.Process.Kill()
				<-exited
			}
		}
		if t.Failed() {
			t.Logf("%s in %s:\n%s", strings.Join(args, " "), root, tail(out.String(), 4000))
		}
	})
}
