package testbed_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fenced-project/fenced/tests/testbed"
)

// BenchmarkControlPlaneStart measures a warm start (binaries already built)
// of a whole control plane until it is ready, and its stop.
//
//	go test -run '^$' -bench ControlPlaneStart -benchtime 3x ./tests/testbed/
func BenchmarkControlPlaneStart(b *testing.B) {
	if _, err := testbed.EnsureBinaries(b.Context(), nil); err != nil {
		b.Fatal(err)
	}
	var startTotal time.Duration
	for b.Loop() {
		t0 := time.Now()
		cp, err := testbed.StartControlPlane(b.Context(), testbed.Options{})
		if err != nil {
			b.Fatal(err)
		}
		startTotal += time.Since(t0)
		cp.Stop()
	}
	b.ReportMetric(startTotal.Seconds()/float64(b.N), "s-to-ready/op")
}

// BenchmarkControlPlaneRSS reports the resident memory of the running
// control plane (all five components) with 10 and with 1,000 kwok nodes,
// once every node's Lease was renewed twice.
//
//	go test -run '^$' -bench ControlPlaneRSS -benchtime 1x ./tests/testbed/
func BenchmarkControlPlaneRSS(b *testing.B) {
	for _, n := range []int{10, 1000} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			for b.Loop() {
				rssWithNodes(b, n)
			}
		})
	}
}

func rssWithNodes(b *testing.B, n int) {
	ctx, cancel := context.WithTimeout(b.Context(), 15*time.Minute)
	defer cancel()
	cp, err := testbed.StartControlPlane(ctx, testbed.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer cp.Stop()
	nodes, err := cp.AddNodes(ctx, testbed.NodeSpecs("kwok", n)...)
	if err != nil {
		b.Fatal(err)
	}
	names := make([]string, n)
	for i, nd := range nodes {
		names[i] = nd.Name()
	}
	if err := cp.WaitNodesReady(ctx, names...); err != nil {
		b.Fatal(err)
	}
	// Steady state: two more rounds of Lease renewals (every 10 s).
	for range 2 {
		since := time.Now()
		for {
			leases, err := cp.Client.CoordinationV1().Leases(corev1.NamespaceNodeLease).List(ctx, metav1.ListOptions{})
			if err != nil {
				b.Fatal(err)
			}
			renewed := 0
			for _, l := range leases.Items {
				if l.Spec.RenewTime != nil && l.Spec.RenewTime.After(since) {
					renewed++
				}
			}
			if renewed >= n {
				break
			}
			select {
			case <-ctx.Done():
				b.Fatalf("leases not renewed: %d of %d", renewed, n)
			case <-time.After(time.Second):
			}
		}
	}
	byName, total, err := cp.RSS()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(total)/(1<<20), "rss-MiB")
	for name, v := range byName {
		b.ReportMetric(float64(v)/(1<<20), name+"-MiB")
	}
}
