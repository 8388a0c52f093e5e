// Package stonith is fenced's fencing pipeline: on a Failed verdict, the
// leader fences the node at every array where it has an identity, proves
// the fence by reading each array back, then taints the node and
// force-deletes its StatefulSet (and protected) pods so their controllers
// recreate them elsewhere. When the node has rebooted, it restores exactly
// what the fence removed and lifts the taints.
//
// # Level-triggered, resumable
//
// The Controller runs on the Raft leader only (Lead). Its workers take a
// key (cluster/node) from a rate-limited workqueue, read the node's fence
// record from the ledger and do the one next step the record's state calls
// for, then commit it. Every step is idempotent, so repeating one after a
// crash is harmless, and a new leader resumes every open record from the
// ledger where the last one stopped:
//
//	no record, verdict Failed, guards hold -> Plan every array   -> commit intent (plans, pod UIDs, boot ID)
//	intent                                 -> (plan late arrays)  -> commit fencing
//	fencing                                -> Apply + Verify each array, record each result
//	                                          all verified        -> commit fenced
//	fenced                                 -> taint the node      -> commit tainted
//	tainted                                -> force-delete pods   -> commit evicted
//	evicted, node rebooted and settled     ->                     -> commit unfence-intent
//	unfence-intent                         -> Undo + verify-restore each array -> commit restored
//	restored                               -> remove the taints   -> commit untainted
//	untainted                              ->                     -> commit closed
//
// Every array write, taint and delete is preceded by a committed ledger
// entry that allows it and by a VerifyLeader; a replica whose leadership
// context is cancelled stops writing. A step in the other direction than
// the one the previous leader was taking (fence versus unfence) waits out
// the previous leader's lease plus the array request timeout.
//
// # Guards
//
// No fence is opened while this replica cannot reach the API server or
// doubts its view of the cluster, while the group has no quorum (the
// VerifyLeader before the commit fails), while the storm guard holds, or
// while fencing is paused. In dry-run the controller decides and plans
// (read-only) and reports what it would do in /status, a metric and the
// log, and writes nothing: not to the arrays, not to the API server and not
// to the ledger (a fence record there would claim the node may have lost
// access, and other components act on that claim).
package stonith
