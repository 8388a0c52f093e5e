// Package status is the schema of the JSON document fenced serves at
// /status. The server fills it, `fenced status` reads it, and tests decode
// it; components of the daemon fill the sections they own through status
// providers. Sections a build does not have (yet) are omitted.
package status

import "time"

// Status is the document served at /status.
type Status struct {
	// Version, Revision and GoVersion describe the build.
	Version   string `json:"version"`
	Revision  string `json:"revision,omitempty"`
	GoVersion string `json:"goVersion"`
	// ReplicaID is this replica's replica.id.
	ReplicaID string `json:"replicaID"`
	// StartedAt is when the process started serving; Uptime is the time
	// since then as a Go duration rounded to seconds ("1h2m3s"), and
	// UptimeSeconds the same in seconds.
	StartedAt     time.Time `json:"startedAt"`
	Uptime        string    `json:"uptime"`
	UptimeSeconds float64   `json:"uptimeSeconds"`
	// Ready is what /readyz answers; Checks are the readiness checks.
	Ready  bool    `json:"ready"`
	Checks []Check `json:"checks"`

	// Raft is the replica's view of the Raft group and its ledger.
	Raft *Raft `json:"raft,omitempty"`
	// Clusters is one entry per configured cluster.
	Clusters []Cluster `json:"clusters,omitempty"`
	// Fences lists fences in progress and recently finished.
	Fences []Fence `json:"fences,omitempty"`
	// Arrays is one entry per configured array.
	Arrays []Array `json:"arrays,omitempty"`
}

// Check is one readiness check's result.
type Check struct {
	Name  string `json:"name"`
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"`
}

// Raft is the replica's view of the Raft group.
type Raft struct {
	// State is Leader, Follower, Candidate or Shutdown.
	State string `json:"state"`
	// Term is the current Raft term.
	Term uint64 `json:"term"`
	// LeaderID and LeaderAddress name the leader, when known.
	LeaderID      string `json:"leaderID,omitempty"`
	LeaderAddress string `json:"leaderAddress,omitempty"`
	// LastContact is when a follower last heard from the leader.
	LastContact *time.Time `json:"lastContact,omitempty"`
	// CommitIndex, AppliedIndex and LastLogIndex are log positions.
	// StorageFull, when not empty, says that the data directory is full
	// and Raft's writes are held until space is freed.
	StorageFull string `json:"storageFull,omitempty"`
	// StorageHandover, when not empty, says when and why this replica last
	// handed its leadership over because its data directory stayed full.
	StorageHandover string `json:"storageHandover,omitempty"`
	// LedgerVersions are the ledger versions this build applies;
	// GroupLedgerVersion is the one the group runs (leaders write it);
	// VoterLedgerVersions, on the leader, the newest each voter applies.
	// LedgerHalted, when not empty, says the ledger met an entry this
	// build cannot apply and stopped: upgrade this replica.
	LedgerVersions      string         `json:"ledgerVersions,omitempty"`
	GroupLedgerVersion  int            `json:"groupLedgerVersion,omitempty"`
	VoterLedgerVersions map[string]int `json:"voterLedgerVersions,omitempty"`
	LedgerHalted        string         `json:"ledgerHalted,omitempty"`
	CommitIndex         uint64         `json:"commitIndex"`
	AppliedIndex        uint64         `json:"appliedIndex"`
	LastLogIndex        uint64         `json:"lastLogIndex"`
	// Members is the group's configuration.
	Members []RaftMember `json:"members,omitempty"`
	// MembersFrom, set by `fenced status` on a follower's document, names
	// the leader whose view of the members' reachability and last contact
	// Members shows (only the leader hears every member's heartbeats);
	// MembersError says why the leader's view could not be had.
	MembersFrom  string `json:"membersFrom,omitempty"`
	MembersError string `json:"membersError,omitempty"`
	// FencingPaused is set while a pause of every cluster is in effect
	// (`fenced pause`); Pause is the oldest such pause: who, when, why.
	FencingPaused bool   `json:"fencingPaused"`
	Pause         *Pause `json:"pause,omitempty"`
	// Pauses lists every pause in effect, of every cluster or of one,
	// oldest first; fencing on verdicts stays paused while one holds.
	Pauses []Pause `json:"pauses,omitempty"`
}

// Pause is a pause of fencing in effect, as the ledger records it.
type Pause struct {
	// ID names the pause for `fenced resume --id`.
	ID string `json:"id,omitempty"`
	// Scope is "all" for the pause of every cluster, else the cluster's
	// name.
	Scope string `json:"scope"`
	// Operator is who paused, Reason why and At when.
	Operator string    `json:"operator,omitempty"`
	Reason   string    `json:"reason,omitempty"`
	At       time.Time `json:"at"`
}

// PauseScopeAll is the Scope of the pause of every cluster.
const PauseScopeAll = "all"

// RaftMember is one server of the Raft group.
type RaftMember struct {
	ID      string `json:"id"`
	Address string `json:"address"`
	// HTTPAddress is the member's HTTP endpoint, as this replica's
	// configuration names it (peers[].httpAddress; empty for itself).
	HTTPAddress string `json:"httpAddress,omitempty"`
	// Suffrage is Voter, Nonvoter or Staging.
	Suffrage string `json:"suffrage"`
	// Self marks this replica.
	Self bool `json:"self,omitempty"`
	// Reachable and LastContact are known on the leader only: whether the
	// member answers heartbeats, and when it last did (set once its
	// heartbeats failed or recovered).
	Reachable   *bool      `json:"reachable,omitempty"`
	LastContact *time.Time `json:"lastContact,omitempty"`
}

// Cluster is one protected Kubernetes cluster.
type Cluster struct {
	Name string `json:"name"`
	// Ready is true when this replica can reach the cluster's API server
	// and watches it; Error says why not.
	Ready bool   `json:"ready"`
	Error string `json:"error,omitempty"`
	// APIServer is the API server URL from the kubeconfig; ServerVersion
	// is what it reported.
	APIServer     string `json:"apiServer,omitempty"`
	ServerVersion string `json:"serverVersion,omitempty"`
	// DryRun mirrors the cluster's dryRun setting.
	DryRun bool `json:"dryRun"`
	// Paused is set while fencing is paused for this cluster (or for all);
	// Pause is the oldest such pause (the cluster's own, else one of
	// every cluster) and Pauses every one, oldest first.
	Paused bool    `json:"paused"`
	Pause  *Pause  `json:"pause,omitempty"`
	Pauses []Pause `json:"pauses,omitempty"`
	// Doubt is set while this replica doubts its own view of the cluster
	// (apiserver-unreachable, watch-stale): every node is then blocked.
	Doubt string `json:"doubt,omitempty"`
	// Nodes counts nodes by verdict.
	Nodes *NodeCounts `json:"nodes,omitempty"`
	// Storm is set while the storm limit holds fencing back.
	Storm *Storm `json:"storm,omitempty"`
	// StorageStorm lists the arrays whose storage storm guard is active:
	// storage path loss verdicts on them are blocked.
	StorageStorm []StorageStorm `json:"storageStorm,omitempty"`
	// LeaseTiming is set while nodes renew their Leases no sooner than
	// the heartbeat age at which fenced counts them late: it says how many,
	// how seldom and which settings to scale (live nodes are otherwise
	// probed at every renewal and may hold the storm guard).
	LeaseTiming string `json:"leaseTiming,omitempty"`
	// Unhealthy lists nodes that are not healthy.
	Unhealthy []Node `json:"unhealthy,omitempty"`
	// Unprotected lists the nodes whose storage footprint fenced cannot
	// fully cut, with why (one gap per volume and array): such a node is
	// never fenced, tainted or evicted, whatever its health.
	Unprotected []UnprotectedNode `json:"unprotected,omitempty"`
	// Unplaced lists the PersistentVolumes of a Dell CSI driver whose
	// handle names an array, PowerScale access zone or metro partner that
	// no configured array holds, attached or not: configuration drift. A
	// node such a volume is attached to is unprotected.
	Unplaced []UnplacedVolume `json:"unplaced,omitempty"`
	// CheckedAt is when the cluster was last observed.
	CheckedAt *time.Time `json:"checkedAt,omitempty"`
}

// NodeCounts counts a cluster's nodes by verdict.
type NodeCounts struct {
	Total   int `json:"total"`
	Healthy int `json:"healthy"`
	Suspect int `json:"suspect"`
	Failed  int `json:"failed"`
	// Blocked nodes would be judged but a guard holds (storm, doubt, ...).
	Blocked int `json:"blocked"`
	// Fenced counts the cluster's open fence records.
	Fenced int `json:"fenced"`
	// Unprotected counts nodes fenced cannot fence: their array identities
	// are not learned yet (just added, or while a new leader resolves
	// thousands of nodes), or a volume of their footprint cannot be cut
	// (Cluster.Unprotected says why).
	Unprotected int `json:"unprotected"`
}

// UnprotectedNode is a node whose storage footprint cannot be fully cut.
type UnprotectedNode struct {
	Name string `json:"name"`
	Gaps []Gap  `json:"gaps"`
	// Since is when this replica first saw the node unprotected.
	Since time.Time `json:"since"`
}

// UnplacedVolume is a PersistentVolume on no configured array.
type UnplacedVolume struct {
	PV     string `json:"pv"`
	Driver string `json:"driver"`
	Handle string `json:"handle"`
	// Reason is array, default-array, zone, metro-partner or ambiguous
	// (the reason label of fenced_volumes_unplaced).
	Reason string `json:"reason"`
	// Missing says what the configuration lacks.
	Missing string `json:"missing"`
	// Since is when this replica first saw the volume unplaced.
	Since time.Time `json:"since"`
}

// Gap is one volume (or the whole node, when Volume is empty) fenced
// could not cut on an array; Reason is one of the gap reasons of
// docs/footprint.md.
type Gap struct {
	Volume string `json:"volume,omitempty"`
	Array  string `json:"array,omitempty"`
	Reason string `json:"reason"`
	Detail string `json:"detail"`
}

// Storm describes storm protection holding fencing back.
type Storm struct {
	// Limit is the configured limit ("33%"); Allowed is what it means for
	// the cluster's current size; Unhealthy is how many nodes look failed.
	Limit     string `json:"limit"`
	Allowed   int    `json:"allowed"`
	Unhealthy int    `json:"unhealthy"`
	// CooldownUntil is when fencing may resume.
	CooldownUntil *time.Time `json:"cooldownUntil,omitempty"`
}

// StorageStorm is an array whose storage storm guard is active: it reports
// more of the cluster's nodes disconnected than storagePathLoss
// maxDisconnected allows, or its API is unreachable or erroring. No node
// is fenced for a lost storage path on it.
type StorageStorm struct {
	Array string `json:"array"`
	// Reason is "disconnected" or "api-error".
	Reason       string    `json:"reason"`
	Disconnected int       `json:"disconnected"`
	Allowed      int       `json:"allowed"`
	Error        string    `json:"error,omitempty"`
	Since        time.Time `json:"since"`
}

// Node is a node that is not healthy.
type Node struct {
	Name string `json:"name"`
	// Verdict is suspect, failed, blocked, fenced or needs-reboot.
	Verdict string `json:"verdict"`
	// Reason explains the verdict.
	Reason string `json:"reason,omitempty"`
	// Since is when the node entered this verdict.
	Since time.Time `json:"since"`
}

// Fence is one fence (or unfence) operation on one node.
type Fence struct {
	ID      string `json:"id"`
	Cluster string `json:"cluster"`
	Node    string `json:"node"`
	// Kind is fence or unfence; Origin is verdict or operator, Operator who
	// asked and Reason why.
	Kind     string `json:"kind,omitempty"`
	Origin   string `json:"origin,omitempty"`
	Operator string `json:"operator,omitempty"`
	Reason   string `json:"reason,omitempty"`
	// Phase is the record's last committed state in the ledger: intent,
	// fencing, fenced, tainted, evicted, unfence-intent, restored,
	// untainted, failed (closed and aborted for finished ones).
	Phase string `json:"phase"`
	// Arrays is the per-array progress.
	Arrays    []FenceArray `json:"arrays,omitempty"`
	StartedAt time.Time    `json:"startedAt"`
	UpdatedAt time.Time    `json:"updatedAt"`
	// Error is the last error, while the operation retries or after it
	// failed.
	Error string `json:"error,omitempty"`
	// Blocked says why the leader cannot go on; NeedsReboot is set when
	// the node came back without a reboot (leader's view).
	Blocked     string `json:"blocked,omitempty"`
	NeedsReboot string `json:"needsReboot,omitempty"`
	// Recovery says what the unfence of an evicted node waits for: the
	// node to come back, the settle period, the detach of its old volumes
	// (leader's view).
	Recovery string `json:"recovery,omitempty"`
	// Regressions counts the times a held read-back found the node's
	// access again after the fence was verified (each cut again and read
	// back); LastRegression is the ledger's note of the last one: which
	// array, what access.
	Regressions    int    `json:"regressions,omitempty"`
	LastRegression string `json:"lastRegression,omitempty"`
	// Confirmations are operators' attestations (`fenced confirm`) that
	// the node cannot write to an array: who, when and why.
	Confirmations []string `json:"confirmations,omitempty"`
	// UnfenceOperator is who asked for the unfence, as the ledger records
	// it (empty when fenced unfenced a rebooted node by itself);
	// ForcedUnfence is set when the operator forced it.
	UnfenceOperator string `json:"unfenceOperator,omitempty"`
	ForcedUnfence   bool   `json:"forcedUnfence,omitempty"`
	// Steps are the record's state changes, oldest first (history only).
	Steps []FenceStep `json:"steps,omitempty"`
	// Scopes are the restore scopes the record's unfence computed, oldest
	// first (history only; ledger version 4): the first with the step to
	// unfence-intent, then each differing one a restore attempt found.
	Scopes []RestoreScope `json:"scopes,omitempty"`
}

// RestoreScope is one restore scope of an unfence, as the ledger records
// it: by array, the footprint volumes Kubernetes wanted on the node.
type RestoreScope struct {
	At     time.Time           `json:"at"`
	By     string              `json:"by,omitempty"`
	Wanted map[string][]string `json:"wanted,omitempty"`
	// Note says what changed from the scope before.
	Note string `json:"note,omitempty"`
}

// FenceStep is one state change of a fence record, as the ledger
// records it.
type FenceStep struct {
	To string    `json:"to"`
	At time.Time `json:"at"`
	// By is the replica that led when the step was written; Operator who
	// asked for it, when an operator did.
	By       string `json:"by,omitempty"`
	Operator string `json:"operator,omitempty"`
	Note     string `json:"note,omitempty"`
	Forced   bool   `json:"forced,omitempty"`
}

// HistoryPath is where a replica serves History (GET), read-only from its
// ledger; query parameters cluster, node and limit narrow it.
const HistoryPath = "/v1/history"

// History is the document served at HistoryPath: the ledger's finished
// (closed or aborted) fence records, newest first. The ledger keeps the
// last ones of each node.
type History struct {
	// ReplicaID is the replica that answered, AppliedIndex the ledger
	// index its answer reflects.
	ReplicaID    string  `json:"replicaID"`
	AppliedIndex uint64  `json:"appliedIndex"`
	Fences       []Fence `json:"fences"`
}

// FenceArray is a fence's progress on one array.
type FenceArray struct {
	Array string `json:"array"`
	// Step is planned, applied, verified, undone or restored, or
	// confirmed-by-operator: an operator attested that the node cannot
	// write there (`fenced confirm`) and Confirmed says who, when and why.
	Step string `json:"step"`
	// Summary says what the plan removes.
	Summary   string `json:"summary,omitempty"`
	Error     string `json:"error,omitempty"`
	Confirmed string `json:"confirmed,omitempty"`
}

// Array is one configured array's connectivity.
type Array struct {
	Name       string     `json:"name"`
	Family     string     `json:"family"`
	Reachable  bool       `json:"reachable"`
	APIVersion string     `json:"apiVersion,omitempty"`
	Error      string     `json:"error,omitempty"`
	CheckedAt  *time.Time `json:"checkedAt,omitempty"`
}
