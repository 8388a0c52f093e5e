// Package csidriver emulates the controller half of Dell's CSI drivers
// against the array simulators (tests/arraysim), through the same Dell Go
// client libraries the drivers use: CreateVolume provisions a volume on a
// simulated array and returns the handle in the driver's exact format;
// ControllerPublish and ControllerUnpublish give a node access to a volume
// and take it away as the driver does, including the driver's refusal to
// publish a single-node volume the array still gives to another node.
//
// The test bed's attacher (tests/testbed) calls these controllers for
// every VolumeAttachment, so the arrays change between a fence and an
// unfence exactly as they would under the real drivers. Each controller
// cites the driver source it mirrors. Emulated: block volumes of
// PowerFlex, PowerStore, PowerMax and Unity; NFS volumes of PowerFlex
// and PowerStore (file systems and their export host lists) and of Unity
// (file systems and their shares); and PowerScale NFS exports.
//
// The emulation keeps the drivers' ways of giving a node access that
// nobody asked for, because a fence must hold against them: csi-vxflexos
// NFS with interfaceNames adds every node's IPs on each publish
// (PowerFlex.SetInterfaceIPs), both csi-vxflexos and csi-powerstore add a
// configured external-access entry beside the node's IP, and
// csi-powerstore with the health monitor answers ListVolumes with NFS
// volumes published to no node (PublishedNodesLister), so the test bed's
// attacher re-publishes them on every reconcile.
//
// A family may run as several driver instances: ForSimAs starts an
// emulated csi-powerstore under its own driver name (a second install),
// whose NodeStart registers a node's host on its own array under the node
// ID that instance reports (its own nodeNamePrefix); the test bed files
// that ID in the node's CSINode under the instance's name
// (testbed.NodeSpec.PowerStoreInstances), as the kubelet does for every
// driver whose node plugin runs on the node.
//
// Requests the emulation makes should reach a simulator through a listener
// wrapped by Tag, so the simulator's audit log names them "csi/..." and
// the invariant checker can tell the driver's writes from fenced's.
package csidriver
