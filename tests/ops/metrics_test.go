package ops

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

// TestMetricsReferenceMatchesCode checks docs/metrics.md lists exactly the
// fenced_* metrics the code defines, with their types and labels.
func TestMetricsReferenceMatchesCode(t *testing.T) {
	root := repoRoot(t)
	documented := parseMetricsDoc(t, filepath.Join(root, "docs", "metrics.md"))
	defined := definedMetrics(t, root)
	require.NotEmpty(t, defined)
	for _, name := range metricNames(defined) {
		doc, ok := documented[name]
		if assert.True(t, ok, "%s (%s) is defined in the code but not documented in docs/metrics.md", name, defined[name]) {
			assert.Equal(t, defined[name], doc, "%s: docs/metrics.md says %s, the code %s", name, doc, defined[name])
		}
	}
	for _, name := range metricNames(documented) {
		_, ok := defined[name]
		assert.True(t, ok, "%s is documented in docs/metrics.md but no code defines it", name)
	}
	t.Logf("%d fenced_* metrics documented and defined", len(defined))
}

// scrape fetches and parses /metrics (text format).
func scrape(t testing.TB, base string) map[string]*dto.MetricFamily {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, base+"/metrics", nil)
	require.NoError(t, err)
	req.Header.Set("Accept", "text/plain; version=0.0.4")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(resp.Body)
	require.NoError(t, err)
	return mfs
}

// exposedSpec is the type and label names of a scraped family.
func exposedSpec(mf *dto.MetricFamily) metricSpec {
	set := map[string]bool{}
	for _, m := range mf.GetMetric() {
		for _, l := range m.GetLabel() {
			set[l.GetName()] = true
		}
	}
	labels := []string{}
	for l := range set {
		labels = append(labels, l)
	}
	sort.Strings(labels)
	return metricSpec{Type: strings.ToLower(mf.GetType().String()), Labels: labels}
}

// unreachableClusterConfig writes a single-replica configuration with one
// cluster whose API server and array do not answer, so that every component
// fenced run wires for a cluster starts. It returns the configuration's path
// and the HTTP address.
func unreachableClusterConfig(t testing.TB, kubeconfigUser, password string) (cfg, httpAddr string) {
	t.Helper()
	dir := t.TempDir()
	kc := filepath.Join(dir, "kubeconfig")
	require.NoError(t, os.WriteFile(kc, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://%s", insecure-skip-tls-verify: true}}]
users: [{name: u, user: %s}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`, freeAddr(t), kubeconfigUser)), 0o600))
	pw := filepath.Join(dir, "unity-1.password")
	require.NoError(t, os.WriteFile(pw, []byte(password+"\n"), 0o600))
	httpAddr = freeAddr(t)
	doc := fmt.Sprintf(`replica:
  id: ops
  dataDir: %s
  raftBindAddress: %s
http:
  listen: %s
log:
  format: text
  level: debug
clusters:
  - name: lab
    kubeconfig: %s
    arrays: [unity-1]
arrays:
  - name: unity-1
    family: unity
    endpoint: https://%s
    username: admin
    passwordFile: %s
`, filepath.Join(dir, "data"), freeAddr(t), httpAddr, kc, freeAddr(t), pw)
	cfg = filepath.Join(dir, "fenced.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte(doc), 0o600))
	return cfg, httpAddr
}

// TestMetricsExposedAreDocumented runs `fenced run` and checks every
// fenced_* family it exposes on /metrics is in docs/metrics.md with the
// same type and labels.
func TestMetricsExposedAreDocumented(t *testing.T) {
	root := repoRoot(t)
	documented := parseMetricsDoc(t, filepath.Join(root, "docs", "metrics.md"))
	cfg, addr := unreachableClusterConfig(t, "{token: abc}", "pw")
	d := startDaemon(t, cfg, addr)

	// Wait for the components to report: the Raft group elects this single
	// replica and the API server probe has run once.
	var mfs map[string]*dto.MetricFamily
	require.Eventually(t, func() bool {
		mfs = scrape(t, d.base)
		st := mfs["fenced_raft_state"]
		if st == nil || mfs["fenced_apiserver_up"] == nil {
			return false
		}
		for _, m := range st.GetMetric() {
			if m.GetLabel()[0].GetValue() == "leader" && m.GetGauge().GetValue() == 1 {
				return true
			}
		}
		return false
	}, 30*time.Second, 100*time.Millisecond, "fenced never became leader:\n%s", d.out.String())

	var exposed []string
	for name, mf := range mfs {
		if !strings.HasPrefix(name, "fenced_") {
			continue
		}
		exposed = append(exposed, name)
		doc, ok := documented[name]
		if assert.True(t, ok, "/metrics exposes %s, which docs/metrics.md does not list", name) {
			assert.Equal(t, doc, exposedSpec(mf), "%s: documented vs exposed", name)
		}
	}
	sort.Strings(exposed)
	t.Logf("fenced run exposes %d fenced_* families: %s", len(exposed), strings.Join(exposed, " "))
	for _, must := range []string{"fenced_build_info", "fenced_apiserver_up", "fenced_raft_state", "fenced_raft_term"} {
		assert.Contains(t, exposed, must)
	}
}

// alertRules is a Prometheus rule file.
type alertRules struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

var (
	metricRef   = regexp.MustCompile(`\bfenced_[a-z_]+`)
	selectorRE  = regexp.MustCompile(`(fenced_[a-z_]+)\{([^}]*)\}`)
	matcherRE   = regexp.MustCompile(`([a-z_]+)\s*(=~|!~|!=|=)`)
	byRE        = regexp.MustCompile(`\bby\s*\(([^)]*)\)`)
	templateRE  = regexp.MustCompile(`\$labels\.([a-zA-Z_]+)`)
	promDuraton = regexp.MustCompile(`^([0-9]+(ms|s|m|h|d|w|y))+$`)
)

// TestAlertRules parses the example alert rules and checks they are well
// formed, cover the alerts the operator's guide explains, and use only
// documented metrics with labels those metrics have.
func TestAlertRules(t *testing.T) {
	root := repoRoot(t)
	documented := parseMetricsDoc(t, filepath.Join(root, "docs", "metrics.md"))
	b, err := os.ReadFile(filepath.Join(root, "deploy", "prometheus", "fenced-alerts.yaml"))
	require.NoError(t, err)
	var rules alertRules
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(true)
	require.NoError(t, dec.Decode(&rules))
	require.NotEmpty(t, rules.Groups)

	guide, err := os.ReadFile(filepath.Join(root, "docs", "operations.md"))
	require.NoError(t, err)

	seen := map[string]bool{}
	for _, g := range rules.Groups {
		require.NotEmpty(t, g.Name)
		for _, r := range g.Rules {
			t.Run(r.Alert, func(t *testing.T) {
				require.NotEmpty(t, r.Alert)
				assert.False(t, seen[r.Alert], "duplicate alert")
				seen[r.Alert] = true
				require.NotEmpty(t, r.Expr)
				assert.Equal(t, strings.Count(r.Expr, "("), strings.Count(r.Expr, ")"), "unbalanced parentheses")
				assert.Equal(t, strings.Count(r.Expr, "{"), strings.Count(r.Expr, "}"), "unbalanced braces")
				if r.For != "" {
					assert.Regexp(t, promDuraton, r.For)
				}
				assert.Contains(t, []string{"critical", "warning"}, r.Labels["severity"])
				assert.NotEmpty(t, r.Annotations["summary"])
				assert.NotEmpty(t, r.Annotations["description"])
				assert.Contains(t, string(guide), "`"+r.Alert+"`", "docs/operations.md does not explain %s", r.Alert)
				// runbook_url links the guide's section of the alert (its
				// heading "### `Name`" has the anchor #name).
				assert.Contains(t, string(guide), "\n### `"+r.Alert+"`\n", "docs/operations.md has no section for %s", r.Alert)
				assert.True(t, strings.HasSuffix(r.Annotations["runbook_url"], "/docs/operations.md#"+strings.ToLower(r.Alert)),
					"runbook_url %q does not link the guide's section", r.Annotations["runbook_url"])

				// Every fenced_* metric is documented (histogram series by
				// their family name).
				available := map[string]bool{"job": true, "instance": true}
				for _, ref := range metricRef.FindAllString(r.Expr, -1) {
					name := ref
					for _, suffix := range []string{"_bucket", "_sum", "_count"} {
						if base := strings.TrimSuffix(ref, suffix); base != ref && documented[base].Type == "histogram" {
							name = base
						}
					}
					spec, ok := documented[name]
					if !assert.True(t, ok, "%s is not a documented metric", ref) {
						continue
					}
					available = map[string]bool{"job": true, "instance": true}
					for _, l := range spec.Labels {
						available[l] = true
					}
				}
				// Label matchers name labels the metric has.
				for _, m := range selectorRE.FindAllStringSubmatch(r.Expr, -1) {
					spec := documented[m[1]]
					for _, mm := range matcherRE.FindAllStringSubmatch(m[2], -1) {
						l := mm[1]
						assert.True(t, l == "job" || l == "instance" || contains(spec.Labels, l), "%s has no label %q", m[1], l)
					}
				}
				// Templates use labels the result has: those of `by (...)`
				// when aggregated, else the metric's and the target's.
				if by := byRE.FindStringSubmatch(r.Expr); by != nil {
					available = map[string]bool{}
					for _, l := range strings.Split(by[1], ",") {
						available[strings.TrimSpace(l)] = true
					}
				} else if regexp.MustCompile(`\b(sum|max|min|avg|count)\s*\(`).MatchString(r.Expr) {
					available = map[string]bool{}
				}
				for _, text := range r.Annotations {
					for _, m := range templateRE.FindAllStringSubmatch(text, -1) {
						assert.True(t, available[m[1]], "annotation uses $labels.%s, which the expression's result lacks", m[1])
					}
				}
			})
		}
	}
	for _, want := range []string{"FencedFenceFailing", "FencedStormGuardActive", "FencedNoLeader", "FencedNodeAwaitingReboot", "FencedArrayUnreachable"} {
		assert.True(t, seen[want], "missing alert %s", want)
	}
}

func contains(list []string, s string) bool {
	for _, l := range list {
		if l == s {
			return true
		}
	}
	return false
}
