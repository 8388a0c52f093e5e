package main

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fenced-project/fenced/cmd/fenced/internal/logging"
	"github.com/fenced-project/fenced/tests/arraysim/families"
	"github.com/fenced-project/fenced/tests/arraysim/fixture"
	"github.com/fenced-project/fenced/tests/arraysim/simcore"
	"github.com/fenced-project/fenced/tests/testbed"
)

// logKeyStyle is the documented key style (docs/operations.md, "Logs").
var logKeyStyle = regexp.MustCompile(`^[a-z][a-zA-Z0-9]*$`)

// TestJSONLogsOfARun runs one replica with --log-format json at debug
// level against the test bed's cluster and an array of every family, has
// an operator fence a node, and reads everything the process wrote on
// stderr and stdout: every line is one JSON object (klog, the standard
// log package, stdout prints and the Dell libraries' loggers included),
// with time, level and msg, keys in the documented style and none twice;
// the documented keys appear (cluster, node, array, family, fenceID, op,
// result); levels are the four named ones; durations are seconds; and no secret (array passwords in any
// form, the API token, the kubeconfig token) shows.
func TestJSONLogsOfARun(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane, five array simulators and fenced")
	}
	bin := buildFenced(t)
	cp := testbed.Start(t, testbed.Options{NodeLeaseDurationSeconds: 8,
		Tokens: []testbed.Token{{Token: productKubeToken, User: "fenced-logs", UID: "fenced-logs", Groups: []string{"system:masters"}}}})
	ctx := t.Context()
	nodes, err := cp.AddNodes(ctx, testbed.NodeSpecs("logs", 2)...)
	require.NoError(t, err)
	var names []string
	for _, n := range nodes {
		names = append(names, n.Name())
	}
	require.NoError(t, cp.WaitNodesReady(ctx, names...))

	type array struct{ name, family, user, password, sect string }
	arrays := []array{
		{"pflex-1", fixture.PowerFlex, "admin", "Logs-pflex-Pw1", "    powerflex: {systemID: 1a2b3c4d5e6f7a8b}\n"},
		{"pstore-1", fixture.PowerStore, "admin", "Logs-pstore-Pw2", ""},
		{"unity-1", fixture.Unity, "admin", "Logs-unity-Pw3", ""},
		{"pscale-1", fixture.PowerScale, "admin", "Logs-pscale-Pw4", ""},
		{"pmax-1", fixture.PowerMax, "smc", "Logs-pmax-Pw5", fmt.Sprintf("    powermax: {symmetrixID: %q, clusterPrefix: %s}\n", pmaxSymmetrixID, pmaxPrefix)},
	}
	var doc strings.Builder
	doc.WriteString("nodes:\n")
	for _, n := range nodes {
		s := n.Spec
		fmt.Fprintf(&doc, "  - {name: %s, ip: %s, fqdn: %s, machineID: %s, sdcGUID: %s, iqn: %q, wwpns: [%q]}\n",
			s.Name, s.IP, s.FQDN, s.MachineID, s.SDCGUID, s.IQN, s.WWPNs[0])
	}
	doc.WriteString("arrays:\n")
	specs := map[string]string{
		fixture.PowerFlex:  "systems: [{id: 1a2b3c4d5e6f7a8b, name: sys-1}], perNode: {volumes: 1}",
		fixture.PowerStore: "perNode: {protocol: iSCSI, volumes: 1}",
		fixture.Unity:      "generate: {lunsPerNode: 1}",
		fixture.PowerScale: "perNode: {exports: 1, shared: 0}",
		fixture.PowerMax:   fmt.Sprintf("symmetrixID: %q, generate: {clusterPrefix: %s, volumesPerNode: 1}", pmaxSymmetrixID, pmaxPrefix),
	}
	for _, a := range arrays {
		fmt.Fprintf(&doc, "  - {name: %s, family: %s, spec: {username: %s, password: %s, %s}}\n", a.name, a.family, a.user, a.password, specs[a.family])
	}
	fx, err := fixture.Parse([]byte(doc.String()))
	require.NoError(t, err, doc.String())

	dir := t.TempDir()
	var arraysYAML strings.Builder
	for i, fa := range fx.Arrays {
		a := arrays[i]
		fam, err := families.New(fa, fx.Nodes)
		require.NoError(t, err)
		l, err := simcore.Serve(simcore.New(fa.Name, fam, nil), "127.0.0.1:0", true, t.TempDir())
		require.NoError(t, err)
		t.Cleanup(func() { _ = l.Close() })
		pw := filepath.Join(dir, a.name+".password")
		require.NoError(t, os.WriteFile(pw, []byte(a.password), 0o600))
		fmt.Fprintf(&arraysYAML, "  - name: %s\n    family: %s\n    endpoint: %s\n    username: %s\n    passwordFile: %s\n    requestTimeout: 3s\n",
			a.name, a.family, l.URL, a.user, pw)
		if a.family == fixture.Unity || a.family == fixture.PowerScale {
			arraysYAML.WriteString("    insecure: true\n") // their libraries take no CA file
		} else {
			fmt.Fprintf(&arraysYAML, "    caFile: %s\n", l.CAFile)
		}
		arraysYAML.WriteString(a.sect)
	}
	kc := filepath.Join(dir, "kubeconfig")
	require.NoError(t, cp.WriteKubeconfig(kc, productKubeToken))
	tokenFile := filepath.Join(dir, "api-token")
	require.NoError(t, os.WriteFile(tokenFile, []byte(productAPIToken+"\n"), 0o600))
	httpAddr := freeAddr(t)
	cfg := fmt.Sprintf(`replica:
  id: r1
  dataDir: %s
  raftBindAddress: %s
http:
  listen: %s
  tokenFile: %s
log:
  format: text
  level: info
clusters:
  - name: %s
    kubeconfig: %s
    heartbeatGrace: 10s
    pollInterval: 500ms
    corroboration: kubelet
    settlePeriod: 3s
    arrays: [pflex-1, pstore-1, unity-1, pscale-1, pmax-1]
arrays:
%s`, filepath.Join(dir, "data"), freeAddr(t), httpAddr, tokenFile, productCluster, kc, arraysYAML.String())
	cfgPath := filepath.Join(dir, "fenced.yaml")
	require.NoError(t, os.WriteFile(cfgPath, []byte(cfg), 0o600))

	base := "http://" + httpAddr
	p := start(t, bin, "run", "--config", cfgPath, "--log-format", "json", "--log-level", "debug")
	waitHealthy(t, p, base)
	require.Eventually(t, func() bool {
		if code, _ := httpGet(t, base+"/readyz"); code != http.StatusOK {
			return false
		}
		st, ok := getStatus(t, base)
		if !ok || len(st.Arrays) != len(arrays) || len(st.Clusters) != 1 {
			return false
		}
		for _, a := range st.Arrays {
			if !a.Reachable {
				return false
			}
		}
		return true
	}, 2*time.Minute, 250*time.Millisecond, "arrays never all reachable; log:\n%s", p.stderr)

	var out string
	require.Eventually(t, func() bool {
		var code int
		code, out = cli(t, bin, "fence", names[0], "--addr", base, "--token-file", tokenFile, "--cluster", productCluster,
			"--reason", "log test", "--operator", "alice")
		return code == 0
	}, time.Minute, time.Second, "operator fence refused: %s", out)
	require.Eventually(t, func() bool { return strings.Contains(p.stderr.String(), `"fenceID":"`) },
		time.Minute, 200*time.Millisecond, "no record names the fence; log:\n%s", p.stderr)
	code, _ := p.stop(t)
	require.Equal(t, 0, code)

	logs := p.stderr.String()
	seen := map[string]bool{}
	libraries := map[string]bool{}
	for i, line := range strings.Split(strings.TrimRight(logs, "\n"), "\n") {
		if !assert.True(t, json.Valid([]byte(line)), "line %d is not JSON: %s", i+1, line) {
			continue
		}
		keys := topLevelKeys(t, line)
		count := map[string]int{}
		for _, k := range keys {
			count[k]++
			seen[k] = true
			assert.Regexp(t, logKeyStyle, k, "line %d: key %q not in the documented style: %s", i+1, k, line)
		}
		for k, n := range count {
			assert.Equal(t, 1, n, "line %d: key %q repeated: %s", i+1, k, line)
		}
		var rec map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &rec))
		for _, k := range []string{"time", "level", "msg"} {
			assert.Contains(t, rec, k, "line %d: %s", i+1, line)
		}
		assert.Contains(t, []any{"DEBUG", "INFO", "WARN", "ERROR"}, rec["level"], "line %d: %s", i+1, line)
		assert.NotContains(t, rec, "err", "line %d: error is the key: %s", i+1, line)
		if lib, ok := rec["library"].(string); ok {
			libraries[lib] = true
		}
		if d, ok := rec["duration"]; ok {
			assert.IsType(t, float64(0), d, "durations are seconds: %s", line)
			assert.Less(t, d.(float64), 600.0, "durations are seconds, not nanoseconds: %s", line)
		}
	}
	for _, k := range []string{"cluster", "node", "array", "family", "fenceID", "op", "result", "component", "library", "duration"} {
		assert.True(t, seen[k], "no record has the documented key %q", k)
	}
	// Every journal field the README and the guide advertise is the
	// journal name of a key the run logged.
	fields := map[string]bool{}
	for k := range seen {
		fields[logging.FieldName(k)] = true
	}
	advertised := advertisedJournalFields(t)
	require.NotEmpty(t, advertised)
	for _, f := range advertised {
		assert.True(t, fields[f], "journal field %s is advertised but no record carries it (fields: %v)", f, fields)
	}
	assert.True(t, libraries["klog"] || libraries["stdlog"] || libraries["gopowerstore"] || libraries["goscaleio"],
		"some library record expected among: %v", libraries)
	secrets := []string{productAPIToken, productKubeToken}
	for _, a := range arrays {
		secrets = append(secrets, a.password,
			base64.StdEncoding.EncodeToString([]byte(a.user+":"+a.password)),
			strings.TrimRight(base64.StdEncoding.EncodeToString([]byte(a.user+":"+a.password)), "="))
	}
	for _, s := range secrets {
		assert.NotContains(t, logs, s)
	}
	if t.Failed() {
		t.Logf("log:\n%s", logs)
	}
}

// advertisedJournalFields reads the journal fields the README and docs
// name ("structured fields: CLUSTER, NODE, ...", "fields such as ...").
func advertisedJournalFields(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("../../docs/*.md")
	require.NoError(t, err)
	files = append(files, "../../README.md")
	field := regexp.MustCompile(`\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)*\b`)
	seen := map[string]bool{}
	var out []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, line := range strings.Split(string(b), "\n") {
			for _, phrase := range []string{"structured fields:", "fields such as"} {
				i := strings.Index(line, phrase)
				if i < 0 {
					continue
				}
				for _, m := range field.FindAllString(line[i+len(phrase):], -1) {
					if !seen[m] {
						seen[m] = true
						out = append(out, m)
					}
				}
			}
		}
	}
	return out
}

// topLevelKeys returns the keys of one JSON object in order, repeats kept.
func topLevelKeys(t *testing.T, line string) []string {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(line))
	tok, err := dec.Token()
	require.NoError(t, err)
	require.Equal(t, json.Delim('{'), tok, line)
	var keys []string
	for dec.More() {
		k, err := dec.Token()
		require.NoError(t, err, line)
		keys = append(keys, k.(string))
		var v json.RawMessage
		require.NoError(t, dec.Decode(&v), line)
	}
	return keys
}
