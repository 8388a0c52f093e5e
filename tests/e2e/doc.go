// Package e2e runs fenced end to end: three `fenced run` processes built
// from this tree, a real Kubernetes control plane (tests/testbed), the
// simulators of all five Dell array families seeded from one fixture, and
// fault proxies (Shopify/toxiproxy, in-process) on every path a replica
// uses, so that any replica can be cut from its peers, from the apiserver or
// from one array.
//
// Every replica reaches every array on a listener of its own, served by a
// handler that prefixes the request's remote address with the replica's ID
// ("a/127.0.0.1:41234"), so an array's audit log shows which replica sent
// each request. Each replica authenticates to the apiserver with a user of
// its own ("fenced-a"), so the apiserver's audit log does too.
//
// After a scenario, Harness.Check collects the evidence — the apiserver's
// audit log, every simulator's audit log and state, the ledgers replayed
// from the replicas' data directories, the fault timeline and the pod and
// VolumeAttachment placements — and runs the invariant checker
// (tests/invariants) over it. On failure every log and audit file is
// copied into the test's artifact directory.
//
// The scenarios are tests in this package. `go test ./...` runs a
// representative subset (scenarios_test.go: one node dies, the leader is
// killed mid-fence, a storm fences nothing, a rebooted node is unfenced;
// chaos_test.go: a 2-minute chaos run; footprint_test.go and nfs_test.go:
// block and NFS volumes of every family cut, moved and not given back);
// FENCED_E2E=full (make e2e) adds the
// rest (scenarios_full_test.go). The fenced binary is built once per test
// binary (TestMain) into a temporary directory; set FENCED_E2E_BINARY to use
// a prebuilt one.
//
// RunChaos drives a seeded random schedule of faults over a harness and
// checks the invariants afterwards; tests/cmd/chaos runs it as a program,
// with Standalone standing in for the testing.T the harness otherwise takes.
package e2e
