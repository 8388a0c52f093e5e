package testbed

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"time"

	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// AttacherUser is the user the test bed's attacher writes as.
const AttacherUser = "testbed-csi-attacher"

// attacher stands in for the CSI external-attacher sidecar of the Dell
// drivers, which the test bed does not run (there is no CSI controller to
// call): it marks every VolumeAttachment of a Dell driver attached, as the
// sidecar does once ControllerPublishVolume succeeds. Detach needs nothing:
// the attach/detach controller deletes the VolumeAttachment and, with no
// finalizer on it, the object is gone at once.
//
// Without it every attach times out after two minutes; the attach/detach
// controller then deletes the VolumeAttachment and creates it again, so
// attachments of live nodes would come and go all the time.
type attacher struct {
	cs      kubernetes.Interface
	drivers []string
	log     *slog.Logger
}

// run marks attachments until ctx ends. Failed patches are retried on the
// informer's next resync.
func (a *attacher) run(ctx context.Context) {
	f := informers.NewSharedInformerFactory(a.cs, 10*time.Second)
	inf := f.Storage().V1().VolumeAttachments().Informer()
	handle := func(obj any) {
		va, ok := obj.(*storagev1.VolumeAttachment)
		if !ok || va.Status.Attached || va.DeletionTimestamp != nil || !slices.Contains(a.drivers, va.Spec.Attacher) {
			return
		}
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_, err := a.cs.StorageV1().VolumeAttachments().Patch(pctx, va.Name, types.MergePatchType,
			[]byte(`{"status":{"attached":true}}`), metav1.PatchOptions{}, "status")
		if err != nil {
			a.log.Warn("mark attached", "volumeattachment", va.Name, "node", va.Spec.NodeName, "error", err)
			return
		}
		a.log.Info("attached", "volumeattachment", va.Name, "node", va.Spec.NodeName)
	}
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    handle,
		UpdateFunc: func(_, obj any) { handle(obj) },
	})
	f.Start(ctx.Done())
	<-ctx.Done()
	f.Shutdown()
}

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
	a := &attacher{cs: cs, drivers: Drivers(), log: slog.New(slog.NewTextHandler(logf, nil))}
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
