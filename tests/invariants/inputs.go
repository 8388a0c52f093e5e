package invariants

import (
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/fenced-project/fenced/cluster/ledger"
	"github.com/fenced-project/fenced/tests/arraysim/simcore"
)

// KubeEvent is one record of the apiserver's audit log (audit.k8s.io/v1
// Event at Metadata level), reduced to what the checks look at.
type KubeEvent struct {
	AuditID   string         `json:"auditID"`
	Stage     string         `json:"stage"`
	Verb      string         `json:"verb"`
	User      KubeUser       `json:"user"`
	ObjectRef *KubeObjectRef `json:"objectRef,omitempty"`
	Response  *KubeStatus    `json:"responseStatus,omitempty"`
	// Received is requestReceivedTimestamp; Completed is stageTimestamp.
	Received  time.Time `json:"requestReceivedTimestamp"`
	Completed time.Time `json:"stageTimestamp"`
}

// KubeUser is the authenticated user of a request.
type KubeUser struct {
	Username string `json:"username"`
}

// KubeObjectRef names the object a request was about.
type KubeObjectRef struct {
	Resource    string `json:"resource"`
	Namespace   string `json:"namespace"`
	Name        string `json:"name"`
	Subresource string `json:"subresource"`
}

// KubeStatus is a request's response status.
type KubeStatus struct {
	Code int `json:"code"`
}

// Succeeded reports whether the request got a 2xx answer.
func (e KubeEvent) Succeeded() bool {
	return e.Response != nil && e.Response.Code >= 200 && e.Response.Code < 300
}

func (e KubeEvent) ref() KubeObjectRef {
	if e.ObjectRef == nil {
		return KubeObjectRef{}
	}
	return *e.ObjectRef
}

// Placement says that from Time on the object (a pod or a
// VolumeAttachment) was on Node. The harness records one per change it
// observes; a pod recreated under the same name on another node gets a new
// placement.
type Placement struct {
	Time      time.Time `json:"time"`
	Resource  string    `json:"resource"` // pods or volumeattachments
	Namespace string    `json:"namespace,omitempty"`
	Name      string    `json:"name"`
	Node      string    `json:"node"`
	// Deleted says the object was gone from Time on (Node is where it was).
	Deleted bool `json:"deleted,omitempty"`
}

// Event is one entry of the harness's fault timeline.
type Event struct {
	Time time.Time `json:"time"`
	Kind string    `json:"kind"`
	// Detail names the subject: a cluster, "cluster/node", a replica, or
	// "replica/cluster", depending on Kind.
	Detail string `json:"detail,omitempty"`
}

// Timeline event kinds the checks read. Other kinds are kept for reports.
const (
	// StormStart and StormEnd bracket a cut of the management network from
	// more nodes of a cluster than its storm limit allows. Detail: cluster.
	StormStart = "storm-start"
	StormEnd   = "storm-end"
	// APICutStart and APICutEnd bracket a cut between one replica and a
	// cluster's apiserver. Detail: "replica/cluster".
	APICutStart = "apiserver-cut-start"
	APICutEnd   = "apiserver-cut-end"
	// APIDownStart and APIDownEnd bracket an apiserver outage (unreachable
	// from every replica). Detail: cluster.
	APIDownStart = "apiserver-down-start"
	APIDownEnd   = "apiserver-down-end"
	// NodeReboot records a reboot of a node. Detail: "cluster/node".
	NodeReboot = "node-reboot"
	// DrainStart and DrainEnd bracket pods moved off a healthy node on
	// purpose (an operator's drain): the attach/detach controller then
	// deletes the node's VolumeAttachments without a fence. Detail:
	// "cluster/node".
	DrainStart = "drain-start"
	DrainEnd   = "drain-end"
	// NodeKill, NodeHang and NodeReturn record node faults.
	NodeKill   = "node-kill"
	NodeHang   = "node-hang"
	NodeReturn = "node-return"
)

// History is the ledger's evidence: every leadership epoch and every fence
// record known, by ID, in their last known version. A State's own lists are
// bounded (ledger.MaxHistory, ledger.MaxLeaders); ReplayDataDir sees every
// one of them.
type History struct {
	// Epochs are the leadership epochs, in term order.
	Epochs []ledger.Epoch `json:"epochs"`
	// Fences are the fence records, in the order they were opened.
	Fences []*ledger.Fence `json:"fences"`
	// Final is the ledger at the end of the run, if known.
	Final *ledger.State `json:"final,omitempty"`
	// AtFenced are records as they were when a "fenced" step committed
	// (their plans and read-backs then), one per record and fenced step.
	// ReplayDataDir sees every one; a State only those still fenced.
	AtFenced []*ledger.Fence `json:"atFenced,omitempty"`
}

// Inputs are the parsed evidence of one run.
type Inputs struct {
	// Kube maps a cluster name to its apiserver's audit events.
	Kube map[string][]KubeEvent
	// Arrays maps an array name to its simulator's audit entries.
	Arrays map[string][]simcore.AuditEntry
	// ArrayStart and ArrayEnd map an array name to its /_sim/state dump at
	// the start and at the end of the run.
	ArrayStart map[string]json.RawMessage
	ArrayEnd   map[string]json.RawMessage
	// Placements maps a cluster name to where its pods and
	// VolumeAttachments were over time.
	Placements map[string][]Placement
	// Ledger is the ledger's evidence.
	Ledger *History
	// Timeline is the harness's fault timeline.
	Timeline []Event
	// DryRun says the run was a dry-run: nothing may be written.
	DryRun bool
}

// Options tune the checks to the harness.
type Options struct {
	// FencedUsers are the Kubernetes user names fenced's replicas
	// authenticate as, mapped to the replica ID when each replica has its
	// own user ("" when they share one).
	FencedUsers map[string]string
	// VolumeAttachmentUsers limits the VolumeAttachment deletes checked to
	// these users; empty checks every user's (the attach/detach controller
	// deletes them once fenced tainted the node).
	VolumeAttachmentUsers []string
	// Remotes maps the tag of an array request's Remote (the part before
	// the first "/", see RemoteTag) or the whole Remote to a replica ID.
	Remotes map[string]string
	// DriverRemotes are the tags (see RemoteTag) of array requests the CSI
	// drivers make (the test bed's emulated controllers): their writes are
	// not fenced's, so one-actor leaves them out and array-restored does not
	// ask fenced to restore what they changed.
	DriverRemotes []string
	// InFlightGrace tolerates an array or Kubernetes write from the replica
	// that led just before the current epoch for this long after the
	// epoch began (a request it sent before it stepped down and that
	// arrived late, e.g. through an injected latency). Default 0.
	InFlightGrace time.Duration
	// DetectionSlack is how long a replica may take to notice that it lost
	// the apiserver (its probe interval plus timeout). Default 0.
	DetectionSlack time.Duration
	// HeldPeriod is fenced's held period (clusters[].heldPeriod): rule
	// held wants every write that gives a held node access again cut
	// within it. Default DefaultHeldPeriod.
	HeldPeriod time.Duration
	// SignalKeys are the keys of simulator state dumps that hold health
	// signals the harness drives; they are left out of array-restored.
	// Default DefaultSignalKeys.
	SignalKeys []string
}

// DefaultSignalKeys are the keys of the simulators' health signals.
var DefaultSignalKeys = []string{"connected", "ioActive", "logged_in", "mdmConnectionState"}

// RemoteTag returns the part of an audit Remote before the first "/", or
// the whole Remote when it has none. The harness serves each replica's
// listener of an array with a handler that prefixes the replica's tag.
func RemoteTag(remote string) string {
	if i := strings.IndexByte(remote, '/'); i >= 0 {
		return remote[:i]
	}
	return remote
}

// replicaOf attributes an array request to a replica ("" when unknown).
func (o Options) replicaOf(remote string) string {
	if r, ok := o.Remotes[remote]; ok {
		return r
	}
	return o.Remotes[RemoteTag(remote)]
}

// isDriver reports whether an array request came from a CSI driver.
func (o Options) isDriver(remote string) bool {
	return slices.Contains(o.DriverRemotes, RemoteTag(remote))
}

// isFencedUser reports whether user is one of fenced's users.
func (o Options) isFencedUser(user string) bool {
	_, ok := o.FencedUsers[user]
	return ok
}
