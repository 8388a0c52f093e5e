package testbed

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/fenced-project/fenced/tests/csidriver"
)

// AttacherUser is the user the test bed's attacher writes as.
const AttacherUser = "testbed-csi-attacher"

// AttacherFinalizer is the finalizer the external-attacher sidecar puts on
// a VolumeAttachment of a driver: "external-attacher/" and the driver name
// with every character that is not a letter or digit replaced by '-'
// (kubernetes-csi/external-attacher pkg/controller/util.go).
func AttacherFinalizer(driver string) string {
	return "external-attacher/" + strings.Map(func(r rune) rune {
		if (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') {
			return r
		}
		return '-'
	}, driver)
}

// attacher plays the CSI external-attacher sidecar of the Dell drivers with
// the emulated controllers of package csidriver behind it. For a
// VolumeAttachment of a Dell driver it adds the sidecar's finalizer, calls
// ControllerPublish with the node's CSI node ID (from its CSINode) and
// sets status.attached, or status.attachError and retries with back-off;
// when the attachment is deleted it calls ControllerUnpublish (or records
// status.detachError and retries), then removes the finalizer.
//
// Like the sidecar it also reconciles (ReconcileVA in
// kubernetes-csi/external-attacher pkg/controller/csi_handler.go, every
// --reconcile-sync, 1 minute by default): for a driver whose controller
// advertises LIST_VOLUMES_PUBLISHED_NODES it asks ListVolumes and, for
// every VolumeAttachment of the driver whose status.attached differs from
// whether ListVolumes shows the volume on the attachment's node, forces
// one more sync: ControllerPublish again for an attachment not being
// deleted, even one already attached; ControllerUnpublish again for one
// being deleted. The sidecar looks at nothing else: not the node's
// taints (out-of-service included), not the node's state.
//
// A driver without a registered controller gets an attachError naming
// that, unless the test bed was told to attach such volumes without a
// controller (ControlPlane.AttachWithoutController): then the attachment
// is marked attached and nothing happens on any array.
type attacher struct {
	cs          kubernetes.Interface
	drivers     []string
	controllers *csidriver.Registry
	// fake attaches volumes of drivers without a registered controller.
	fake *atomic.Bool
	log  *slog.Logger

	// reconcileSync is the reconcile period in nanoseconds; wake cuts
	// the current wait short when it changes.
	reconcileSync *atomic.Int64
	wake          chan struct{}
	// republished counts the forced publishes the reconcile caused,
	// passes the reconcile passes done.
	republished, passes *atomic.Int64
	forceMu             sync.Mutex
	forceSync           map[string]bool

	vas   storagelisters.VolumeAttachmentLister
	pvs   cache.Indexer
	nodes storagelisters.CSINodeLister
	queue workqueue.TypedRateLimitingInterface[string]
}

// attacherWorkers is how many attachments are published at once.
const attacherWorkers = 4

// run attaches and detaches until ctx ends.
func (a *attacher) run(ctx context.Context) {
	f := informers.NewSharedInformerFactory(a.cs, 10*time.Second)
	vaInf := f.Storage().V1().VolumeAttachments()
	a.vas = vaInf.Lister()
	a.pvs = f.Core().V1().PersistentVolumes().Informer().GetIndexer()
	a.nodes = f.Storage().V1().CSINodes().Lister()
	a.queue = workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](100*time.Millisecond, 5*time.Second),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "csi-attacher"})
	enqueue := func(obj any) {
		if va, ok := obj.(*storagev1.VolumeAttachment); ok && a.handles(va.Spec.Attacher) {
			a.queue.Add(va.Name)
		}
	}
	_, _ = vaInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
	})
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())
	done := make(chan struct{})
	go func() {
		defer func() { done <- struct{}{} }()
		a.reconcileLoop(ctx)
	}()
	for range attacherWorkers {
		go func() {
			defer func() { done <- struct{}{} }()
			for a.next(ctx) {
			}
		}()
	}
	<-ctx.Done()
	a.queue.ShutDown()
	for range attacherWorkers + 1 {
		<-done
	}
	f.Shutdown()
}

// next handles one queued attachment; false once the queue shuts down.
func (a *attacher) next(ctx context.Context) bool {
	name, quit := a.queue.Get()
	if quit {
		return false
	}
	defer a.queue.Done(name)
	if err := a.sync(ctx, name); err != nil {
		if ctx.Err() == nil {
			a.log.Warn("sync volume attachment", "volumeattachment", name, "error", err)
		}
		a.queue.AddRateLimited(name)
		return true
	}
	a.queue.Forget(name)
	return true
}

// sync brings one attachment to its wanted state.
func (a *attacher) sync(ctx context.Context, name string) error {
	va, err := a.vas.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get volume attachment %s: %w", name, err)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	fin := AttacherFinalizer(va.Spec.Attacher)
	// The sidecar consumes a forced sync whatever the outcome.
	forced := a.consumeForceSync(name)
	if va.DeletionTimestamp != nil {
		if !forced && !slices.Contains(va.Finalizers, fin) {
			return nil
		}
		return a.detach(ctx, va, fin)
	}
	if !forced && va.Status.Attached {
		return nil
	}
	if forced && va.Status.Attached {
		a.republished.Add(1)
		a.log.Info("re-publishing after reconcile", "volumeattachment", va.Name, "node", va.Spec.NodeName)
	}
	return a.attach(ctx, va, fin)
}

func (a *attacher) setForceSync(name string) {
	a.forceMu.Lock()
	defer a.forceMu.Unlock()
	if a.forceSync == nil {
		a.forceSync = map[string]bool{}
	}
	a.forceSync[name] = true
}

func (a *attacher) consumeForceSync(name string) bool {
	a.forceMu.Lock()
	defer a.forceMu.Unlock()
	s := a.forceSync[name]
	delete(a.forceSync, name)
	return s
}

// reconcileLoop reconciles, then waits the reconcile period, until ctx
// ends (wait.UntilWithContext in the sidecar: the first run at start).
func (a *attacher) reconcileLoop(ctx context.Context) {
	for {
		if err := a.reconcile(ctx); err != nil && ctx.Err() == nil {
			a.log.Warn("reconcile volume attachments", "error", err)
		}
		a.passes.Add(1)
		t := time.NewTimer(time.Duration(a.reconcileSync.Load()))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-a.wake:
			t.Stop()
		case <-t.C:
		}
	}
}

// reconcile is one ReconcileVA pass over every driver whose controller
// advertises LIST_VOLUMES_PUBLISHED_NODES.
func (a *attacher) reconcile(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	vas, err := a.vas.List(labels.Everything())
	if err != nil {
		return fmt.Errorf("list volume attachments: %w", err)
	}
	var errs []error
	for _, d := range a.driverNames() {
		c, ok := a.controllers.Lookup(d)
		if !ok {
			continue
		}
		lister, ok := c.(csidriver.PublishedNodesLister)
		if !ok {
			continue
		}
		published, ok, err := lister.ListVolumesPublishedNodes(ctx)
		if !ok {
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("ListVolumes of %s: %w", d, err))
			continue
		}
		for _, va := range vas {
			if va.Spec.Attacher != d {
				continue
			}
			nodeID, err := a.nodeID(va)
			if err != nil {
				continue
			}
			handle, _, err := a.volume(va)
			if err != nil {
				continue
			}
			found := slices.Contains(published[handle], nodeID)
			if va.Status.Attached != found {
				a.log.Info("attached status and ListVolumes differ: forcing a sync", "volumeattachment", va.Name,
					"volumeHandle", handle, "attached", va.Status.Attached, "found", found)
				a.setForceSync(va.Name)
				a.queue.Add(va.Name)
			}
		}
	}
	return errors.Join(errs...)
}

// volume reads the attachment's PersistentVolume: handle and whether its
// access modes allow several nodes.
func (a *attacher) volume(va *storagev1.VolumeAttachment) (handle string, multiNode bool, err error) {
	pvName := ""
	if va.Spec.Source.PersistentVolumeName != nil {
		pvName = *va.Spec.Source.PersistentVolumeName
	}
	obj, ok, err := a.pvs.GetByKey(pvName)
	if err != nil || !ok {
		return "", false, fmt.Errorf("persistent volume %q of %s not found (yet)", pvName, va.Name)
	}
	pv := obj.(*corev1.PersistentVolume)
	if pv.Spec.CSI == nil || pv.Spec.CSI.Driver != va.Spec.Attacher {
		return "", false, fmt.Errorf("persistent volume %s is not a %s volume", pvName, va.Spec.Attacher)
	}
	for _, m := range pv.Spec.AccessModes {
		multiNode = multiNode || m == corev1.ReadWriteMany || m == corev1.ReadOnlyMany
	}
	return pv.Spec.CSI.VolumeHandle, multiNode, nil
}

// nodeID is the node's CSI node ID for the driver, from its CSINode.
func (a *attacher) nodeID(va *storagev1.VolumeAttachment) (string, error) {
	n, err := a.nodes.Get(va.Spec.NodeName)
	if err != nil {
		return "", fmt.Errorf("CSINode %s: %w", va.Spec.NodeName, err)
	}
	for _, d := range n.Spec.Drivers {
		if d.Name == va.Spec.Attacher && d.NodeID != "" {
			return d.NodeID, nil
		}
	}
	return "", fmt.Errorf("CSINode %s has no node ID of %s", va.Spec.NodeName, va.Spec.Attacher)
}

// handles reports whether the attacher serves the driver: one of Dell's
// default names, or any driver with a registered controller (a further
// install under its own name, such as a second csi-powerstore).
func (a *attacher) handles(driver string) bool {
	if slices.Contains(a.drivers, driver) {
		return true
	}
	_, ok := a.controllers.Lookup(driver)
	return ok
}

// driverNames are Dell's default names and then every other driver with a
// registered controller, each once.
func (a *attacher) driverNames() []string {
	out := slices.Clone(a.drivers)
	for _, d := range a.controllers.Drivers() {
		if !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	return out
}

func (a *attacher) attach(ctx context.Context, va *storagev1.VolumeAttachment, fin string) error {
	c, ok := a.controllers.Lookup(va.Spec.Attacher)
	if !ok && !a.fake.Load() {
		err := fmt.Errorf("no CSI controller of %s runs in the test bed", va.Spec.Attacher)
		return errors.Join(err, a.setError(ctx, va, "attachError", err))
	}
	if ok && !slices.Contains(va.Finalizers, fin) {
		// The sidecar adds its finalizer before it publishes, so a volume
		// is never published without a detach to follow.
		cp := va.DeepCopy()
		cp.Finalizers = append(cp.Finalizers, fin)
		updated, err := a.cs.StorageV1().VolumeAttachments().Update(ctx, cp, metav1.UpdateOptions{})
		if err != nil {
			return fmt.Errorf("add finalizer to %s: %w", va.Name, err)
		}
		va = updated
	}
	if ok {
		err := a.publish(ctx, c, va)
		if err != nil {
			return errors.Join(err, a.setError(ctx, va, "attachError", err))
		}
	}
	// A merge patch: the attach/detach controller may have changed the
	// object since it was read, and the publish stands either way.
	if _, err := a.cs.StorageV1().VolumeAttachments().Patch(ctx, va.Name, types.MergePatchType,
		[]byte(`{"status":{"attached":true,"attachError":null}}`), metav1.PatchOptions{}, "status"); err != nil {
		return fmt.Errorf("mark %s attached: %w", va.Name, err)
	}
	a.log.Info("attached", "volumeattachment", va.Name, "node", va.Spec.NodeName, "controller", ok)
	return nil
}

func (a *attacher) publish(ctx context.Context, c csidriver.Controller, va *storagev1.VolumeAttachment) error {
	handle, multiNode, err := a.volume(va)
	if err != nil {
		return err
	}
	nodeID, err := a.nodeID(va)
	if err != nil {
		return err
	}
	if err := c.ControllerPublish(ctx, handle, nodeID, multiNode); err != nil {
		return fmt.Errorf("ControllerPublish %s to %s: %w", handle, va.Spec.NodeName, err)
	}
	return nil
}

func (a *attacher) detach(ctx context.Context, va *storagev1.VolumeAttachment, fin string) error {
	if c, ok := a.controllers.Lookup(va.Spec.Attacher); ok {
		handle, _, err := a.volume(va)
		if err == nil {
			var nodeID string
			if nodeID, err = a.nodeID(va); err == nil {
				err = c.ControllerUnpublish(ctx, handle, nodeID)
			}
		}
		if err != nil {
			err = fmt.Errorf("ControllerUnpublish %s from %s: %w", va.Name, va.Spec.NodeName, err)
			return errors.Join(err, a.setError(ctx, va, "detachError", err))
		}
	}
	cp := va.DeepCopy()
	cp.Finalizers = slices.DeleteFunc(cp.Finalizers, func(f string) bool { return f == fin })
	if _, err := a.cs.StorageV1().VolumeAttachments().Update(ctx, cp, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("remove finalizer from %s: %w", va.Name, err)
	}
	a.log.Info("detached", "volumeattachment", va.Name, "node", va.Spec.NodeName)
	return nil
}

// setError records an attach or detach error in the attachment's status,
// as the sidecar does.
func (a *attacher) setError(ctx context.Context, va *storagev1.VolumeAttachment, field string, cause error) error {
	patch, err := json.Marshal(map[string]any{"status": map[string]any{
		field: storagev1.VolumeError{Time: metav1.Now(), Message: cause.Error()}}})
	if err != nil {
		return fmt.Errorf("record %s of %s: %w", field, va.Name, err)
	}
	if _, err := a.cs.StorageV1().VolumeAttachments().Patch(ctx, va.Name, types.MergePatchType, patch,
		metav1.PatchOptions{}, "status"); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("record %s of %s: %w", field, va.Name, err)
	}
	return nil
}

// RegisterCSIController makes the attacher publish and unpublish the
// volumes of c.Driver() through c, and CreateStatefulSet provision their
// volumes with it.
func (cp *ControlPlane) RegisterCSIController(c csidriver.Controller) { cp.csi.Register(c) }

// CSIControllers returns the registered controllers.
func (cp *ControlPlane) CSIControllers() *csidriver.Registry { return cp.csi }

// AttachWithoutController makes the attacher mark attachments of drivers
// with no registered controller attached without any array change (the
// test bed's behaviour before it emulated the drivers). Off by default: a
// volume must be real.
func (cp *ControlPlane) AttachWithoutController(on bool) { cp.fakeAttach.Store(on) }

// DefaultAttacherReconcileSync is the external-attacher's default
// --reconcile-sync (cmd/csi-attacher/main.go).
const DefaultAttacherReconcileSync = time.Minute

// SetAttacherReconcileSync sets the attacher's reconcile period
// (--reconcile-sync, default DefaultAttacherReconcileSync); the next pass
// runs at once. It matters only for drivers whose emulated controller
// advertises LIST_VOLUMES_PUBLISHED_NODES (csidriver.PublishedNodesLister,
// e.g. csi-powerstore with the health monitor on). A period below 100 ms
// is taken as 100 ms.
func (cp *ControlPlane) SetAttacherReconcileSync(d time.Duration) {
	cp.reconcileSync.Store(int64(max(d, 100*time.Millisecond)))
	select {
	case cp.reconcileWake <- struct{}{}:
	default:
	}
}

// AttacherRepublished counts the publishes of already attached
// VolumeAttachments that the attacher's reconcile forced.
func (cp *ControlPlane) AttacherRepublished() int64 { return cp.republished.Load() }

// AttacherReconcilePasses counts the attacher's finished reconcile passes
// (each has queued whatever it found to re-sync).
func (cp *ControlPlane) AttacherReconcilePasses() int64 { return cp.reconcilePasses.Load() }

// startAttacher starts the attacher with its own identity, logging to
// csi-attacher.log in the control plane's directory.
func (cp *ControlPlane) startAttacher(token string) error {
	cs, err := kubernetes.NewForConfig(cp.RESTConfigFor(token))
	if err != nil {
		return fmt.Errorf("create attacher client: %w", err)
	}
	logf, err := os.OpenFile(cp.attacherLogPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("open attacher log: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	if cp.reconcileSync.Load() == 0 {
		cp.reconcileSync.Store(int64(DefaultAttacherReconcileSync))
	}
	a := &attacher{cs: cs, drivers: Drivers(), controllers: cp.csi, fake: &cp.fakeAttach,
		log: slog.New(slog.NewTextHandler(logf, nil)), reconcileSync: &cp.reconcileSync, wake: cp.reconcileWake,
		republished: &cp.republished, passes: &cp.reconcilePasses}
	go func() {
		defer close(done)
		defer logf.Close()
		a.run(ctx)
	}()
	cp.stopAttacher = func() {
		cancel()
		<-done
	}
	return nil
}

func (cp *ControlPlane) attacherLogPath() string { return filepath.Join(cp.Dir, "csi-attacher.log") }
