package ops

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// walkthroughConfig is a replica's configuration as the operator's guide
// has it after step 2 of the walkthrough: the production example's
// replica, peers and http sections, with every address on loopback (the
// three "hosts" share this machine's network) and no cluster yet.
func walkthroughConfig(id string, raft, http map[string]string) string {
	var peers strings.Builder
	for _, p := range []string{"mgmt1", "mgmt2", "mgmt3"} {
		if p != id {
			fmt.Fprintf(&peers, "  - id: %s\n    raftAddress: %s\n    httpAddress: https://%s\n", p, raft[p], http[p])
		}
	}
	return fmt.Sprintf(`replica:
  id: %[1]s
  dataDir: /var/lib/fenced
  raftBindAddress: %[2]s
  raftAdvertiseAddress: %[2]s
  tls:
    certFile: credential:raft.crt
    keyFile: credential:raft.key
    caFile: credential:fenced-ca.crt
peers:
%[4]s
http:
  listen: %[3]s
  advertiseURL: https://%[3]s
  tls:
    certFile: credential:http.crt
    keyFile: credential:http.key
    clientCAFile: credential:fenced-ca.crt
    operatorCAFile: credential:operator-ca.crt
  tokenFile: credential:api-token
log:
  format: json
  level: info
clusters: []
arrays: []
`, id, raft[id], http[id], strings.TrimSuffix(peers.String(), "\n"))
}

// TestWalkthrough follows the operator's guide's walkthrough
// (docs/operations.md, "Walkthrough: three hosts from the package") on
// three fresh Debian roots standing in for the management hosts: install
// the package, configure, make the certificates with `fenced pki`, install
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
		require.NoError(t, os.WriteFile(filepath.Join(root, "etc/fenced/fenced.yaml"), []byte(walkthroughConfig(id, raft, http)), 0o644))
	}

	// 3. Make the certificates on one machine (the first root), from the
	// three configurations.
	ca := roots["mgmt1"]
	pki := filepath.Join(ca, "root/pki")
	require.NoError(t, os.MkdirAll(pki, 0o700))
	for _, id := range ids {
		require.NoError(t, os.WriteFile(filepath.Join(pki, id+".yaml"), []byte(walkthroughConfig(id, raft, http)), 0o644))
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
	t.Logf("leader %s; status from each host with --config only", leaders["mgmt1"])
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
