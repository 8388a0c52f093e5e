// Package ledger is the replicated fencing ledger: the Raft FSM of fenced.
//
// Every replica holds the same State, changed only by committed commands.
// A command is one type byte followed by a JSON body (see Encode). FSM.Apply
// decodes it, validates it against the current state and either changes the
// state or returns an error value. Apply does no I/O and reads no clock: the
// time of every change is the time the leader wrote into the command, so
// replaying the same log always yields the same state.
//
// # What the ledger holds
//
// Per cluster and node (NodeState): the node's identities on the arrays,
// learned while the node was healthy, with its boot ID; the current fence
// record (Fence) and a bounded history of closed ones; the operator actions
// on the node. Per cluster: a pause flag. Globally: a pause flag, the pause
// holders (version 5: each pause with its operator, reason, scope and
// time; fencing stays paused while any holder of the cluster or of all
// remains), the leadership epochs and the last rejected commands. Per replica
// (ReplicaView): vantage observations such as "replica X cannot reach the
// kubelet of node N since T", recorded on change only.
//
// # The fence record
//
// One record covers one episode of a node: the fence and, later, its
// recovery, so the plans that say what was removed are in the record that
// restores them. The steps Apply allows (see Allowed):
//
//		intent          -> fencing, aborted
//		fencing         -> fenced, failed, unfence-intent
//		fenced          -> tainted, unfence-intent
//		tainted         -> evicted, unfence-intent
//		evicted         -> unfence-intent
//		unfence-intent  -> restored, failed
//		restored        -> untainted
//		untainted       -> closed
//		failed          -> fencing, unfence-intent, closed (operator only)
//
//	  - intent: opened by a verdict or an operator (OpenFence). The plans
//	    (what a fence removes on each array, read from the arrays) are
//	    committed with it or added later (AmendFence). No array has been
//	    changed yet.
//	  - fencing: the leader may now change arrays. It records the outcome of
//	    each apply and verify per array (RecordArrayResult). Plans may still
//	    be added for arrays that were unreachable when planning; an array
//	    without a committed plan must not be changed.
//	  - fenced: every array in the record's identity set and every planned
//	    array has a verified read-back. Apply refuses this step otherwise, and
//	    refuses it when the node's identities were never learned.
//	  - tainted: the out-of-service taints are on the node.
//	  - evicted: the node's pods were force-deleted. The node stays fenced.
//	  - unfence-intent: recovery started (after a reboot, or by an operator).
//	    Kind becomes unfence. The leader may now undo the plans. From
//	    version 4 it records the restore scope again (Rescope) whenever a
//	    restore attempt finds that Kubernetes wants other volumes on the
//	    node; the arrays whose scope changed are restored and read back
//	    again before the step to restored.
//	  - restored: every plan's undo was verified by a read-back.
//	  - untainted: the taints are removed.
//	  - closed: done; the record moves to the node's history.
//	  - failed: stuck, with a reason; from fencing or unfence-intent. Arrays
//	    may have been changed, so it leads to a retry (fencing), a recovery
//	    (unfence-intent) or, only by an operator, closed.
//	  - aborted: abandoned in intent, before any array was changed; the
//	    record moves to the node's history.
//
// An operator may confirm (ConfirmArray, version 5) that the node of an
// open fence cannot write to an array, or is powered off: from then on the
// step to fenced of that record counts the array as planned, cut and read
// back. The confirmation belongs to the record; the next fence of the node
// proves every array again.
//
// While fencing is paused (globally or for the node's cluster), a fence
// whose origin is a verdict can be neither opened nor moved into fencing.
// Operator-origin fences and every recovery step are allowed.
//
// # Compare-and-set
//
// Every command that changes a fence names the fence ID, the state it
// expects the fence to be in and the term of the leader that wrote it. Apply
// refuses it when the fence is in another state (ErrConflict), when the term
// is not the term of the log entry that carries it (ErrStaleTerm: the writer
// composed it under a leadership it no longer holds), or when the step is not
// allowed (ErrBadTransition). The refusal is the Apply result of that index,
// the same on every replica, and the write path returns it to the caller.
//
// # Unknown and malformed commands, versions
//
// A type byte with the IgnorableFlag bit that this version does not know is
// skipped (counted in State.Skipped). A command that does not decode or
// validate is refused with an error recorded at its index (State.Rejected
// and State.Rejections) rather than a panic: every replica running this
// version reaches the same verdict, so the replicas stay identical, and a
// fuzzed or corrupt entry cannot crash the whole group in a restart loop.
//
// An entry of a body version newer than Version, or of an unknown type
// without the IgnorableFlag bit, is one this build cannot apply while newer
// replicas do: refusing it would make this ledger differ from the group's.
// Apply halts instead (FSM.Halted): nothing more is applied, Snapshot
// refuses, and the replica stops leading and reports not ready until it is
// upgraded. Leaders avoid it by writing the group ledger version
// (State.GroupVersion, raised by SetLedgerVersion once every voter applies
// the new version), and every version's rules stay selectable by the
// entry's Meta.V (rules in transitions.go; TestRulesLocked).
//
// # Snapshots
//
// A snapshot is a one-line JSON header ({"format":"fenced-ledger","version":1,
// ...}, or version 2 with the state's ledgerVersion once the group runs
// version 3) followed by the state as JSON. Restore refuses a version or a
// field it does not know, decodes into a fresh State, checks it, and swaps
// it in under the lock.
package ledger
