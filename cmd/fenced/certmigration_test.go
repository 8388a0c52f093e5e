package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// OldNamingBinaryEnv names a fenced binary of a release that named
// replicas by common name, DNS name or address; without it the test builds
// PreviousNamingRev.
const OldNamingBinaryEnv = "FENCED_OLD_NAMING_BINARY"

// PreviousNamingRev is the last commit before replicas were named by the
// URI SAN fenced://replica/<id> only.
const PreviousNamingRev = "de5f70413b73594b42110405f46474f0c6fbbd82"

// buildRev builds fenced from the tree of a commit of this repository.
func buildRev(t *testing.T, rev string) string {
	t.Helper()
	src := t.TempDir()
	archive := exec.Command("sh", "-c", `git archive --format=tar "$0" | tar -x -C "$1"`, rev, src)
	archive.Dir = "../.."
	out, err := archive.CombinedOutput()
	require.NoError(t, err, "check out %s: %s", rev, out)
	bin := filepath.Join(t.TempDir(), "fenced-"+rev[:7])
	build := exec.Command("go", "build", "-o", bin, "./cmd/fenced")
	build.Dir = src
	out, err = build.CombinedOutput()
	require.NoError(t, err, "build %s: %s", rev, out)
	return bin
}

// TestReplicaCertificateMigration upgrades a group of three replicas on
// 127.0.0.1, .2 and .3 from a release that named replicas by common name
// and DNS name, with certificates that release issued, by the procedure of
// docs/operations.md ("Replica certificates"):
//
//   - skipping the reissue, the upgraded replica does not start: exit 78,
//     an error naming the certificate file and the command to run; the two
//     others keep the group;
//   - certificates reissued with `fenced pki replica --from-cert` are taken
//     by the earlier release (each replica restarted on it in turn);
//   - then each replica is upgraded in turn, and the group keeps one leader
//     and all three members throughout.
func TestReplicaCertificateMigration(t *testing.T) {
	if testing.Short() {
		t.Skip("builds an earlier fenced and runs three fenced processes")
	}
	newBin := buildFenced(t)
	oldBin := os.Getenv(OldNamingBinaryEnv)
	if oldBin == "" {
		oldBin = buildRev(t, PreviousNamingRev)
	}
	dir := t.TempDir()
	pkiRun := func(bin string, args ...string) string {
		cmd := exec.Command(bin, append([]string{"pki"}, args...)...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s pki %v: %s", bin, args, out)
		return string(out)
	}
	pkiRun(oldBin, "ca", "--name", "fenced-replica-ca")
	hosts := []string{"127.0.0.1", "127.0.0.2", "127.0.0.3"}
	reps := make([]*e2eReplica, len(hosts))
	for i, h := range hosts {
		reps[i] = &e2eReplica{id: fmt.Sprintf("mgmt%d", i+1), raftAddr: freeAddrOnHost(t, h), httpAddr: freeAddrOnHost(t, h)}
		// The earlier release's certificate: CN and DNS name mgmtN, the host's address.
		require.NoError(t, os.Mkdir(filepath.Join(dir, "old"+reps[i].id), 0o700))
		pkiRun(oldBin, "replica", reps[i].id, "--ca", "fenced-replica-ca", "--host", h, "--out", "old"+reps[i].id)
	}
	for _, r := range reps {
		cert := filepath.Join(dir, "old"+r.id, r.id)
		doc := fmt.Sprintf("replica:\n  id: %s\n  dataDir: %s\n  raftBindAddress: %s\n  tls:\n    certFile: %s.crt\n    keyFile: %s.key\n    caFile: %s\npeers:\n",
			r.id, filepath.Join(dir, r.id), r.raftAddr, cert, cert, filepath.Join(dir, "fenced-replica-ca.crt"))
		for _, p := range reps {
			if p != r {
				doc += fmt.Sprintf("  - id: %s\n    raftAddress: %s\n    httpAddress: http://%s\n", p.id, p.raftAddr, p.httpAddr)
			}
		}
		doc += fmt.Sprintf("http:\n  listen: %s\nlog:\n  level: info\nclusters: []\narrays: []\n", r.httpAddr)
		r.config = filepath.Join(dir, r.id+".yaml")
		require.NoError(t, os.WriteFile(r.config, []byte(doc), 0o600))
	}
	// useCert points r's configuration at the certificate in subdir.
	useCert := func(r *e2eReplica, from, to string) {
		b, err := os.ReadFile(r.config)
		require.NoError(t, err)
		doc := string(b)
		oldPath, newPath := filepath.Join(dir, from, r.id), filepath.Join(dir, to, r.id)
		require.Contains(t, doc, oldPath)
		for _, ext := range []string{".crt", ".key"} {
			doc = strings.Replace(doc, oldPath+ext, newPath+ext, 1)
		}
		require.NoError(t, os.WriteFile(r.config, []byte(doc), 0o600))
	}
	run := func(r *e2eReplica, bin string) {
		r.proc = start(t, bin, "run", "--config", r.config)
		waitHealthy(t, r.proc, "http://"+r.httpAddr)
	}
	restart := func(r *e2eReplica, bin string) {
		code, _ := r.proc.stop(t)
		require.Zero(t, code, "%s stops cleanly", r.id)
		run(r, bin)
	}
	// healthy waits until all three agree on a leader and it has three members.
	healthy := func(step string) {
		t.Helper()
		leader := agreedLeader(t, reps, 30*time.Second)
		require.Eventually(t, func() bool {
			st, ok := leader.status(t)
			return ok && len(st.Raft.Members) == 3
		}, 30*time.Second, 50*time.Millisecond, "%s: three members", step)
		t.Logf("%s: leader %s", step, leader.id)
	}

	for _, r := range reps {
		run(r, oldBin)
	}
	healthy("earlier release, its certificates")

	// Skipping the reissue: the upgraded replica does not start, and says
	// which file to reissue and how. The others keep the group.
	skipped := reps[0]
	code, _ := skipped.proc.stop(t)
	require.Zero(t, code)
	p := start(t, newBin, "run", "--config", skipped.config)
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("a replica with a certificate without the URI should not start:\n%s", p.stderr)
	}
	var exit *exec.ExitError
	require.ErrorAs(t, p.err, &exit, "exit: %v", p.err)
	assert.Equal(t, 78, exit.ExitCode(), "a configuration error, which systemd does not restart")
	out := p.stderr.String()
	assert.Contains(t, out, filepath.Join(dir, "old"+skipped.id, skipped.id+".crt"), "the error names the file")
	assert.Contains(t, out, "fenced://replica/mgmt1")
	assert.Contains(t, out, "fenced pki replica --from-cert")
	agreedLeader(t, reps[1:], 30*time.Second)
	run(skipped, oldBin)
	healthy("earlier release again")

	// Reissue every certificate, and restart each replica on the earlier
	// release with it: that release takes the new certificates.
	for _, r := range reps {
		require.NoError(t, os.Mkdir(filepath.Join(dir, "new"+r.id), 0o700))
		pkiRun(newBin, "replica", "--ca", "fenced-replica-ca", "--from-cert", filepath.Join("old"+r.id, r.id+".crt"), "--out", "new"+r.id)
		assert.Contains(t, pkiRun(newBin, "show", filepath.Join("new"+r.id, r.id+".crt")), "fenced://replica/"+r.id)
		useCert(r, "old"+r.id, "new"+r.id)
		restart(r, oldBin)
		healthy("earlier release, " + r.id + " reissued")
	}

	// Upgrade, one replica at a time.
	for _, r := range reps {
		restart(r, newBin)
		healthy(r.id + " upgraded")
	}
}

// freeAddrOnHost returns a free TCP address on host.
func freeAddrOnHost(t *testing.T, host string) string {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().String()
}
