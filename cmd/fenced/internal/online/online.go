// Package online checks, before fenced starts, that every array and every
// cluster's API server of a configuration answers, accepts fenced's
// credentials and, for the API servers, lets fenced do what it needs: the
// `fenced config validate --online` checks. Only read-only calls are made:
// each array's connectivity check (a login and a read of the system), and
// each API server's /version and SelfSubjectAccessReviews.
package online

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/fenced-project/fenced/arrayclients"
	"github.com/fenced-project/fenced/arrayclients/all"
	"github.com/fenced-project/fenced/cmd/fenced/internal/daemon"
	"github.com/fenced-project/fenced/configs"
	"github.com/fenced-project/fenced/kube"
)

// Outcome is one target's result.
type Outcome string

// Outcomes, from the best to the worst a script may act on.
const (
	// Reachable: the target answered, accepted the credentials and (an API
	// server) allows everything fenced needs.
	Reachable Outcome = "reachable"
	// MissingRBAC: the API server accepted the credentials but does not
	// allow every verb fenced needs (Target.Missing names them).
	MissingRBAC Outcome = "missing-rbac"
	// WrongCredentials: the target answered and refused the user name,
	// password, token or certificate.
	WrongCredentials Outcome = "wrong-credentials"
	// Refused: nothing listens at the address (connection refused).
	Refused Outcome = "refused"
	// Unreachable: no answer in time, no route, a name that does not
	// resolve, or a TLS failure.
	Unreachable Outcome = "unreachable"
	// Failed: any other error (the target's answer says what).
	Failed Outcome = "error"
)

// Kinds of target.
const (
	KindArray   = "array"
	KindCluster = "cluster"
)

// Target is the result of one array or one cluster's API server.
type Target struct {
	Kind     string  `json:"kind"`
	Name     string  `json:"name"`
	Endpoint string  `json:"endpoint,omitempty"`
	Outcome  Outcome `json:"outcome"`
	// Version is the array's API version or the API server's gitVersion.
	Version string `json:"version,omitempty"`
	// Missing lists what the API server does not allow fenced to do.
	Missing []kube.Access `json:"missing,omitempty"`
	Error   string        `json:"error,omitempty"`
}

// OK reports whether the target passed.
func (t Target) OK() bool { return t.Outcome == Reachable }

// Timeout bounds each target's checks.
const Timeout = 20 * time.Second

// Check checks every array and every cluster of the daemon's configuration,
// side by side, and returns one result per array then one per cluster, in
// the configuration's order.
func Check(ctx context.Context, d *daemon.Daemon) ([]Target, error) {
	cfg := d.Config()
	acfgs := d.ArrayConfigs()
	reg, err := all.New(acfgs, arrayclients.Options{Registry: prometheus.NewRegistry()})
	if err != nil {
		return nil, fmt.Errorf("arrays: %w", err)
	}
	out := make([]Target, len(acfgs)+len(cfg.Clusters))
	var wg sync.WaitGroup
	for i, a := range acfgs {
		wg.Go(func() {
			out[i] = checkArray(ctx, reg, a)
		})
	}
	for i, c := range cfg.Clusters {
		wg.Go(func() {
			out[len(acfgs)+i] = checkCluster(ctx, c, d.CredentialsDir())
		})
	}
	wg.Wait()
	return out, nil
}

func checkArray(ctx context.Context, reg *arrayclients.Registry, a arrayclients.Config) Target {
	t := Target{Kind: KindArray, Name: a.Name, Endpoint: a.Endpoint}
	ad, ok := reg.Get(a.Name)
	if !ok {
		t.Outcome, t.Error = Failed, "no adapter was built for the array"
		return t
	}
	cctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	r := ad.Check(cctx)
	if r.Reachable {
		t.Outcome, t.Version = Reachable, r.APIVersion
		return t
	}
	t.Error = r.Error
	t.Outcome = classify(nil, r.Error)
	return t
}

func checkCluster(ctx context.Context, c configs.Cluster, credDir string) Target {
	t := Target{Kind: KindCluster, Name: c.Name}
	fail := func(o Outcome, err error) Target {
		t.Outcome, t.Error = o, err.Error()
		return t
	}
	path, err := configs.ResolveFile(c.Kubeconfig, credDir)
	if err != nil {
		return fail(Failed, fmt.Errorf("kubeconfig: %w", err))
	}
	rc, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return fail(Failed, fmt.Errorf("load kubeconfig %s: %w", path, err))
	}
	t.Endpoint = rc.Host
	rc.Timeout = Timeout
	rc.UserAgent = "fenced"
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return fail(Failed, fmt.Errorf("client for %s: %w", rc.Host, err))
	}
	cctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	// /version needs no authentication on most API servers: a review
	// shows whether the credentials are accepted.
	v, err := cs.Discovery().ServerVersion()
	if err != nil {
		return fail(classify(err, err.Error()), fmt.Errorf("GET %s/version: %w", rc.Host, err))
	}
	t.Version = v.GitVersion
	missing, err := kube.MissingAccess(cctx, cs, kube.RequiredAccess())
	if err != nil {
		return fail(classify(err, err.Error()), err)
	}
	if len(missing) > 0 {
		names := make([]string, len(missing))
		for i, m := range missing {
			names[i] = m.String()
		}
		t.Outcome, t.Missing = MissingRBAC, missing
		t.Error = "not allowed to " + strings.Join(names, ", ") + " (apply /usr/share/fenced/kubernetes/rbac.yaml)"
		return t
	}
	t.Outcome = Reachable
	return t
}

// classify maps a failure to an outcome, from the error's chain when the
// client kept it and from its text otherwise (the array libraries format
// errors into strings).
func classify(err error, text string) Outcome {
	var dnsErr *net.DNSError
	switch {
	case err != nil && apierrors.IsUnauthorized(err):
		return WrongCredentials
	case err != nil && errors.Is(err, syscall.ECONNREFUSED):
		return Refused
	case err != nil && (errors.As(err, &dnsErr) || errors.Is(err, context.DeadlineExceeded)):
		return Unreachable
	}
	low := strings.ToLower(text)
	switch {
	case strings.Contains(low, "connection refused"):
		return Refused
	case containsAny(low, "401", "unauthorized", "unauthorised", "authentication", "invalid credentials",
		"invalid username", "bad credentials", "login failed", "wrong password", "not authorized", "authorization required"):
		return WrongCredentials
	case containsAny(low, "no such host", "i/o timeout", "deadline exceeded", "timeout", "no route to host",
		"network is unreachable", "x509:", "tls:", "certificate"):
		return Unreachable
	}
	return Failed
}

func containsAny(s string, subs ...string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}
