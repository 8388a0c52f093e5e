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
// Requests the emulation makes should reach a simulator through a listener
// wrapped by Tag, so the simulator's audit log names them "csi/..." and
// the invariant checker can tell the driver's writes from fenced's.
package csidriver
