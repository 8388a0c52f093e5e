// Package promrules runs the unit tests of fenced's example Prometheus
// alert rules (deploy/prometheus/fenced-alerts.test.yaml, in promtool's
// `test rules` format) with Prometheus's own rule evaluation: the series
// are loaded into a test storage and every alerting rule is evaluated at
// each evaluation interval up to the test's times, so `for` holds as in a
// Prometheus server. See rules_test.go.
package promrules
