// Package detector decides whether the nodes of a Kubernetes cluster are
// healthy, suspect, failed, or blocked from being declared failed.
//
// The decision is a deterministic state machine (Machine): it is fed
// observations (Lease renewals as this replica saw them, Node conditions,
// kubelet-port probes from every replica, array health) and evaluated at a
// time passed in, and it never reads a clock, starts a goroutine or does I/O.
// The Runner is the I/O shell around it for one cluster: it runs the
// informers' events into the machine, probes late nodes, checks the API
// server, publishes verdict changes and learns healthy nodes' identity
// inputs for the ledger.
//
// The detector never declares a node failed on doubt about itself: an
// unreachable API server or stale watches block every verdict, and more late
// nodes at once than the storm limit allows block every new one.
package detector
