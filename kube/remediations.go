package kube

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
)

// fenced's remediation kinds for medik8s NodeHealthCheck (their CRDs are
// in deploy/kubernetes/nhc/remediator.yaml).
const (
	// RemediationGroup is the API group of fenced's custom resources.
	RemediationGroup = "fenced.io"
	// RemediationVersion is their version.
	RemediationVersion = "v1alpha1"
	// RemediationFinalizer is the finalizer fenced puts on a
	// FencedRemediation: it is removed once the node's fence is closed.
	RemediationFinalizer = "fenced.io/unfence"

	// The annotations NodeHealthCheck sets on the remediation CRs it
	// creates (medik8s/common pkg/annotations NodeNameAnnotation;
	// node-healthcheck-operator internal/controller/utils/annotations
	// TemplateNameAnnotation, NhcTimedOut).
	AnnotationNodeName = "remediation.medik8s.io/node-name"
	// AnnotationTemplateName names the template the CR was made from.
	AnnotationTemplateName = "remediation.medik8s.io/template-name"
	// AnnotationNHCTimedOut is set by NHC when the CR's step timed out
	// and NHC went on to the next remediator.
	AnnotationNHCTimedOut = "remediation.medik8s.io/nhc-timed-out"
)

// RemediationResource is the FencedRemediation resource.
var RemediationResource = schema.GroupVersionResource{Group: RemediationGroup, Version: RemediationVersion, Resource: "fencedremediations"}

// Remediation is one FencedRemediation: a request, from NodeHealthCheck,
// to fence a node.
type Remediation struct {
	Namespace, Name string
	UID             types.UID
	// Node is the node to fence: the node-name annotation, else the CR's
	// name (NHC names it after the node unless the template allows
	// several remediations of one node).
	Node string
	// Template is the template NHC made it from.
	Template string
	// Reason is spec.reason (from the template), may be empty.
	Reason  string
	Created time.Time
	// Deleting is set once NHC deleted it (deletionTimestamp).
	Deleting bool
	// TimedOut is NHC's nhc-timed-out annotation (RFC 3339), or "".
	TimedOut string
	// Finalized: it carries RemediationFinalizer.
	Finalized bool
	// Owners names the objects that own it (NHC's NodeHealthCheck).
	Owners []string
	Status RemediationStatus
}

// Key is namespace/name.
func (r Remediation) Key() string { return r.Namespace + "/" + r.Name }

// RemediationStatus is what fenced reports in a FencedRemediation's status.
type RemediationStatus struct {
	FenceID    string             `json:"fenceID,omitempty"`
	Phase      string             `json:"phase,omitempty"`
	Arrays     []RemediationArray `json:"arrays,omitempty"`
	Evicted    []string           `json:"evicted,omitempty"`
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// RemediationArray is the read-back evidence of one array's cut.
type RemediationArray struct {
	Name       string       `json:"name"`
	Verified   bool         `json:"verified"`
	Cuts       int          `json:"cuts"`
	Summary    string       `json:"summary,omitempty"`
	VerifiedAt *metav1.Time `json:"verifiedAt,omitempty"`
}

// Remediations watches the FencedRemediations of one cluster, in every
// namespace, and writes their status and finalizer.
type Remediations struct {
	watch dynamic.Interface
	write dynamic.Interface
	log   *slog.Logger

	mu       sync.Mutex
	informer cache.SharedIndexInformer
	onChange []func(node string)
	absent   bool
}

// NewRemediations returns a watcher of FencedRemediations; Start runs it.
func NewRemediations(watch, write dynamic.Interface, log *slog.Logger) *Remediations {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Remediations{watch: watch, write: write, log: log}
}

// OnChange registers fn to be called with the node of every added,
// changed or deleted FencedRemediation. Call before Start.
func (r *Remediations) OnChange(fn func(node string)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.onChange = append(r.onChange, fn)
}

// crdRecheck is how often Start looks again for a FencedRemediation CRD
// that is not installed.
const crdRecheck = time.Minute

// Start waits for the FencedRemediation CRD to be served (a cluster
// without it has no NodeHealthCheck remediations; that is logged once),
// then runs the informer until ctx ends.
func (r *Remediations) Start(ctx context.Context) {
	for {
		_, err := r.watch.Resource(RemediationResource).List(ctx, metav1.ListOptions{Limit: 1})
		if err == nil {
			break
		}
		r.mu.Lock()
		first := !r.absent
		r.absent = true
		r.mu.Unlock()
		if first {
			if apierrors.IsNotFound(err) {
				r.log.Info("no FencedRemediation CRD in the cluster: no NodeHealthCheck remediations (apply deploy/kubernetes/nhc/remediator.yaml to use them)")
			} else {
				r.log.Warn("cannot list FencedRemediations; retrying", "error", err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(crdRecheck):
		}
	}
	f := dynamicinformer.NewFilteredDynamicSharedInformerFactory(r.watch, 10*time.Minute, metav1.NamespaceAll, nil)
	inf := f.ForResource(RemediationResource).Informer()
	notify := func(obj any) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return
		}
		rem := parseRemediation(u)
		r.mu.Lock()
		fns := slices.Clone(r.onChange)
		r.mu.Unlock()
		for _, fn := range fns {
			fn(rem.Node)
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    notify,
		UpdateFunc: func(_, obj any) { notify(obj) },
		DeleteFunc: notify,
	}); err != nil {
		r.log.Error("cannot watch FencedRemediations", "error", err)
		return
	}
	r.mu.Lock()
	r.informer, r.absent = inf, false
	r.mu.Unlock()
	r.log.Info("watching FencedRemediations (NodeHealthCheck remediator)")
	inf.Run(ctx.Done())
}

// Synced reports whether the informer has listed every FencedRemediation.
func (r *Remediations) Synced() bool {
	r.mu.Lock()
	inf := r.informer
	r.mu.Unlock()
	return inf != nil && inf.HasSynced()
}

// Nodes names every node with a FencedRemediation.
func (r *Remediations) Nodes() []string {
	r.mu.Lock()
	inf := r.informer
	r.mu.Unlock()
	if inf == nil {
		return nil
	}
	var out []string
	for _, obj := range inf.GetStore().List() {
		if u, ok := obj.(*unstructured.Unstructured); ok {
			out = append(out, parseRemediation(u).Node)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// ForNode returns the FencedRemediations of a node, oldest first (none
// before Synced).
func (r *Remediations) ForNode(node string) []Remediation {
	r.mu.Lock()
	inf := r.informer
	r.mu.Unlock()
	if inf == nil {
		return nil
	}
	var out []Remediation
	for _, obj := range inf.GetStore().List() {
		if u, ok := obj.(*unstructured.Unstructured); ok {
			if rem := parseRemediation(u); rem.Node == node {
				out = append(out, rem)
			}
		}
	}
	slices.SortFunc(out, func(a, b Remediation) int {
		if c := a.Created.Compare(b.Created); c != 0 {
			return c
		}
		return compareStrings(a.Key(), b.Key())
	})
	return out
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func parseRemediation(u *unstructured.Unstructured) Remediation {
	ann := u.GetAnnotations()
	rem := Remediation{
		Namespace: u.GetNamespace(), Name: u.GetName(), UID: u.GetUID(),
		Node: ann[AnnotationNodeName], Template: ann[AnnotationTemplateName], TimedOut: ann[AnnotationNHCTimedOut],
		Created:   u.GetCreationTimestamp().Time,
		Deleting:  u.GetDeletionTimestamp() != nil,
		Finalized: slices.Contains(u.GetFinalizers(), RemediationFinalizer),
	}
	if rem.Node == "" {
		rem.Node = u.GetName()
	}
	rem.Reason, _, _ = unstructured.NestedString(u.Object, "spec", "reason")
	for _, o := range u.GetOwnerReferences() {
		rem.Owners = append(rem.Owners, o.Kind+"/"+o.Name)
	}
	if st, ok, _ := unstructured.NestedMap(u.Object, "status"); ok {
		_ = runtime.DefaultUnstructuredConverter.FromUnstructured(st, &rem.Status)
	}
	return rem
}

// ErrRemediationGone is returned when the FencedRemediation no longer
// exists or was replaced by another of the same name.
var ErrRemediationGone = errors.New("FencedRemediation gone")

// SetStatus writes the status of a FencedRemediation (the status
// subresource), read fresh and matched by UID.
func (r *Remediations) SetStatus(ctx context.Context, rem Remediation, st RemediationStatus) error {
	ri := r.write.Resource(RemediationResource).Namespace(rem.Namespace)
	u, err := r.get(ctx, rem)
	if err != nil {
		return err
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&st)
	if err != nil {
		return fmt.Errorf("encode status of FencedRemediation %s: %w", rem.Key(), err)
	}
	u.Object["status"] = m
	if _, err := ri.UpdateStatus(ctx, u, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("update status of FencedRemediation %s: %w", rem.Key(), err)
	}
	return nil
}

// SetFinalizer adds (on) or removes fenced's finalizer.
func (r *Remediations) SetFinalizer(ctx context.Context, rem Remediation, on bool) error {
	u, err := r.get(ctx, rem)
	if err != nil {
		return err
	}
	fins := u.GetFinalizers()
	has := slices.Contains(fins, RemediationFinalizer)
	switch {
	case on && !has:
		u.SetFinalizers(append(fins, RemediationFinalizer))
	case !on && has:
		u.SetFinalizers(slices.DeleteFunc(fins, func(f string) bool { return f == RemediationFinalizer }))
	default:
		return nil
	}
	if _, err := r.write.Resource(RemediationResource).Namespace(rem.Namespace).Update(ctx, u, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("update finalizers of FencedRemediation %s: %w", rem.Key(), err)
	}
	return nil
}

func (r *Remediations) get(ctx context.Context, rem Remediation) (*unstructured.Unstructured, error) {
	u, err := r.write.Resource(RemediationResource).Namespace(rem.Namespace).Get(ctx, rem.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("%w: %s", ErrRemediationGone, rem.Key())
	}
	if err != nil {
		return nil, fmt.Errorf("get FencedRemediation %s: %w", rem.Key(), err)
	}
	if u.GetUID() != rem.UID {
		return nil, fmt.Errorf("%w: %s was replaced", ErrRemediationGone, rem.Key())
	}
	return u, nil
}

// SetCondition sets a condition in conds the way metav1 conditions are
// kept: the transition time changes only with the status.
func SetCondition(conds *[]metav1.Condition, c metav1.Condition) {
	meta.SetStatusCondition(conds, c)
}
