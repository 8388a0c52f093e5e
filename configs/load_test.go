package configs

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/arrayclients"
)

// validYAML is a small valid configuration; %[1]s is a directory holding
// kubeconfig and pw (a password file).
const validYAML = `replica:
  id: r1
  tls: {certFile: %[1]s/raft.pem, keyFile: %[1]s/raft.pem, caFile: %[1]s/raft.pem}
  raftBindAddress: 127.0.0.1:7441
peers:
  - id: r2
    raftAddress: 127.0.0.2:7441
    httpAddress: http://127.0.0.2:7440
clusters:
  - name: c1
    kubeconfig: %[1]s/kubeconfig
    arrays: [pstore-1]
arrays:
  - name: pstore-1
    family: powerstore
    endpoint: https://127.0.0.1:9443
    username: admin
    passwordFile: %[1]s/pw
`

// fixtureDir returns a directory with the files validYAML names.
func fixtureDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "kubeconfig"), []byte("apiVersion: v1\n"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "pw"), []byte("pa55word\n"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "raft.pem"), []byte("not checked without CheckContents\n"), 0o600))
	return dir
}

func render(s, dir string) []byte {
	return []byte(strings.ReplaceAll(s, "%[1]s", dir))
}

// problems parses data and returns its problems as strings.
func problems(t *testing.T, data []byte, opts Options) []string {
	t.Helper()
	_, err := Parse(data, "/nonexistent-base", opts)
	if err == nil {
		return nil
	}
	var pe *ProblemsError
	require.ErrorAs(t, err, &pe)
	out := make([]string, len(pe.Problems))
	for i, p := range pe.Problems {
		out[i] = p.String()
	}
	return out
}

func TestValidConfigAndDefaults(t *testing.T) {
	dir := fixtureDir(t)
	cfg, err := Parse(render(validYAML, dir), dir, Options{})
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1:7441", cfg.Replica.RaftAdvertiseAddress, "advertise defaults to a specific bind address")
	require.Len(t, cfg.Clusters, 1)
	c := cfg.Clusters[0]
	assert.Equal(t, 40*time.Second, c.HeartbeatGrace)
	assert.Equal(t, 2*time.Second, c.PollInterval)
	assert.Equal(t, CorroborateEither, c.Corroboration)
	assert.Equal(t, "33%", c.StormLimit.String())
	assert.False(t, c.StoragePathLoss.Enabled)
	assert.Nil(t, c.EarlyVerdict.Enabled, "earlyVerdict.enabled unset")
	on, why := c.EarlyVerdictOn()
	assert.True(t, on, "early verdicts on by default for a cluster with arrays: %s", why)
	assert.Equal(t, 11*time.Second, c.EarlyVerdict.ProbeStart(), "earlyVerdict.probeFrom unset")
	a := cfg.Arrays[0]
	assert.Equal(t, 10*time.Second, a.RequestTimeout)
	assert.Equal(t, FenceModeInitiators, a.PowerStore.FenceMode)
	assert.Equal(t, DefaultConfig().Raft, cfg.Raft)
	assert.Equal(t, "replica r1, 1 peer, 1 cluster, 1 array (powerstore)", cfg.Summary())

	// Left unset, early verdicts give way to a grace too short for them;
	// set false, they are off.
	short := strings.Replace(string(render(validYAML, dir)), "    arrays: [pstore-1]\n", "    arrays: [pstore-1]\n    heartbeatGrace: 10s\n", 1)
	cfg, err = Parse([]byte(short), dir, Options{})
	require.NoError(t, err)
	on, why = cfg.Clusters[0].EarlyVerdictOn()
	assert.False(t, on)
	assert.Equal(t, "earlyVerdict.after 12s is not shorter than heartbeatGrace 10s", why)
	off := strings.Replace(string(render(validYAML, dir)), "    arrays: [pstore-1]\n", "    arrays: [pstore-1]\n    earlyVerdict: {enabled: false}\n", 1)
	cfg, err = Parse([]byte(off), dir, Options{})
	require.NoError(t, err)
	on, why = cfg.Clusters[0].EarlyVerdictOn()
	assert.False(t, on)
	assert.Equal(t, "earlyVerdict.enabled is false", why)
}

// TestBrokenConfigs is the table of broken configurations: each must name
// the field and its line.
func TestBrokenConfigs(t *testing.T) {
	dir := fixtureDir(t)
	valid := string(render(validYAML, dir))
	sub := func(old, repl string) string {
		require.Contains(t, valid, old)
		return strings.Replace(valid, old, repl, 1)
	}
	tcs := []struct {
		name string
		yaml string
		want []string
	}{
		{
			name: "unknown key",
			yaml: sub("    arrays: [pstore-1]\n", "    arrays: [pstore-1]\n    heartbeatGrase: 10s\n"),
			want: []string{"clusters[0].heartbeatGrase: unknown setting (line 13)"},
		},
		{
			name: "early verdict after the grace",
			yaml: sub("    arrays: [pstore-1]\n", "    arrays: [pstore-1]\n    earlyVerdict: {enabled: true, after: 40s, kubeletProbes: 0}\n"),
			want: []string{"clusters[0].earlyVerdict.after: 40s is not shorter than heartbeatGrace 40s",
				"clusters[0].earlyVerdict.kubeletProbes: 0: want 1 to 100"},
		},
		{
			name: "early probes starting after the early verdict may come",
			yaml: sub("    arrays: [pstore-1]\n", "    arrays: [pstore-1]\n    earlyVerdict: {after: 12s, probeFrom: 13s}\n"),
			want: []string{"clusters[0].earlyVerdict.probeFrom: 13s is later than earlyVerdict.after 12s: a node must be probed before it may be declared failed"},
		},
		{
			name: "early probes from a negative age",
			yaml: sub("    arrays: [pstore-1]\n", "    arrays: [pstore-1]\n    earlyVerdict: {probeFrom: -1s}\n"),
			want: []string{"clusters[0].earlyVerdict.probeFrom: -1s is too short: want at least 1s"},
		},
		{
			name: "unknown top-level key",
			yaml: valid + "replicas: 3\n",
			want: []string{"replicas: unknown setting (line 19)"},
		},
		{
			name: "bad duration",
			yaml: sub("    arrays: [pstore-1]\n", "    arrays: [pstore-1]\n    heartbeatGrace: 40x\n"),
			want: []string{`clusters[0].heartbeatGrace: invalid duration "40x": want a number with a unit, like "40s" or "1m30s" (line 13)`},
		},
		{
			name: "duration without unit",
			yaml: valid + "raft:\n  heartbeatTimeout: 40\n",
			want: []string{`raft.heartbeatTimeout: duration 40 has no unit: write "40s" for seconds (line 20)`},
		},
		{
			name: "missing password file",
			yaml: sub(dir+"/pw", dir+"/missing-pw"),
			want: []string{"arrays[0].passwordFile: file " + dir + "/missing-pw does not exist (line 18)"},
		},
		{
			name: "cluster naming an unknown array",
			yaml: sub("[pstore-1]", "[pstore-1, pstore-2]"),
			want: []string{`clusters[0].arrays[1]: unknown array "pstore-2" (line 12)`},
		},
		{
			name: "duplicate replica ids",
			yaml: sub("  - id: r2\n", "  - id: r1\n"),
			want: []string{`peers[0].id: duplicate replica id "r1" (also replica.id) (line 6)`},
		},
		{
			name: "bad percentage",
			yaml: sub("    arrays: [pstore-1]\n", "    arrays: [pstore-1]\n    stormLimit: 150%\n"),
			want: []string{`clusters[0].stormLimit: invalid percentage "150%": want a whole number from 1% to 100% (line 13)`},
		},
		{
			name: "zero count",
			yaml: sub("    arrays: [pstore-1]\n", "    arrays: [pstore-1]\n    stormLimit: 0\n"),
			want: []string{`clusters[0].stormLimit: invalid limit "0": want a count of at least 1 ("3") or a percentage ("33%") (line 13)`},
		},
		{
			name: "unknown family",
			yaml: sub("family: powerstore", "family: powerstor"),
			want: []string{`arrays[0].family: unknown family "powerstor": want one of powerflex, powerstore, powerscale, powermax, unity (line 15)`},
		},
		{
			name: "bad corroboration",
			yaml: sub("    arrays: [pstore-1]\n", "    arrays: [pstore-1]\n    corroboration: maybe\n"),
			want: []string{`clusters[0].corroboration: unknown policy "maybe": want kubelet, array, either, both or none (line 13)`},
		},
		{
			name: "bad label selector",
			yaml: sub("    arrays: [pstore-1]\n", "    arrays: [pstore-1]\n    protectionSelector: \"app in (db\"\n"),
			want: []string{"clusters[0].protectionSelector: invalid label selector"},
		},
		{
			name: "bad lease namespace",
			yaml: sub("    arrays: [pstore-1]\n", "    arrays: [pstore-1]\n    nodeHealthCheck:\n      leases: true\n      leaseNamespace: Medik8s_Leases\n"),
			want: []string{`clusters[0].nodeHealthCheck.leaseNamespace: invalid name "Medik8s_Leases"`},
		},
		{
			name: "inline password refused",
			yaml: sub("    passwordFile: "+dir+"/pw\n", "    password: pa55word\n"),
			want: []string{"arrays[0].password: inline passwords are refused: use passwordFile (a file or credential:NAME), or set allowInlineSecrets: true for a throw-away setup (line 18)"},
		},
		{
			name: "wrong family block",
			yaml: valid + "    powermax:\n      symmetrixID: \"000197900123\"\n",
			want: []string{"arrays[0].powermax: only for family powermax; this array is powerstore (line 19)"},
		},
		{
			name: "missing required fields",
			yaml: "replica:\n  dataDir: relative/dir\nclusters:\n  - name: c1\n",
			want: []string{
				"replica.id: required (line 1)",
				`replica.dataDir: "relative/dir" is not an absolute path (line 2)`,
				"clusters[0].kubeconfig: required (line 4)",
			},
		},
		{
			name: "section of the wrong kind",
			yaml: "replica: r1\n",
			want: []string{"replica: want a mapping of settings, got a string (line 1)"},
		},
		{
			name: "key given twice ignoring case",
			yaml: "replica:\n  id: r1\n  ID: r2\n",
			want: []string{"replica.id: key given twice (also at line 2; keys ignore case) (line 3)"},
		},
		{
			name: "invalid yaml",
			yaml: "replica:\n  id: [r1\n",
			want: []string{"invalid YAML"},
		},
		{
			name: "two documents",
			yaml: valid + "---\nreplica: {}\n",
			want: []string{"more than one YAML document; want exactly one (line 19)"},
		},
		{
			name: "plain http on a public address",
			yaml: valid + "http:\n  listen: 0.0.0.0:7440\n",
			want: []string{`http.listen: plain HTTP on "0.0.0.0:7440": without http.tls the endpoint must listen on a loopback address (or set readOnlyLoopbackOnly: false behind a TLS proxy) (line 20)`},
		},
		{
			name: "override names an array outside the cluster",
			yaml: sub("    arrays: [pstore-1]\n", "    arrays: [pstore-1]\n    nodes:\n      - name: w1\n        arrays:\n          pflex-9: abc\n"),
			want: []string{`clusters[0].nodes[0].arrays.pflex-9: array "pflex-9" is not one of this cluster's arrays (line 16)`},
		},
		{
			name: "caFile on powerscale",
			yaml: sub("family: powerstore\n", "family: powerscale\n") + "    caFile: " + dir + "/pw\n",
			want: []string{"arrays[0].caFile: not supported for powerscale arrays: the Dell client library trusts only the system certificate pool; add the CA there (update-ca-certificates) and remove caFile (line 19)"},
		},
		{
			name: "caFile on unity",
			yaml: sub("family: powerstore\n", "family: unity\n") + "    caFile: " + dir + "/pw\n",
			want: []string{"arrays[0].caFile: not supported for unity arrays"},
		},
		{
			name: "unity endpoint with a path",
			yaml: sub("family: powerstore\n    endpoint: https://127.0.0.1:9443\n", "family: unity\n    endpoint: https://127.0.0.1:9443/api\n"),
			want: []string{`arrays[0].endpoint: "https://127.0.0.1:9443/api": give scheme, host and port only for unity (line 16)`},
		},
		{
			name: "powermax endpoint host starting with api",
			yaml: sub("family: powerstore\n    endpoint: https://127.0.0.1:9443\n", "family: powermax\n    endpoint: https://api.example.net:8443\n"),
			want: []string{`arrays[0].endpoint: "https://api.example.net:8443": the powermax client strips the first "/api"`},
		},
		{
			name: "raft lease longer than heartbeat",
			yaml: valid + "raft:\n  leaderLeaseTimeout: 2s\n",
			want: []string{"raft.leaderLeaseTimeout: 2s is longer than raft.heartbeatTimeout 1s (line 20)"},
		},
	}
	for _, tc := range tcs {
		t.Run(tc.name, func(t *testing.T) {
			got := problems(t, []byte(tc.yaml), Options{})
			require.NotEmpty(t, got, "the configuration must be refused")
			for _, w := range tc.want {
				found := false
				for _, g := range got {
					if strings.HasPrefix(g, w) {
						found = true
					}
				}
				assert.True(t, found, "want a problem starting with\n  %s\ngot\n  %s", w, strings.Join(got, "\n  "))
			}
		})
	}
}

// TestEveryProblemReported checks problems are all reported at once, in
// line order.
func TestEveryProblemReported(t *testing.T) {
	got := problems(t, []byte("replica:\n  id: Bad\n  foo: 1\nraft:\n  commitTimeout: soon\nclusters:\n  - name: c\n    kubeconfig: /nonexistent/kc\n    stormLimit: x%\n"), Options{})
	assert.Equal(t, []string{
		`replica.raftAdvertiseAddress: required when raftBindAddress "0.0.0.0:7441" listens on all addresses (line 1)`,
		`replica.id: invalid name "Bad": want lower-case letters, digits and '-', starting and ending with a letter or digit, at most 63 characters (line 2)`,
		"replica.foo: unknown setting (line 3)",
		`raft.commitTimeout: invalid duration "soon": want a number with a unit, like "40s" or "1m30s" (line 5)`,
		"clusters[0].kubeconfig: file /nonexistent/kc does not exist (line 8)",
		`clusters[0].stormLimit: invalid percentage "x%": want a whole number from 1% to 100% (line 9)`,
	}, got)
}

func TestEnvironmentOverrides(t *testing.T) {
	dir := fixtureDir(t)
	t.Setenv("FENCED_HTTP_LISTEN", "127.0.0.1:9999")
	t.Setenv("FENCED_REPLICA_DATADIR", dir)
	t.Setenv("FENCED_RAFT_HEARTBEATTIMEOUT", "3s")
	t.Setenv("FENCED_RAFT_ELECTIONTIMEOUT", "3s")
	cfg, err := Parse(render(validYAML, dir), dir, Options{})
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1:9999", cfg.HTTP.Listen)
	assert.Equal(t, dir, cfg.Replica.DataDir)
	assert.Equal(t, 3*time.Second, cfg.Raft.HeartbeatTimeout)

	t.Setenv("FENCED_LOG_LEVEL", "loud")
	got := problems(t, render(validYAML, dir), Options{})
	assert.Equal(t, []string{`log.level: unknown level "loud": want debug, info, warn or error (from $FENCED_LOG_LEVEL)`}, got)
}

func TestRelativePathsFollowTheFile(t *testing.T) {
	dir := fixtureDir(t)
	data := strings.ReplaceAll(string(render(validYAML, dir)), dir+"/", "")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "fenced.yaml"), []byte(data), 0o600))
	cfg, err := Load(filepath.Join(dir, "fenced.yaml"), Options{})
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(dir, "pw"), cfg.Arrays[0].PasswordFile)
	assert.Equal(t, filepath.Join(dir, "kubeconfig"), cfg.Clusters[0].Kubeconfig)
}

func TestCredentials(t *testing.T) {
	dir := fixtureDir(t)
	creds := t.TempDir()
	data := strings.Replace(string(render(validYAML, dir)), dir+"/pw", "credential:pstore-1.pw", 1)

	cfg, err := Parse([]byte(data), dir, Options{})
	require.NoError(t, err, "unchecked without a credentials directory")
	assert.Equal(t, []string{"credential:pstore-1.pw"}, cfg.UncheckedCredentials())
	assert.Contains(t, cfg.Summary(), "1 credential reference not checked")

	got := problems(t, []byte(data), Options{CredentialsDir: creds})
	assert.Equal(t, []string{"arrays[0].passwordFile: file " + creds + "/pstore-1.pw does not exist (line 18)"}, got)

	// The shipped unit loads /etc/fenced/credentials/NAME as fenced_NAME.
	require.NoError(t, os.WriteFile(filepath.Join(creds, "fenced_pstore-1.pw"), []byte("s3cret\r\n"), 0o600))
	cfg, err = Parse([]byte(data), dir, Options{CredentialsDir: creds})
	require.NoError(t, err)
	cc, err := cfg.Arrays[0].ClientConfig(creds)
	require.NoError(t, err)
	assert.Equal(t, "s3cret", cc.Password)
	assert.Equal(t, arrayclients.PowerStore, cc.Family)
	assert.Equal(t, "initiators", cc.PowerStoreFenceMode)

	_, err = cfg.Arrays[0].ClientConfig("")
	require.ErrorIs(t, err, ErrNoCredentialsDir)

	bad := strings.Replace(data, "credential:pstore-1.pw", "credential:../x", 1)
	got = problems(t, []byte(bad), Options{})
	assert.Equal(t, []string{`arrays[0].passwordFile: invalid credential name "../x": want a plain file name (line 18)`}, got)
}

func TestClientConfigChapSecrets(t *testing.T) {
	dir := fixtureDir(t)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "chap"), []byte("iqn.1994-05.com.redhat:w1: chapsecret-1\n"), 0o600))
	a := Array{Name: "p", Family: arrayclients.PowerStore, PasswordFile: filepath.Join(dir, "pw"),
		PowerStore: PowerStoreOptions{ChapSecretsFile: filepath.Join(dir, "chap")}}
	cc, err := a.ClientConfig("")
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"iqn.1994-05.com.redhat:w1": "chapsecret-1"}, cc.ChapSecrets)
	assert.Equal(t, arrayclients.DefaultRequestTimeout, cc.RequestTimeout)

	require.NoError(t, os.WriteFile(filepath.Join(dir, "chap"), []byte("- chapsecret-2\n"), 0o600))
	_, err = a.ClientConfig("")
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "chapsecret-2")
}

// TestEndlessFilesAreRefused: /dev/zero as the configuration and as a
// secret file is refused with an error naming it, after reading no more
// than the limit (the test's own memory stays bounded).
func TestEndlessFilesAreRefused(t *testing.T) {
	if _, err := os.Stat("/dev/zero"); err != nil {
		t.Skip("no /dev/zero")
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)

	_, err := Load("/dev/zero", Options{SkipFileChecks: true})
	require.ErrorContains(t, err, "/dev/zero is larger than")
	_, err = ReadSecretFile("/dev/zero")
	require.ErrorContains(t, err, "/dev/zero is larger than")

	runtime.ReadMemStats(&after)
	assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(64<<20), "reading stopped at the limits")
}
