package ledger

import (
	"time"

	"github.com/fenced-project/fenced/arrayclients"
)

// Bounds on the lists the ledger keeps, so the state cannot grow without end.
const (
	// MaxHistory is how many closed or aborted fence records a node keeps.
	MaxHistory = 20
	// MaxNodeActions is how many operator actions a node keeps.
	MaxNodeActions = 50
	// MaxActions is how many global and cluster operator actions are kept.
	MaxActions = 200
	// MaxLeaders is how many leadership epochs are kept.
	MaxLeaders = 20
	// MaxRejections is how many refused commands are kept.
	MaxRejections = 20
	// MaxScopes is how many computed restore scopes a fence record keeps
	// (the oldest go first; the log holds every one).
	MaxScopes = 50
	// MaxPauses is how many pause holders the ledger keeps at once; a
	// further AddPause is refused.
	MaxPauses = 100
)

// State is the whole replicated ledger. Maps are keyed by names; encoding/json
// writes map keys in sorted order, so a State always encodes to the same bytes.
type State struct {
	// Index and Term are those of the last applied log entry.
	Index uint64 `json:"index"`
	Term  uint64 `json:"term"`
	// Pause is the global pause flag (the single slot of versions 1 to 4).
	Pause Pause `json:"pause"`
	// Pauses are the pause holders (version 5), oldest first.
	Pauses []PauseHolder `json:"pauses,omitempty"`
	// Clusters maps a configured cluster name to its state.
	Clusters map[string]*ClusterState `json:"clusters"`
	// Replicas maps a replica ID to what that replica observed.
	Replicas map[string]*ReplicaView `json:"replicas"`
	// Actions are operator actions on the whole service or a cluster, newest last.
	Actions []Action `json:"actions,omitempty"`
	// Leaders are the last leadership epochs, newest last.
	Leaders []Epoch `json:"leaders,omitempty"`
	// Rejected counts refused commands; Rejections keeps the last ones.
	Rejected   uint64      `json:"rejected"`
	Rejections []Rejection `json:"rejections,omitempty"`
	// Skipped counts entries of unknown ignorable types.
	Skipped uint64 `json:"skipped"`
	// LedgerVersion is the group ledger version committed by
	// SetLedgerVersion; 0 when none was (see GroupVersion). Empty in a
	// state that applied only entries older than version 3, so such a state
	// encodes as builds before version 3 encode it.
	LedgerVersion int `json:"ledgerVersion,omitempty"`
}

// GroupVersion is the ledger version the group runs: the highest a leader
// may write. LegacyVersion until a SetLedgerVersion was committed.
func (s *State) GroupVersion() int {
	if s.LedgerVersion == 0 {
		return LegacyVersion
	}
	return s.LedgerVersion
}

// NewState returns an empty ledger.
func NewState() *State {
	return &State{
		Clusters: map[string]*ClusterState{},
		Replicas: map[string]*ReplicaView{},
	}
}

// Pause is a pause flag with who set it, when and why.
type Pause struct {
	Paused   bool      `json:"paused"`
	Operator string    `json:"operator,omitempty"`
	Reason   string    `json:"reason,omitempty"`
	At       time.Time `json:"at"`
}

// LegacyPauseID is the holder ID of the global pause slot of versions 1
// to 4; a cluster's slot is LegacyPauseID-CLUSTER (see State.Holders).
const LegacyPauseID = "pause-legacy"

// PauseHolder is one pause of fencing (version 5): who holds it, why,
// for which cluster (every cluster when Cluster is empty) and since when.
type PauseHolder struct {
	// ID is "pause-" and the index of the entry that added it, or
	// LegacyPauseID for a single pause slot of an earlier version.
	ID       string `json:"id"`
	Cluster  string `json:"cluster,omitempty"`
	Operator string `json:"operator"`
	Reason   string `json:"reason"`
	// At is when the pause began; UpdatedAt when its reason was last
	// changed by the same operator pausing the same scope again.
	At        time.Time `json:"at"`
	UpdatedAt time.Time `json:"updatedAt,omitempty"`
}

// Confirmation is an operator's attestation (version 5) that the node of
// a fence cannot write to an array: its cut counts as verified for this
// fence only.
type Confirmation struct {
	// Array is the array confirmed; empty with PoweredOff for every array
	// of the fence.
	Array      string `json:"array,omitempty"`
	PoweredOff bool   `json:"poweredOff,omitempty"`
	Operator   string `json:"operator"`
	Reason     string `json:"reason"`
	// Term and Index are those of the entry; At is when the leader By
	// composed it.
	Term  uint64    `json:"term"`
	Index uint64    `json:"index"`
	At    time.Time `json:"at"`
	By    string    `json:"by"`
}

// Abandonment is an operator's decision (version 6) that the unfence of a
// fence does not restore access on an array confirmed gone for it.
type Abandonment struct {
	Array    string `json:"array"`
	Operator string `json:"operator"`
	Reason   string `json:"reason"`
	// Term and Index are those of the entry; At is when the leader By
	// composed it.
	Term  uint64    `json:"term"`
	Index uint64    `json:"index"`
	At    time.Time `json:"at"`
	By    string    `json:"by"`
}

// ClusterState is the ledger of one Kubernetes cluster.
type ClusterState struct {
	Pause Pause                 `json:"pause"`
	Nodes map[string]*NodeState `json:"nodes"`
}

// NodeState is the ledger of one node.
type NodeState struct {
	// Identities maps an array name to the node's identity there, as learned
	// while the node was healthy. IdentitiesAt is zero until they were
	// learned at least once (an empty map then means "no identity anywhere").
	Identities   map[string]arrayclients.Identity `json:"identities,omitempty"`
	IdentitiesAt time.Time                        `json:"identitiesAt"`
	// BootID is the node's boot ID when the identities were last learned.
	BootID string `json:"bootID,omitempty"`
	// NotFound maps an array where no object was found for the node to
	// what was looked for, as learned with Identities.
	NotFound map[string]string `json:"notFound,omitempty"`
	// Ambiguous maps an array where more than one object could be the
	// node to the candidates, as learned with Identities.
	Ambiguous map[string]string `json:"ambiguous,omitempty"`
	// InputsDigest is the digest of the inputs the identities were
	// resolved from (SetIdentities.InputsDigest), empty when not recorded.
	InputsDigest string `json:"inputsDigest,omitempty"`
	// Fence is the open fence record, nil when there is none.
	Fence *Fence `json:"fence,omitempty"`
	// History holds the last closed or aborted records, newest last.
	History []*Fence `json:"history,omitempty"`
	// Actions are operator actions on this node, newest last.
	Actions []Action `json:"actions,omitempty"`
}

// Kind tells which way a fence record is going.
type Kind string

// Kinds of fence record.
const (
	KindFence   Kind = "fence"
	KindUnfence Kind = "unfence"
)

// Origin tells who opened a fence record.
type Origin string

// Origins of a fence record.
const (
	OriginVerdict  Origin = "verdict"
	OriginOperator Origin = "operator"
)

// FenceState is the state of a fence record. See the package documentation.
type FenceState string

// Fence states.
const (
	StateIntent        FenceState = "intent"
	StateFencing       FenceState = "fencing"
	StateFenced        FenceState = "fenced"
	StateTainted       FenceState = "tainted"
	StateEvicted       FenceState = "evicted"
	StateUnfenceIntent FenceState = "unfence-intent"
	StateRestored      FenceState = "restored"
	StateUntainted     FenceState = "untainted"
	StateClosed        FenceState = "closed"
	StateFailed        FenceState = "failed"
	StateAborted       FenceState = "aborted"
)

// Fence is one fence record: a node's fence and its recovery.
type Fence struct {
	// ID is unique in the ledger: "fence-" and the index of the entry that
	// opened it (see FenceID).
	ID      string `json:"id"`
	Cluster string `json:"cluster"`
	Node    string `json:"node"`
	Kind    Kind   `json:"kind"`
	Origin  Origin `json:"origin"`
	// Operator is who asked for it when Origin is operator.
	Operator string     `json:"operator,omitempty"`
	Reason   string     `json:"reason"`
	State    FenceState `json:"state"`
	// FailReason is the reason given with the last failed or aborted step.
	FailReason string `json:"failReason,omitempty"`
	// Identities is the node's identity set when the record was opened;
	// IdentitiesKnown is false when they had never been learned.
	Identities      map[string]arrayclients.Identity `json:"identities,omitempty"`
	IdentitiesKnown bool                             `json:"identitiesKnown"`
	// Plans are what the fence removes, one per array, in array order.
	Plans []arrayclients.Plan `json:"plans,omitempty"`
	// Superseded are plans replaced by a replan after their array was
	// operated on; what they removed is undone with the current plan's.
	Superseded []arrayclients.Plan `json:"superseded,omitempty"`
	// Footprint is the node's storage footprint; FootprintRecorded is false
	// for a record written before footprints (ledger version 1) until a
	// leader amends it.
	Footprint         []arrayclients.FootprintVolume `json:"footprint,omitempty"`
	FootprintRecorded bool                           `json:"footprintRecorded,omitempty"`
	// Restore is, by array, the restore scope the unfence restores with:
	// the footprint volumes Kubernetes still wanted on the node, as
	// committed with unfence-intent or, from version 4, as last computed
	// again before a restore attempt (Rescope).
	Restore map[string]arrayclients.RestoreScope `json:"restore,omitempty"`
	// Scopes are the restore scopes computed for the record, oldest first
	// (version 4): the one of its unfence-intent step, then each differing
	// one a restore attempt computed. Empty for records whose unfence
	// began in an older version.
	Scopes []ScopeRecord `json:"scopes,omitempty"`
	// Results are the outcomes per array.
	Results map[string]*ArrayResult `json:"results,omitempty"`
	// Confirmations are operators' attestations that the node cannot
	// write to an array (version 5), oldest first.
	Confirmations []Confirmation `json:"confirmations,omitempty"`
	// Abandoned are operators' decisions not to restore an array
	// confirmed gone (version 6), oldest first.
	Abandoned []Abandonment `json:"abandoned,omitempty"`
	// OutOfServiceBefore says whether the node had an out-of-service taint
	// of its own before the fence tainted it (from the first fenced step);
	// nil when unknown.
	OutOfServiceBefore *bool `json:"outOfServiceBefore,omitempty"`
	// PodUIDs are the UIDs of the pods on the node before the fence.
	PodUIDs []string `json:"podUIDs,omitempty"`
	// BootID is the node's boot ID at fence time; UnfenceBootID the boot ID
	// seen when recovery started.
	BootID        string `json:"bootID,omitempty"`
	UnfenceBootID string `json:"unfenceBootID,omitempty"`
	// Steps lists every state the record entered, oldest first.
	Steps []Step `json:"steps"`
	// OpenedAt and UpdatedAt are the times of the first and last step.
	OpenedAt  time.Time `json:"openedAt"`
	UpdatedAt time.Time `json:"updatedAt"`
}

// ScopeRecord is one restore scope computed for a fence record, with the
// entry that recorded it.
type ScopeRecord struct {
	// Term and Index are those of the entry; At is when the leader By
	// composed it.
	Term  uint64    `json:"term"`
	Index uint64    `json:"index"`
	At    time.Time `json:"at"`
	By    string    `json:"by"`
	// Restore is the scope by array, empty when nothing is wanted.
	Restore map[string]arrayclients.RestoreScope `json:"restore,omitempty"`
	// Note says where the scope came from or what changed.
	Note string `json:"note,omitempty"`
}

// Step is one state change of a fence record.
type Step struct {
	From FenceState `json:"from,omitempty"`
	To   FenceState `json:"to"`
	// Term is the term of the leader that wrote the step; Index the log index.
	Term  uint64 `json:"term"`
	Index uint64 `json:"index"`
	// At is when the leader wrote it; By is the leader's replica ID.
	At time.Time `json:"at"`
	By string    `json:"by"`
	// Operator is set when an operator asked for the step.
	Operator string `json:"operator,omitempty"`
	// Note is the reason or result given with the step.
	Note string `json:"note,omitempty"`
	// Forced and Unverified mark a forced unfence (see FenceStep).
	Forced     bool `json:"forced,omitempty"`
	Unverified bool `json:"unverified,omitempty"`
}

// ArrayOp names an operation on one array whose outcome is recorded.
type ArrayOp string

// Array operations.
const (
	// OpApply is a fence's change of the array (allowed in fencing).
	OpApply ArrayOp = "apply"
	// OpVerify is a fence's read-back (allowed in fencing).
	OpVerify ArrayOp = "verify"
	// OpUndo is a recovery's restore (allowed in unfence-intent).
	OpUndo ArrayOp = "undo"
	// OpVerifyRestore is a recovery's read-back (allowed in unfence-intent).
	OpVerifyRestore ArrayOp = "verify-restore"
)

// ArrayResult is what happened on one array of a fence record.
type ArrayResult struct {
	Array string `json:"array"`
	// Applied: the plan's removal succeeded at least once.
	Applied bool `json:"applied"`
	// Verified: the last fence read-back showed the node fenced.
	Verified bool `json:"verified"`
	// Undone: the plan's restore succeeded at least once.
	Undone bool `json:"undone"`
	// RestoreVerified: the last restore read-back showed every entry back.
	RestoreVerified bool `json:"restoreVerified"`
	// Verification is the last read-back, fence or restore.
	Verification *arrayclients.Verification `json:"verification,omitempty"`
	// Attempts counts recorded operations; Failures those that failed.
	Attempts int `json:"attempts"`
	Failures int `json:"failures"`
	// LastOp, LastError, LastTerm and LastAt describe the last recorded one.
	LastOp    ArrayOp   `json:"lastOp,omitempty"`
	LastError string    `json:"lastError,omitempty"`
	LastTerm  uint64    `json:"lastTerm"`
	LastAt    time.Time `json:"lastAt"`
}

// Action is an operator action: who, when, why, on what.
type Action struct {
	Index    uint64    `json:"index"`
	At       time.Time `json:"at"`
	Operator string    `json:"operator"`
	// Action is what was done, e.g. "pause", "fence", "unfence", "note".
	Action  string `json:"action"`
	Reason  string `json:"reason"`
	Cluster string `json:"cluster,omitempty"`
	Node    string `json:"node,omitempty"`
	FenceID string `json:"fenceID,omitempty"`
	// Forced marks a forced unfence (Unverified: without reading the API
	// server).
	Forced     bool `json:"forced,omitempty"`
	Unverified bool `json:"unverified,omitempty"`
}

// ReplicaView is what one replica observed, one entry per observed subject
// keyed by ObservationKey.
type ReplicaView struct {
	Observations map[string]Observation `json:"observations"`
}

// Observation is one replica's view of one subject, e.g. "can reach the
// kubelet of node N": OK holds since Since. It is recorded on change only.
type Observation struct {
	Cluster string `json:"cluster"`
	// Node is empty for a cluster-wide probe such as the API server.
	Node  string `json:"node,omitempty"`
	Probe string `json:"probe"`
	OK    bool   `json:"ok"`
	// Since is when the replica first saw this value.
	Since  time.Time `json:"since"`
	Detail string    `json:"detail,omitempty"`
	// Index is the log index that recorded the change.
	Index uint64 `json:"index"`
}

// Epoch records a leadership: who led from which term and when it started.
type Epoch struct {
	Replica string    `json:"replica"`
	Term    uint64    `json:"term"`
	Index   uint64    `json:"index"`
	At      time.Time `json:"at"`
	// LedgerVersion is the highest command version the leader understands.
	LedgerVersion int `json:"ledgerVersion"`
}

// Rejection records a refused command.
type Rejection struct {
	Index uint64      `json:"index"`
	Term  uint64      `json:"term"`
	Type  MessageType `json:"type"`
	Error string      `json:"error"`
}
