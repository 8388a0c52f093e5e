// Package invariants checks a finished run of fenced against the safety
// invariants of the product, from the evidence the run left behind: the
// kube-apiserver audit log, every array simulator's audit log and state
// dumps, the replicated ledger, and a timeline of the faults the harness
// injected. Every check is a pure function over parsed inputs (Check); the
// parsers (ParseKubeAudit, ParseArrayAudit, ParseTimeline, ParseLedgerState)
// and the ledger replay (ReplayDataDir) are the thin I/O shell around them.
//
// # Clocks and ordering
//
// Every process of a run (apiserver, simulators, the three replicas, the
// harness) runs on one machine, so their wall clocks are one clock. The
// times compared are:
//
//   - a Kubernetes request: requestReceivedTimestamp (Received), when the
//     apiserver started handling it; it cannot take effect earlier;
//   - an array request: AuditEntry.Time, taken when the simulator received
//     it, before any injected latency; a read observes the array at some
//     moment at or after it, a write changes it at or after it;
//   - a ledger step: Step.At, the leader's clock when it composed the
//     command. The leader composes a step after the work that justifies it
//     returned (the read-backs before "fenced") and performs the work a step
//     allows only after the step committed, so At lies between the two;
//   - a harness event: Event.Time, taken right before the harness injected
//     the fault (or right after it healed it).
//
// "A before B" means A's time is strictly before B's time. Steps of one
// record are ordered by their log index, never by At.
//
// # Rules
//
// Each rule has a name used in every violation it reports:
//
//   - fence-before-delete (invariant 1): every successful pod delete by
//     fenced, VolumeAttachment delete and node write by fenced concerning
//     node N was received while a fence record of N was in force — after
//     its "fenced" step and before its next "unfence-intent" step (node
//     writes may also fall between "unfence-intent" and "untainted":
//     lifting the taints, the out-of-service taint first, before any
//     access is given back). For that "fenced" step, every array of the
//     record (its identity set and its plans) shows a successful read request between
//     the record's last "fencing" step and the "fenced" step, sent by a
//     replica that led during that interval: the read-back. A
//     VolumeAttachment delete while the harness drained the node on purpose
//     (DrainStart..DrainEnd) is a normal detach and is left out.
//   - one-actor (invariant 2): leadership epochs have increasing terms;
//     every array write (a request that changed the simulator's state) and
//     every attributable Kubernetes write comes from the replica whose epoch
//     covers its time (plus Options.InFlightGrace for the replica that led
//     just before); every fence step was written by the leader of its term.
//   - array-change-window (invariants 2 and 3): every array write that names
//     one of node N's identifiers on that array falls while a record of N
//     was in fencing or unfence-intent, i.e. after a committed ledger entry
//     allowed it.
//   - unfence-once (invariants 3 and 5): no record is restored twice; a
//     record that was not opened or unfenced by an operator enters
//     unfence-intent only after a reboot of its node was recorded since the
//     fence started; every record of a node that rebooted while it was
//     fenced is restored by the end of the run.
//   - array-restored (invariant 3): for every array with state dumps from the
//     start and the end of the run, every difference (ignoring the health
//     signals the harness drives) names a node that is still fenced, or an
//     object of a footprint volume Kubernetes no longer wanted on the node
//     when its unfence was restored (held by another node, or detached:
//     invariant 5 gives it back to neither), or was last written by a CSI
//     driver (Options.DriverRemotes), or removed an element that a CSI
//     driver's write now shows under another object (a node registered
//     again under a new host, with the initiators the fence removed).
//   - no-action-on-doubt (invariant 4): no verdict record enters fencing
//     while the harness had the storm condition in place for its cluster,
//     and no record enters fencing by a replica while that replica could not
//     reach the cluster's apiserver (from Options.DetectionSlack after the cut
//     until it healed).
//   - dry-run: in a dry-run, no array write (the CSI drivers' own writes,
//     Options.DriverRemotes, aside), no fenced Kubernetes write and no fence
//     record at all.
//   - footprint-covered (invariants 1 and 7): every record that reached
//     "fenced" recorded the node's storage footprint; as of that step, every
//     footprint volume was placed, had a cut (no gap) in its array's plan,
//     and that array's last read-back showed the node without access to it
//     (the read-back is checked where the record's version at the step is
//     known: ReplayDataDir, or a record still fenced); and every
//     VolumeAttachment Kubernetes had to the node at that step (from the
//     placements) is in the footprint.
//   - no-regrant (invariant 5): for every footprint volume of a record that
//     was unfenced (unless multi-node), no array write by fenced during the
//     unfence (from unfence-intent to the next step) added access for the
//     node to the volume while Kubernetes had it attached to another node
//     (its VolumeAttachment, named as Kubernetes names it from the handle,
//     the driver and the node); and at the end of the run, when the record is
//     the node's last and no longer fences it and the volume is still on the
//     other node, the array's state dump shows neither the volume's object
//     naming the node's identifiers nor the node's host object naming the
//     volume. Host-level grants that reach a volume only through other
//     objects (a PowerMax masking view) are not seen by the end-state check.
//   - held (invariants 1 and 7 after the eviction): from a record's first
//     "evicted" step until its next "unfence-intent" step, every array
//     write, by anyone (a CSI driver's publish, a sidecar's reconcile, an
//     operator), that gave the node access again (a granting action or
//     add_* body key naming one of the node's identifiers on that array,
//     or a change adding an element naming one) is followed within
//     Options.HeldPeriod by a write taking it away again (a revoking
//     action, a remove_* key, a removed element naming it): fenced's cut,
//     or the driver's own unpublish of the node, unless the
//     unfence began within that period; a grant whose period outlasts the
//     evidence is not judged. No pod placed on the node is deleted, by
//     anyone, between such a grant and its cut.
package invariants
