// Package testbed runs a real Kubernetes control plane for tests: etcd,
// kube-apiserver (token authentication, RBAC and an audit log),
// kube-controller-manager and kube-scheduler, with kwok playing the kubelets
// of simulated worker nodes. The nodes' Leases are renewed by the kubelet's
// own lease controller, run here per node (see heartbeat.go for why not
// kwok's).
//
// The binaries are built from their Go modules by the tools modules under
// tests/tools into the git-ignored directory .cache/k8s/<version key>/bin at
// the repository root. [EnsureBinaries] builds them once, under a file lock,
// so that test binaries running in parallel do not build twice; [Start]
// calls it, so tests work on a fresh clone with only Go installed.
//
// Everything a fencing test does to the cluster goes through the real API:
// nodes with their own loopback InternalIP, boot ID and CSINode (see
// [ControlPlane.AddNodes]), a TCP listener per node at the kubelet port,
// StatefulSets whose pods use static CSI volumes of the Dell drivers (see
// [ControlPlane.CreateStatefulSet]), node faults ([Node.Kill], [Node.Hang],
// [Node.Return], [Node.Reboot]) and the apiserver's audit log
// ([ControlPlane.AuditEvents]).
//
// No CSI driver runs; an in-process attacher (user [AttacherUser], log
// csi-attacher.log) plays the Dell drivers' external-attacher sidecar with
// the emulated controllers of package csidriver behind it
// ([ControlPlane.RegisterCSIController]): it publishes each
// VolumeAttachment's volume on the simulated array, under the sidecar's
// finalizer, and unpublishes it when the attachment is deleted, so array
// state changes between a fence and an unfence as it does under the real
// drivers, "already published" refusals included. CreateStatefulSet
// provisions the volumes with the same controllers.
package testbed
