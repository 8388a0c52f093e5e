package detector

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkEvaluateThousandNodes measures one evaluation of a 1,000-node
// cluster in steady state (every node renewing, none late).
func BenchmarkEvaluateThousandNodes(b *testing.B) {
	m, err := NewMachine("c", DefaultPolicy())
	if err != nil {
		b.Fatal(err)
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const n = 1000
	for i := range n {
		name := fmt.Sprintf("node-%04d", i)
		m.ObserveNode(NodeObservation{Node: name, Ready: "True", ObservedAt: now})
	}
	self := Self{APIReachable: true, WatchSynced: true, Quorum: true, Replicas: 3}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		now = now.Add(10 * time.Millisecond)
		// One Lease renewal per node every 10 s: 1 per 10 ms of simulated time.
		name := fmt.Sprintf("node-%04d", i%n)
		m.ObserveLease(LeaseObservation{Node: name, RenewTime: now, ObservedAt: now})
		self.APICheckedAt = now
		m.Evaluate(self, now)
	}
}

// BenchmarkObserveLease measures recording one Lease renewal.
func BenchmarkObserveLease(b *testing.B) {
	m, _ := NewMachine("c", DefaultPolicy())
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 1000 {
		m.ObserveNode(NodeObservation{Node: fmt.Sprintf("node-%04d", i), ObservedAt: now})
	}
	names := make([]string, 1000)
	for i := range names {
		names[i] = fmt.Sprintf("node-%04d", i)
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		now = now.Add(time.Millisecond)
		m.ObserveLease(LeaseObservation{Node: names[i%1000], RenewTime: now, ObservedAt: now})
	}
}
