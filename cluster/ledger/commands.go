package ledger

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/fenced-project/fenced/arrayclients"
)

// MessageType is the first byte of every command. Values are append-only:
// a retired type keeps its number and stays decodable.
type MessageType uint8

// IgnorableFlag marks a type that a replica which does not know it may skip.
const IgnorableFlag MessageType = 0x80

// Command types.
const (
	TypeLeaderEpoch       MessageType = 1
	TypeSetIdentities     MessageType = 2
	TypeOpenFence         MessageType = 3
	TypeAmendFence        MessageType = 4
	TypeFenceStep         MessageType = 5
	TypeRecordArrayResult MessageType = 6
	TypeSetPause          MessageType = 7
	TypeObserve           MessageType = 8
	TypeOperatorNote      MessageType = 9
	TypeForgetNode        MessageType = 10
	TypeSetLedgerVersion  MessageType = 11
	TypeRescope           MessageType = 12
	TypeAddPause          MessageType = 13
	TypeEndPauses         MessageType = 14
	TypeConfirmArray      MessageType = 15
	TypeAbandonRestore    MessageType = 16
)

// Version is the highest command body version this ledger understands,
// and every version from MinVersion up to it is applied with its own rules
// (an entry keeps the rules of the version it was written in):
//
//   - 1: the first ledger.
//   - 2: storage footprints: the footprint and replanning of a fence
//     (OpenFence, AmendFence), the restore scope of unfence-intent
//     (FenceStep), the arrays where a node's identity was not found
//     (SetIdentities), the rule that a footprint fence steps to fenced only
//     once every footprint volume is cut and read back, and the refence
//     (back to fencing from fenced, tainted or evicted; see rules).
//   - 3: the group ledger version (SetLedgerVersion): a leader writes at
//     most the version every voter applies, and takes a tainted or evicted
//     record back to fencing only from version 3.
//   - 4: the restore scope of an unfence is computed again before every
//     restore attempt (Rescope): a changed scope is recorded in
//     unfence-intent and clears the restore read-back of each array whose
//     scope changed; every scope computed for a record, the first one of
//     its unfence-intent step included, is kept in it (Fence.Scopes).
//   - 5: pauses are a list of holders (AddPause, EndPauses): each pause
//     has its own operator, reason, scope and time, and a resume ends
//     named pauses only; the single pause slots of earlier versions stay
//     and apply as before. An operator may confirm that a fenced node
//     cannot reach an array (ConfirmArray, `fenced confirm`): that
//     array's cut counts as verified for that fence only.
//   - 6: an operator may abandon the restore of an array confirmed gone
//     for the fence (AbandonRestore, `fenced unfence --abandon-array`):
//     the unfence finishes without restoring or reading back that array,
//     and records it as not restored.
//
// Every change to a rule of Apply is a new version: TestRulesLocked fails
// when transitions.go, validate.go or an apply_*.go file changes while
// Version stays the same.
const Version = 6

// MinVersion is the oldest command version this ledger applies.
const MinVersion = 1

// LegacyVersion is the group ledger version of a group that never committed
// one (SetLedgerVersion), and the newest version a replica that advertises
// none is taken to apply: builds before version 3 wrote version 2.
const LegacyVersion = 2

// MaxCommandSize bounds an encoded command.
const MaxCommandSize = 512 << 10

var typeNames = map[MessageType]string{
	TypeLeaderEpoch:       "leader-epoch",
	TypeSetIdentities:     "set-identities",
	TypeOpenFence:         "open-fence",
	TypeAmendFence:        "amend-fence",
	TypeFenceStep:         "fence-step",
	TypeRecordArrayResult: "record-array-result",
	TypeSetPause:          "set-pause",
	TypeObserve:           "observe",
	TypeOperatorNote:      "operator-note",
	TypeForgetNode:        "forget-node",
	TypeSetLedgerVersion:  "set-ledger-version",
	TypeRescope:           "rescope",
	TypeAddPause:          "add-pause",
	TypeEndPauses:         "end-pauses",
	TypeConfirmArray:      "confirm-array",
	TypeAbandonRestore:    "abandon-restore",
}

// String names the type for logs.
func (t MessageType) String() string {
	if n, ok := typeNames[t]; ok {
		return n
	}
	return fmt.Sprintf("type-%d", uint8(t))
}

// Meta is carried by every command.
type Meta struct {
	// V is the body version, 1..Version.
	V int `json:"v"`
	// Term is the term of the leader that composed the command. Apply
	// refuses the command unless it equals the term of its log entry.
	Term uint64 `json:"term"`
	// At is when the leader composed the command; it is the time recorded
	// for every change the command makes.
	At time.Time `json:"at"`
	// By is the replica ID of the leader that composed it.
	By string `json:"by"`
}

func (m *Meta) meta() *Meta { return m }

// VersionOf is the body version a command was composed with.
func VersionOf(c Command) int { return c.meta().V }

// Command is a ledger command. The implementations are the types below.
type Command interface {
	// Type is the command's type byte.
	Type() MessageType
	// Validate checks the fields that do not depend on the ledger state.
	Validate() error
	meta() *Meta
}

// LeaderEpoch is written by a new leader once it has caught up. It records
// the leadership and confirms the term the leader will write with.
type LeaderEpoch struct {
	Meta
	LedgerVersion int `json:"ledgerVersion"`
}

// SetIdentities records a healthy node's identities on the arrays and its
// boot ID. It replaces the node's previous identity set.
type SetIdentities struct {
	Meta
	Cluster    string                           `json:"cluster"`
	Node       string                           `json:"node"`
	BootID     string                           `json:"bootID"`
	Identities map[string]arrayclients.Identity `json:"identities"`
	// NotFound maps an array where no object was found for the node to
	// what was looked for (version 2). With a footprint volume of the node
	// on that array it is a gap; otherwise nothing of the node's is there.
	NotFound map[string]string `json:"notFound,omitempty"`
	// Ambiguous maps an array where more than one object could be the node
	// to the candidates (version 2); a gap too where the node has
	// footprint volumes.
	Ambiguous map[string]string `json:"ambiguous,omitempty"`
	// InputsDigest is the SHA-256, in hex, of what the identities were
	// resolved from (the node's addresses and CSINode IDs, the arrays and
	// their overrides). A new leader that holds the same inputs for a node
	// whose identities were all found need not resolve it again.
	InputsDigest string `json:"inputsDigest,omitempty"`
}

// OpenFence opens a fence record in state intent. The node must have no open
// record. The record's ID is FenceID(index of this entry).
type OpenFence struct {
	Meta
	Cluster  string `json:"cluster"`
	Node     string `json:"node"`
	Origin   Origin `json:"origin"`
	Operator string `json:"operator,omitempty"`
	Reason   string `json:"reason"`
	// BootID is the node's boot ID at fence time.
	BootID string `json:"bootID,omitempty"`
	// PodUIDs are the pods on the node before the fence.
	PodUIDs []string `json:"podUIDs,omitempty"`
	// Plans may be given now or later with AmendFence.
	Plans []arrayclients.Plan `json:"plans,omitempty"`
	// Footprint is the node's storage footprint when the fence opened
	// (version 2): every volume Kubernetes attached or was attaching to it,
	// placed on the arrays. FootprintRecorded distinguishes an empty
	// footprint from none recorded (a version 1 record).
	Footprint         []arrayclients.FootprintVolume `json:"footprint,omitempty"`
	FootprintRecorded bool                           `json:"footprintRecorded,omitempty"`
}

// AmendFence adds plans (for arrays that have none yet, or replaces one not
// applied yet) and pod UIDs to a record in intent or fencing. From version
// 2 it also adds footprint volumes (volumes attached since the fence
// opened, or the whole footprint of a version 1 record) and, with Replan,
// replaces plans of arrays already operated on: the old plan is kept in
// the record's Superseded list (its removals are still to be undone) and
// the array's results start over.
type AmendFence struct {
	Meta
	Cluster string              `json:"cluster"`
	Node    string              `json:"node"`
	FenceID string              `json:"fenceID"`
	Expect  FenceState          `json:"expect"`
	Plans   []arrayclients.Plan `json:"plans,omitempty"`
	PodUIDs []string            `json:"podUIDs,omitempty"`
	// Footprint volumes are added to the record's footprint (a volume of
	// the same PersistentVolume replaces the recorded one), and the
	// footprint counts as recorded.
	Footprint []arrayclients.FootprintVolume `json:"footprint,omitempty"`
	// FootprintRecorded marks the footprint recorded even when Footprint
	// is empty (a version 1 record of a node with no volumes).
	FootprintRecorded bool `json:"footprintRecorded,omitempty"`
	// Replan allows replacing the plan of an array already operated on.
	Replan bool `json:"replan,omitempty"`
}

// FenceStep moves a fence record from one state to another.
type FenceStep struct {
	Meta
	Cluster string     `json:"cluster"`
	Node    string     `json:"node"`
	FenceID string     `json:"fenceID"`
	From    FenceState `json:"from"`
	To      FenceState `json:"to"`
	// Operator is set when an operator asked for the step.
	Operator string `json:"operator,omitempty"`
	// Note is the reason (required for failed, aborted and operator steps).
	Note string `json:"note,omitempty"`
	// BootID is the node's new boot ID when moving to unfence-intent.
	BootID string `json:"bootID,omitempty"`
	// Restore is, by array, what the unfence may give back besides the
	// host-level identity (version 2, with unfence-intent): the footprint
	// volumes Kubernetes still wants on the node.
	Restore map[string]arrayclients.RestoreScope `json:"restore,omitempty"`
	// Forced marks an operator's forced unfence (a step to unfence-intent
	// that skipped the reboot, stale-pod and detach checks); Unverified
	// one that went ahead although the API server could not be read.
	// Entries written before these fields decode with both false.
	Forced     bool `json:"forced,omitempty"`
	Unverified bool `json:"unverified,omitempty"`
	// OutOfServiceBefore, given with a step to fenced, says whether the
	// node carried an out-of-service taint fenced did not put there (an
	// administrator's): unfence then leaves it. Only the first fenced step
	// of a record sets it; absent (older entries) means unknown, and unfence
	// removes the taint as before.
	OutOfServiceBefore *bool `json:"outOfServiceBefore,omitempty"`
}

// RecordArrayResult records the outcome of one operation on one array of a
// fence record. The record must be in Expect, which must be fencing for
// apply and verify and unfence-intent for undo and verify-restore.
type RecordArrayResult struct {
	Meta
	Cluster string     `json:"cluster"`
	Node    string     `json:"node"`
	FenceID string     `json:"fenceID"`
	Expect  FenceState `json:"expect"`
	Array   string     `json:"array"`
	Op      ArrayOp    `json:"op"`
	OK      bool       `json:"ok"`
	Error   string     `json:"error,omitempty"`
	// Verification is required for verify and verify-restore when OK.
	Verification *arrayclients.Verification `json:"verification,omitempty"`
}

// SetPause sets or clears the pause flag of a cluster, or the global one
// when Cluster is empty.
type SetPause struct {
	Meta
	Cluster  string `json:"cluster,omitempty"`
	Paused   bool   `json:"paused"`
	Operator string `json:"operator"`
	Reason   string `json:"reason"`
}

// Observe records what a replica observes of a subject. It changes the
// ledger only when OK differs from the recorded value (changes only).
type Observe struct {
	Meta
	Replica string    `json:"replica"`
	Cluster string    `json:"cluster"`
	Node    string    `json:"node,omitempty"`
	Probe   string    `json:"probe"`
	OK      bool      `json:"ok"`
	Since   time.Time `json:"since"`
	Detail  string    `json:"detail,omitempty"`
}

// OperatorNote records an operator action that has no other command, such
// as acknowledging a failed fence.
type OperatorNote struct {
	Meta
	Cluster  string `json:"cluster,omitempty"`
	Node     string `json:"node,omitempty"`
	FenceID  string `json:"fenceID,omitempty"`
	Operator string `json:"operator"`
	Action   string `json:"action"`
	Reason   string `json:"reason"`
}

// ForgetNode removes a node that has no open fence record (for example after
// it was deleted from its cluster), with its observations.
type ForgetNode struct {
	Meta
	Cluster  string `json:"cluster"`
	Node     string `json:"node"`
	Operator string `json:"operator,omitempty"`
	Reason   string `json:"reason"`
}

// SetLedgerVersion raises the group ledger version (version 3): the
// leader writes it once every voter advertises that it applies
// LedgerVersion. Its own V is LedgerVersion. The group version never goes
// down.
type SetLedgerVersion struct {
	Meta
	LedgerVersion int `json:"ledgerVersion"`
	// Voters are the voters and the newest version each advertised when
	// the leader decided, for the record.
	Voters map[string]int `json:"voters,omitempty"`
}

// Rescope records the restore scope of a record in unfence-intent computed
// again before a restore attempt, when it differs from the recorded one
// (version 4): the footprint volumes Kubernetes wants on the node now,
// by array. It replaces the record's Restore, is kept in its Scopes, and
// clears the restore read-back of every array whose scope changed, so
// that array is restored and read back again under the new scope before
// the record may step to restored.
type Rescope struct {
	Meta
	Cluster string `json:"cluster"`
	Node    string `json:"node"`
	FenceID string `json:"fenceID"`
	// Restore is the new scope; empty when Kubernetes wants none of the
	// record's footprint volumes on the node any more.
	Restore map[string]arrayclients.RestoreScope `json:"restore,omitempty"`
	// Note says what changed, for the record.
	Note string `json:"note,omitempty"`
}

// AddPause adds a pause holder (version 5): fencing on verdicts is paused
// for the cluster (every cluster when Cluster is empty) while any holder
// stays. A second AddPause of the same operator and scope updates that
// holder's reason; its ID and time stay.
type AddPause struct {
	Meta
	Cluster  string `json:"cluster,omitempty"`
	Operator string `json:"operator"`
	Reason   string `json:"reason"`
}

// EndPauses ends the named pause holders (version 5). Every ID must name a
// holder: the leader resolves "mine", "by operator" and "all" into IDs, and
// a holder ended meanwhile refuses the whole command. LegacyPauseID names
// the single pause slots of earlier versions.
type EndPauses struct {
	Meta
	IDs      []string `json:"ids"`
	Operator string   `json:"operator"`
	Reason   string   `json:"reason"`
}

// ConfirmArray records an operator's attestation (version 5) that the
// node of an open fence cannot write to an array (it is gone for good, or
// the node is powered off): for that fence only, the array counts as cut
// and read back. With PoweredOff and no Array it covers every array of the
// fence. It is never written without an operator.
type ConfirmArray struct {
	Meta
	Cluster    string `json:"cluster"`
	Node       string `json:"node"`
	FenceID    string `json:"fenceID"`
	Array      string `json:"array,omitempty"`
	PoweredOff bool   `json:"poweredOff,omitempty"`
	Operator   string `json:"operator"`
	Reason     string `json:"reason"`
}

// AbandonRestore records an operator's decision (version 6) that the
// unfence of a fence does not restore access on an array the operator
// confirmed gone for that fence (ConfirmArray): the fence steps to
// restored without that array's restore, which is recorded as not
// restored. Allowed only in unfence-intent, for a plan array whose restore
// was not read back. It is never written without an operator.
type AbandonRestore struct {
	Meta
	Cluster  string `json:"cluster"`
	Node     string `json:"node"`
	FenceID  string `json:"fenceID"`
	Array    string `json:"array"`
	Operator string `json:"operator"`
	Reason   string `json:"reason"`
}

// Type implementations.
func (*LeaderEpoch) Type() MessageType       { return TypeLeaderEpoch }
func (*SetIdentities) Type() MessageType     { return TypeSetIdentities }
func (*OpenFence) Type() MessageType         { return TypeOpenFence }
func (*AmendFence) Type() MessageType        { return TypeAmendFence }
func (*FenceStep) Type() MessageType         { return TypeFenceStep }
func (*RecordArrayResult) Type() MessageType { return TypeRecordArrayResult }
func (*SetPause) Type() MessageType          { return TypeSetPause }
func (*Observe) Type() MessageType           { return TypeObserve }
func (*OperatorNote) Type() MessageType      { return TypeOperatorNote }
func (*ForgetNode) Type() MessageType        { return TypeForgetNode }
func (*SetLedgerVersion) Type() MessageType  { return TypeSetLedgerVersion }
func (*Rescope) Type() MessageType           { return TypeRescope }
func (*AddPause) Type() MessageType          { return TypeAddPause }
func (*EndPauses) Type() MessageType         { return TypeEndPauses }
func (*ConfirmArray) Type() MessageType      { return TypeConfirmArray }
func (*AbandonRestore) Type() MessageType    { return TypeAbandonRestore }

// newCommand returns an empty command of type t, or nil for an unknown type.
func newCommand(t MessageType) Command {
	switch t {
	case TypeLeaderEpoch:
		return &LeaderEpoch{}
	case TypeSetIdentities:
		return &SetIdentities{}
	case TypeOpenFence:
		return &OpenFence{}
	case TypeAmendFence:
		return &AmendFence{}
	case TypeFenceStep:
		return &FenceStep{}
	case TypeRecordArrayResult:
		return &RecordArrayResult{}
	case TypeSetPause:
		return &SetPause{}
	case TypeObserve:
		return &Observe{}
	case TypeOperatorNote:
		return &OperatorNote{}
	case TypeForgetNode:
		return &ForgetNode{}
	case TypeSetLedgerVersion:
		return &SetLedgerVersion{}
	case TypeRescope:
		return &Rescope{}
	case TypeAddPause:
		return &AddPause{}
	case TypeEndPauses:
		return &EndPauses{}
	case TypeConfirmArray:
		return &ConfirmArray{}
	case TypeAbandonRestore:
		return &AbandonRestore{}
	}
	return nil
}

// Encode validates a command and encodes it as its type byte followed by
// its JSON body.
func Encode(c Command) ([]byte, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	body, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", c.Type(), err)
	}
	buf := make([]byte, 0, len(body)+1)
	buf = append(buf, byte(c.Type()))
	buf = append(buf, body...)
	if len(buf) > MaxCommandSize {
		return nil, fmt.Errorf("encode %s: %w: %d bytes exceeds %d", c.Type(), ErrInvalid, len(buf), MaxCommandSize)
	}
	return buf, nil
}

// Decode decodes and validates an encoded command. An unknown type yields
// ErrUnknownType; the caller decides whether its IgnorableFlag bit lets it
// be skipped.
func Decode(buf []byte) (Command, error) {
	if len(buf) == 0 {
		return nil, fmt.Errorf("%w: empty entry", ErrInvalid)
	}
	t := MessageType(buf[0])
	c := newCommand(t)
	if c == nil {
		return nil, fmt.Errorf("%w: %d", ErrUnknownType, uint8(t))
	}
	// A body of a newer version may not decode into this version's type:
	// read its version first, so it is reported as what it is.
	var m struct {
		V int `json:"v"`
	}
	if json.Unmarshal(buf[1:], &m) == nil && m.V > Version {
		return nil, fmt.Errorf("%w: %s: v %d, this ledger understands up to %d", ErrUnsupportedVersion, t, m.V, Version)
	}
	if err := json.Unmarshal(buf[1:], c); err != nil {
		return nil, fmt.Errorf("%w: decode %s: %w", ErrInvalid, t, err)
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}
