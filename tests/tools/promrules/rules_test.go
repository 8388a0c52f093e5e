package promrules

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/promql/promqltest"
	"github.com/prometheus/prometheus/rules"
	"go.yaml.in/yaml/v2"
)

// testFile is the subset of promtool's rule unit test file used.
type testFile struct {
	RuleFiles          []string       `yaml:"rule_files"`
	EvaluationInterval model.Duration `yaml:"evaluation_interval"`
	Tests              []testGroup    `yaml:"tests"`
}

type testGroup struct {
	Name          string         `yaml:"name"`
	Interval      model.Duration `yaml:"interval"`
	InputSeries   []series       `yaml:"input_series"`
	AlertRuleTest []alertTest    `yaml:"alert_rule_test"`
}

type series struct {
	Series string `yaml:"series"`
	Values string `yaml:"values"`
}

type alertTest struct {
	EvalTime  model.Duration `yaml:"eval_time"`
	Alertname string         `yaml:"alertname"`
	ExpAlerts []struct {
		ExpLabels      map[string]string `yaml:"exp_labels"`
		ExpAnnotations map[string]string `yaml:"exp_annotations"`
	} `yaml:"exp_alerts"`
}

// testsPath is the test file; $FENCED_ALERT_TESTS overrides it.
func testsPath() string {
	if p := os.Getenv("FENCED_ALERT_TESTS"); p != "" {
		return p
	}
	return filepath.Join("..", "..", "..", "deploy", "prometheus", "fenced-alerts.test.yaml")
}

func TestAlertRules(t *testing.T) {
	path := testsPath()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	var tf testFile
	if err := yaml.UnmarshalStrict(raw, &tf); err != nil {
		t.Fatalf("decode %s: %v", path, err)
	}
	if tf.EvaluationInterval == 0 {
		tf.EvaluationInterval = model.Duration(time.Minute)
	}
	p := parser.NewParser(parser.Options{})
	var alerting []rulefmt.Rule
	for _, rf := range tf.RuleFiles {
		groups, errs := rulefmt.ParseFile(filepath.Join(filepath.Dir(path), rf), false, model.UTF8Validation, p, slog.New(slog.DiscardHandler))
		if len(errs) > 0 {
			t.Fatalf("rule file %s: %v", rf, errs)
		}
		for _, g := range groups.Groups {
			for _, n := range g.Rules {
				if n.Alert != "" {
					alerting = append(alerting, rulefmt.Rule{Alert: n.Alert, Expr: n.Expr, For: n.For,
						KeepFiringFor: n.KeepFiringFor, Labels: n.Labels, Annotations: n.Annotations})
				}
			}
		}
	}
	if len(tf.Tests) == 0 || len(alerting) == 0 {
		t.Fatalf("%s: no tests or no alerting rules", path)
	}
	for _, tg := range tf.Tests {
		t.Run(tg.Name, func(t *testing.T) { runGroup(t, p, alerting, time.Duration(tf.EvaluationInterval), tg) })
	}
}

func runGroup(t *testing.T, p parser.Parser, defs []rulefmt.Rule, every time.Duration, tg testGroup) {
	interval := time.Duration(tg.Interval)
	if interval == 0 {
		interval = time.Minute
	}
	var load strings.Builder
	fmt.Fprintf(&load, "load %s\n", model.Duration(interval))
	for _, s := range tg.InputSeries {
		fmt.Fprintf(&load, "  %s %s\n", s.Series, s.Values)
	}
	storage := promqltest.LoadedStorage(t, load.String())
	engine := promqltest.NewTestEngine(t, false, 0, promqltest.DefaultMaxSamplesPerQuery)
	query := rules.EngineQueryFunc(engine, storage)

	byName := map[string][]*rules.AlertingRule{}
	var all []*rules.AlertingRule
	for _, d := range defs {
		expr, err := p.ParseExpr(d.Expr)
		if err != nil {
			t.Fatalf("alert %s: %v", d.Alert, err)
		}
		r := rules.NewAlertingRule(d.Alert, expr, time.Duration(d.For), time.Duration(d.KeepFiringFor),
			labels.FromMap(d.Labels), labels.FromMap(d.Annotations), labels.EmptyLabels(), "", false, slog.New(slog.DiscardHandler))
		byName[d.Alert] = append(byName[d.Alert], r)
		all = append(all, r)
	}
	var end time.Duration
	for _, at := range tg.AlertRuleTest {
		if _, ok := byName[at.Alertname]; !ok {
			t.Errorf("no alerting rule %s", at.Alertname)
		}
		if time.Duration(at.EvalTime)%every != 0 {
			t.Errorf("%s: eval_time %s is not a multiple of the evaluation interval %s", at.Alertname, at.EvalTime, model.Duration(every))
		}
		end = max(end, time.Duration(at.EvalTime))
	}
	for ts := time.Duration(0); ts <= end; ts += every {
		for _, r := range all {
			if _, err := r.Eval(context.Background(), 0, time.Unix(0, 0).Add(ts), query, nil, 0); err != nil {
				t.Fatalf("evaluate %s at %s: %v", r.Name(), model.Duration(ts), err)
			}
		}
		for _, at := range tg.AlertRuleTest {
			if time.Duration(at.EvalTime) != ts {
				continue
			}
			var got, want []string
			for _, r := range byName[at.Alertname] {
				for _, a := range r.ActiveAlerts() {
					if a.State == rules.StateFiring {
						got = append(got, a.Labels.String()+" "+a.Annotations.String())
					}
				}
			}
			for _, e := range at.ExpAlerts {
				l := labels.FromMap(e.ExpLabels)
				b := labels.NewBuilder(l)
				b.Set(labels.AlertName, at.Alertname)
				want = append(want, b.Labels().String()+" "+labels.FromMap(e.ExpAnnotations).String())
			}
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("%s at %s:\n  want firing %q\n  got firing  %q", at.Alertname, model.Duration(ts), want, got)
			}
		}
	}
}
