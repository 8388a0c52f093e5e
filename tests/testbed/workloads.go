package testbed

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/fenced-project/fenced/arrayclients"
)

// VolumeHandle returns a volume handle in the format the driver uses, for
// the n-th volume of a test (n >= 0):
//   - PowerFlex: <system ID>-<volume ID>;
//   - PowerStore: <volume UUID>/<array global ID>/<protocol>;
//   - PowerScale: <volume name>=_=_=<export ID>=_=_=<access zone>=_=_=<cluster name>;
//   - PowerMax: csi-<cluster prefix>-<volume name>-<symmetrix ID>-<device ID>;
//   - Unity: <volume name>-<protocol>-<array ID>-<LUN ID>.
//
// Array identifiers are fixed test values and no array holds the volumes:
// CreateStatefulSet uses these only for drivers without a registered
// controller when the test bed attaches without one
// (AttachWithoutController); a fenced node with such a volume is
// unprotected.
func VolumeHandle(driver string, n int) (string, error) {
	switch driver {
	case DriverPowerFlex:
		return fmt.Sprintf("7f5d8fa37e2a1c0f-%016x", 0x3c1e0b7a00000000+n), nil
	case DriverPowerStore:
		return fmt.Sprintf("0a6e2b34-5c1d-4f7e-9a8b-%012x/PS4ebb8d4e8488/scsi", n+1), nil
	case DriverPowerScale:
		return fmt.Sprintf("k8s-%08x=_=_=%d=_=_=System=_=_=isilon-cluster", n+1, n+1), nil
	case DriverPowerMax:
		return fmt.Sprintf("csi-TB-pmax-%08x-000197900123-%05X", n+1, n+1), nil
	case DriverUnity:
		return fmt.Sprintf("csivol-%08x-iSCSI-apm00123456789-sv_%d", n+1, n+1), nil
	}
	return "", fmt.Errorf("volume handle: unknown driver %q", driver)
}

// EnsureCSIDrivers creates a CSIDriver object with attachRequired=true for
// each Dell driver and each other driver with a registered controller (a
// further install under its own name), so the attach/detach controller
// creates VolumeAttachments for their volumes. Existing objects are left
// alone.
func (cp *ControlPlane) EnsureCSIDrivers(ctx context.Context) error {
	attach, podInfo := true, true
	names := Drivers()
	for _, d := range cp.csi.Drivers() {
		if !slices.Contains(names, d) {
			names = append(names, d)
		}
	}
	for _, d := range names {
		obj := &storagev1.CSIDriver{
			ObjectMeta: metav1.ObjectMeta{Name: d},
			Spec: storagev1.CSIDriverSpec{
				AttachRequired: &attach,
				PodInfoOnMount: &podInfo,
				VolumeLifecycleModes: []storagev1.VolumeLifecycleMode{
					storagev1.VolumeLifecyclePersistent,
				},
			},
		}
		if _, err := cp.Client.StorageV1().CSIDrivers().Create(ctx, obj, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create CSIDriver %s: %w", d, err)
		}
	}
	return nil
}

// StatefulSetSpec describes a StatefulSet whose pods each use one PVC bound
// to a static CSI PersistentVolume.
type StatefulSetSpec struct {
	// Namespace is created if missing. Default "default".
	Namespace string
	// Name of the StatefulSet; its pods carry the label app=<Name>.
	Name string
	// Replicas. Default 1.
	Replicas int32
	// Driver is the CSI driver of the volumes. Default DriverPowerFlex.
	Driver string
	// VolumeHandles are the handles of the PVs, one per replica. Default:
	// volumes provisioned with CreateVolume on the driver's registered
	// controller (see RegisterCSIController), named VolumeName.
	VolumeHandles []string
	// VolumeAttributes are set on every PV's CSI source.
	VolumeAttributes map[string]string
	// NFS provisions file systems exported over NFS (fsType "nfs", as the
	// drivers' NFS StorageClasses set it) instead of block volumes, on a
	// driver whose controller emulates NFS (PowerFlex, PowerStore, Unity).
	// PowerScale volumes are always NFS.
	NFS bool
	// ReadWriteMany gives the claims and volumes the ReadWriteMany access
	// mode instead of ReadWriteOnce (the drivers then publish without
	// their single-node check).
	ReadWriteMany bool
	// AntiAffinity requires the pods to run on different nodes
	// (kubernetes.io/hostname).
	AntiAffinity bool
	// NodeSelector is added to the pod template.
	NodeSelector map[string]string
	// Tolerations are added to the pod template.
	Tolerations []corev1.Toleration
}

// ClaimName returns the name of the PVC of replica i of a StatefulSet made
// by CreateStatefulSet.
func ClaimName(statefulSet string, i int) string {
	return fmt.Sprintf("data-%s-%d", statefulSet, i)
}

// PVName returns the name of the PV made for replica i.
func PVName(namespace, statefulSet string, i int) string {
	return fmt.Sprintf("pv-%s-%s-%d", namespace, statefulSet, i)
}

// CreateStatefulSet creates the namespace (if missing), the CSIDriver
// objects, one static CSI PersistentVolume per replica pre-bound to the PVC
// the StatefulSet will create (data-<name>-<i>), and the StatefulSet itself.
func (cp *ControlPlane) CreateStatefulSet(ctx context.Context, spec StatefulSetSpec) (*appsv1.StatefulSet, error) {
	if spec.Name == "" {
		return nil, fmt.Errorf("create statefulset: name is empty")
	}
	if spec.Namespace == "" {
		spec.Namespace = metav1.NamespaceDefault
	}
	if spec.Replicas == 0 {
		spec.Replicas = 1
	}
	if spec.Driver == "" {
		spec.Driver = DriverPowerFlex
	}
	mode := corev1.ReadWriteOnce
	if spec.ReadWriteMany {
		mode = corev1.ReadWriteMany
	}
	if spec.VolumeHandles == nil {
		hs, err := cp.provision(ctx, spec)
		if err != nil {
			return nil, fmt.Errorf("create statefulset %s/%s: %w", spec.Namespace, spec.Name, err)
		}
		spec.VolumeHandles = hs
	}
	if len(spec.VolumeHandles) != int(spec.Replicas) {
		return nil, fmt.Errorf("create statefulset %s: %d volume handles for %d replicas", spec.Name, len(spec.VolumeHandles), spec.Replicas)
	}
	if err := cp.EnsureNamespace(ctx, spec.Namespace); err != nil {
		return nil, err
	}
	if err := cp.EnsureCSIDrivers(ctx); err != nil {
		return nil, err
	}
	size := *resource.NewQuantity(volumeSize, resource.BinarySI)
	for i, h := range spec.VolumeHandles {
		pv := &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: PVName(spec.Namespace, spec.Name, i)},
			Spec: corev1.PersistentVolumeSpec{
				Capacity:                      corev1.ResourceList{corev1.ResourceStorage: size},
				AccessModes:                   []corev1.PersistentVolumeAccessMode{mode},
				PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
				StorageClassName:              "",
				ClaimRef: &corev1.ObjectReference{
					APIVersion: "v1", Kind: "PersistentVolumeClaim",
					Namespace: spec.Namespace, Name: ClaimName(spec.Name, i),
				},
				PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
					Driver:           spec.Driver,
					VolumeHandle:     h,
					FSType:           spec.fsType(),
					VolumeAttributes: spec.VolumeAttributes,
				}},
			},
		}
		if _, err := cp.Client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
			return nil, fmt.Errorf("create persistent volume %s: %w", pv.Name, err)
		}
	}

	labels := map[string]string{"app": spec.Name}
	// The claims are made here, bound to their volumes, before the
	// StatefulSet exists (it adopts claims by name). Left to the StatefulSet
	// controller, a pod could reach the scheduler before its claim reached
	// the scheduler's cache; on a loaded machine the scheduler then parked
	// the pod as unschedulable for minutes.
	claim := corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{mode},
			StorageClassName: ptr.To(""),
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: size}},
		},
	}
	for i := range spec.VolumeHandles {
		pvc := claim.DeepCopy()
		pvc.ObjectMeta = metav1.ObjectMeta{Name: ClaimName(spec.Name, i), Namespace: spec.Namespace, Labels: labels}
		pvc.Spec.VolumeName = PVName(spec.Namespace, spec.Name, i)
		if _, err := cp.Client.CoreV1().PersistentVolumeClaims(spec.Namespace).Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
			return nil, fmt.Errorf("create persistent volume claim %s/%s: %w", spec.Namespace, pvc.Name, err)
		}
	}
	if err := cp.waitClaimsBound(ctx, spec.Namespace, spec.Name, len(spec.VolumeHandles)); err != nil {
		return nil, err
	}
	pod := corev1.PodSpec{
		Containers: []corev1.Container{{
			Name:         "app",
			Image:        "registry.invalid/" + spec.Name + ":1",
			VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
		}},
		NodeSelector: spec.NodeSelector,
		Tolerations:  spec.Tolerations,
	}
	if spec.AntiAffinity {
		pod.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				LabelSelector: &metav1.LabelSelector{MatchLabels: labels},
				TopologyKey:   corev1.LabelHostname,
			}},
		}}
	}
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: spec.Name, Namespace: spec.Namespace, Labels: labels},
		Spec: appsv1.StatefulSetSpec{
			Replicas:            &spec.Replicas,
			ServiceName:         spec.Name,
			PodManagementPolicy: appsv1.ParallelPodManagement,
			Selector:            &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       pod,
			},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{claim},
		},
	}
	created, err := cp.Client.AppsV1().StatefulSets(spec.Namespace).Create(ctx, sts, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("create statefulset %s/%s: %w", spec.Namespace, spec.Name, err)
	}
	return created, nil
}

// VolumeName is the array-side name of the volume CreateStatefulSet
// provisions for replica i: "k8s-" and ten hex digits, the form and length
// csi-vxflexos gives its volumes (PowerFlex names are at most 31
// characters), used for every family.
func VolumeName(namespace, statefulSet string, i int) string {
	sum := sha256.Sum256([]byte(fmt.Sprintf("%s/%s/%d", namespace, statefulSet, i)))
	return "k8s-" + hex.EncodeToString(sum[:5])
}

// provision returns a volume handle per replica: volumes CreateVolume made
// on the driver's registered controller or, only when the test bed attaches
// without controllers (AttachWithoutController), handles VolumeHandle makes
// up that no array holds.
func (cp *ControlPlane) provision(ctx context.Context, spec StatefulSetSpec) ([]string, error) {
	c, ok := cp.csi.Lookup(spec.Driver)
	var out []string
	for i := range int(spec.Replicas) {
		if !ok {
			if !cp.fakeAttach.Load() {
				return nil, fmt.Errorf("no CSI controller of %s is registered (ControlPlane.RegisterCSIController) "+
					"and no volume handles were given", spec.Driver)
			}
			h, err := VolumeHandle(spec.Driver, i)
			if err != nil {
				return nil, err
			}
			out = append(out, h)
			continue
		}
		proto := arrayclients.ProtocolBlock
		if spec.NFS || spec.Driver == DriverPowerScale {
			proto = arrayclients.ProtocolNFS
		}
		h, err := c.CreateVolume(ctx, VolumeName(spec.Namespace, spec.Name, i), volumeSize, proto)
		if err != nil {
			return nil, fmt.Errorf("provision volume %d: %w", i, err)
		}
		out = append(out, h)
	}
	return out, nil
}

// volumeSize is the size of every volume CreateStatefulSet makes.
const volumeSize = 8 << 30

// waitClaimsBound waits until the n claims of a StatefulSet are Bound.
func (cp *ControlPlane) waitClaimsBound(ctx context.Context, namespace, statefulSet string, n int) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for i := range n {
		name := ClaimName(statefulSet, i)
		err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			c, err := cp.Client.CoreV1().PersistentVolumeClaims(namespace).Get(ctx, name, metav1.GetOptions{})
			return err == nil && c.Status.Phase == corev1.ClaimBound, nil
		})
		if err != nil {
			return fmt.Errorf("persistent volume claim %s/%s never bound: %w", namespace, name, err)
		}
	}
	return nil
}

// fsType is the filesystem of the StatefulSet's volumes: "nfs" for the
// NFS volumes of a block family, "" for PowerScale's exports (csi-isilon
// leaves it unset), else ext4.
func (spec StatefulSetSpec) fsType() string {
	switch {
	case spec.Driver == DriverPowerScale:
		return ""
	case spec.NFS:
		return "nfs"
	}
	return "ext4"
}

// EnsureNamespace creates a namespace if missing and waits for its default
// ServiceAccount, without which pods cannot be created.
func (cp *ControlPlane) EnsureNamespace(ctx context.Context, name string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := cp.Client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", name, err)
	}
	return cp.waitServiceAccount(ctx, name)
}

// PodsOnNode lists the pods of a namespace ("" for all) bound to a node.
func (cp *ControlPlane) PodsOnNode(ctx context.Context, namespace, node string) ([]corev1.Pod, error) {
	list, err := cp.Client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		return nil, fmt.Errorf("list pods on node %s: %w", node, err)
	}
	return list.Items, nil
}

// VolumeAttachmentsOfNode lists the VolumeAttachments for a node.
func (cp *ControlPlane) VolumeAttachmentsOfNode(ctx context.Context, node string) ([]storagev1.VolumeAttachment, error) {
	list, err := cp.Client.StorageV1().VolumeAttachments().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list volume attachments: %w", err)
	}
	var out []storagev1.VolumeAttachment
	for _, va := range list.Items {
		if va.Spec.NodeName == node {
			out = append(out, va)
		}
	}
	return out, nil
}
