package csidriver

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	pmax "github.com/dell/gopowermax/v2"
	pmaxtypes "github.com/dell/gopowermax/v2/types/v100"

	"github.com/fenced-project/fenced/arrayclients"
)

// PowerMaxDriver is csi-powermax's default driver name.
const PowerMaxDriver = "csi-powermax.dellemc.com"

// powerMaxCylinder is a PowerMax cylinder in bytes.
const powerMaxCylinder = 1966080

// PowerMaxConfig is what the emulated csi-powermax controller knows of one
// array (the driver's secret, environment and StorageClass).
type PowerMaxConfig struct {
	// Driver is the CSI driver name. Default PowerMaxDriver.
	Driver string
	// Endpoint is the Unisphere URL.
	Endpoint, Username, Password string
	// SymmetrixID is the array (the StorageClass' SYMID).
	SymmetrixID string
	// ClusterPrefix is X_CSI_K8S_CLUSTER_PREFIX: hosts are
	// csi-node-<prefix>-<node ID>, volumes csi-<prefix>-<name>.
	ClusterPrefix string
	// SRP and ServiceLevel are the StorageClass' pool and service level.
	// Defaults SRP_1 and Diamond.
	SRP, ServiceLevel string
	// PortGroup is the port group of X_CSI_POWERMAX_PORTGROUPS the
	// driver puts into the masking views it creates for iSCSI hosts.
	PortGroup string
	// CAFile verifies Unisphere's certificate; Insecure skips that.
	CAFile   string
	Insecure bool
}

// PowerMax emulates the csi-powermax controller for one array, block
// volumes over iSCSI or FC. Node IDs are node names up to their first dot.
type PowerMax struct {
	cfg PowerMaxConfig
	// mu serialises the calls, as the driver's storage group service
	// does per storage group.
	mu sync.Mutex
	c  pmax.Pmax
}

// NewPowerMax builds the controller and logs in.
func NewPowerMax(ctx context.Context, cfg PowerMaxConfig) (*PowerMax, error) {
	if cfg.Driver == "" {
		cfg.Driver = PowerMaxDriver
	}
	if cfg.SRP == "" {
		cfg.SRP = "SRP_1"
	}
	if cfg.ServiceLevel == "" {
		cfg.ServiceLevel = "Diamond"
	}
	if cfg.Endpoint == "" || cfg.SymmetrixID == "" || cfg.ClusterPrefix == "" {
		return nil, fmt.Errorf("emulated %s: endpoint, symmetrixID and clusterPrefix are required: %w", cfg.Driver, ErrInvalid)
	}
	c, err := pmax.NewClientWithArgs(cfg.Endpoint, "csi-powermax", cfg.Insecure, false, cfg.CAFile)
	if err != nil {
		return nil, fmt.Errorf("emulated %s: build client for %s: %w", cfg.Driver, cfg.Endpoint, err)
	}
	if err := c.Authenticate(ctx, &pmax.ConfigConnect{Endpoint: cfg.Endpoint, Username: cfg.Username,
		Password: cfg.Password}); err != nil {
		return nil, fmt.Errorf("emulated %s: log in to %s: %w", cfg.Driver, cfg.Endpoint, err)
	}
	return &PowerMax{cfg: cfg, c: c}, nil
}

// Driver is the CSI driver name.
func (p *PowerMax) Driver() string { return p.cfg.Driver }

// CreateVolume creates a volume named csi-<prefix>-<name> in the
// provisioning storage group csi-<prefix>-<service level>-<SRP>-SG (made
// when missing) and returns "csi-<prefix>-<name>-<symmetrix ID>-<device
// ID>" (dell/csi-powermax service/controller.go CreateVolume and
// createCSIVolumeID). A volume of that identifier and size in the group is
// returned as it is. NFS (file systems) is not emulated.
func (p *PowerMax) CreateVolume(ctx context.Context, name string, size int64, protocol arrayclients.Protocol) (string, error) {
	if protocol != arrayclients.ProtocolBlock {
		return "", fmt.Errorf("emulated %s: create %s volume %s: %w", p.cfg.Driver, protocol, name, ErrUnsupported)
	}
	ident := "csi-" + p.cfg.ClusterPrefix + "-" + name
	if name == "" || size <= 0 || len(ident) > 64 {
		return "", fmt.Errorf("emulated %s: create volume %q of %d bytes: %w", p.cfg.Driver, name, size, ErrInvalid)
	}
	fail := func(err error) (string, error) {
		return "", fmt.Errorf("emulated %s: create volume %s: %w", p.cfg.Driver, name, err)
	}
	cyl := int((size + powerMaxCylinder - 1) / powerMaxCylinder)
	sym := p.cfg.SymmetrixID
	sg := fmt.Sprintf("csi-%s-%s-%s-SG", p.cfg.ClusterPrefix, p.cfg.ServiceLevel, p.cfg.SRP)
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, err := p.c.GetStorageGroup(ctx, sym, sg); err != nil {
		if _, err := p.c.CreateStorageGroup(ctx, sym, sg, p.cfg.SRP, p.cfg.ServiceLevel, false, nil); err != nil {
			return fail(fmt.Errorf("create storage group %s: %w", sg, err))
		}
	}
	ids, err := p.c.GetVolumeIDList(ctx, sym, ident, false)
	if err != nil {
		return fail(fmt.Errorf("look up volume %s: %w", ident, err))
	}
	for _, id := range ids {
		v, err := p.c.GetVolumeByID(ctx, sym, id)
		if err != nil {
			return fail(fmt.Errorf("read volume %s: %w", id, err))
		}
		if v.VolumeIdentifier == ident && slices.Contains(v.StorageGroupIDList, sg) {
			if v.CapacityCYL != cyl {
				return fail(fmt.Errorf("a volume with the same name exists but has a different size: %w", ErrInvalid))
			}
			return ident + "-" + sym + "-" + v.VolumeID, nil
		}
	}
	v, err := p.c.CreateVolumeInStorageGroupS(ctx, sym, sg, ident, cyl, nil)
	if err != nil {
		return fail(fmt.Errorf("create volume in storage group %s: %w", sg, err))
	}
	return ident + "-" + sym + "-" + v.VolumeID, nil
}

// volumeOf reads the handle's volume as the driver does
// (service/controller.go parseCsiID, GetVolumeByID): the last two "-"
// tokens are the array and the device; the volume identifier must be the
// name before them. A handle of another array is refused.
func (p *PowerMax) volumeOf(ctx context.Context, handle string) (*pmaxtypes.Volume, error) {
	loc, err := arrayclients.ParseVolumeHandle(arrayclients.PowerMax, handle, "ext4")
	switch {
	case err != nil:
		return nil, fmt.Errorf("volume handle %q: %w: %w", handle, ErrInvalid, err)
	case loc.Protocol != arrayclients.ProtocolBlock || loc.Remote != nil:
		return nil, fmt.Errorf("volume %s (file system or SRDF): %w", handle, ErrUnsupported)
	case loc.ArrayID != p.cfg.SymmetrixID:
		return nil, fmt.Errorf("volume handle %q names array %s, not %s: %w", handle, loc.ArrayID, p.cfg.SymmetrixID, ErrInvalid)
	}
	v, err := p.c.GetVolumeByID(ctx, loc.ArrayID, loc.Object)
	if pmaxtypes.IsNotFoundError(err) || (err != nil && strings.Contains(err.Error(), "Cannot find")) {
		return nil, fmt.Errorf("volume %s: %w", loc.Object, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("read volume %s: %w", loc.Object, err)
	}
	if v.VolumeIdentifier != loc.Name {
		return nil, fmt.Errorf("volume %s is %q, not %q: %w", loc.Object, v.VolumeIdentifier, loc.Name, ErrInvalid)
	}
	return v, nil
}

// target is the node's host, storage group and masking view
// (service/controller.go IsNodeISCSI, GetHostSGAndMVIDFromNodeID): the FC
// host's when its view or host exists, else the iSCSI one's.
//
// The node ID is used whole, as the controller takes it
// (ControllerPublishVolume passes req.GetNodeId() on): the node plugin
// already cut the node's name at its first dot (service/service.go
// BeforeServe, NodeGetInfo), so a CSINode holding a dotted name names a
// host the driver never made.
func (p *PowerMax) target(ctx context.Context, nodeID string) (host, sg, mv string, err error) {
	node := nodeID
	if node == "" {
		return "", "", "", fmt.Errorf("node ID %q is empty: %w", nodeID, ErrInvalid)
	}
	base := p.cfg.ClusterPrefix + "-" + node
	for _, suffix := range []string{"-FC", ""} {
		host, sg, mv = "csi-node-"+base+suffix, "csi-no-srp-sg-"+base+suffix, "csi-mv-"+base+suffix
		if _, err := p.c.GetMaskingViewByID(ctx, p.cfg.SymmetrixID, mv); err == nil {
			return host, sg, mv, nil
		}
	}
	for _, suffix := range []string{"-FC", ""} {
		host, sg, mv = "csi-node-"+base+suffix, "csi-no-srp-sg-"+base+suffix, "csi-mv-"+base+suffix
		if _, err := p.c.GetHostByID(ctx, p.cfg.SymmetrixID, host); err == nil {
			return host, sg, mv, nil
		}
	}
	return "", "", "", fmt.Errorf("no host csi-node-%s[-FC] for node %s: %w", base, nodeID, ErrNotFound)
}

// views lists the masking views of the volume's storage groups
// (service/controller.go GetMaskingViewAndSGDetails).
func (p *PowerMax) views(ctx context.Context, v *pmaxtypes.Volume) ([]string, error) {
	var out []string
	for _, id := range v.StorageGroupIDList {
		sg, err := p.c.GetStorageGroup(ctx, p.cfg.SymmetrixID, id)
		if err != nil {
			return nil, fmt.Errorf("read storage group %s: %w", id, err)
		}
		out = append(out, sg.MaskingView...)
	}
	return out, nil
}

// ControllerPublish puts the volume into the node's storage group
// (service/storage_group_svc.go addVolumeToSGMVVolumeCheck and
// addVolumesToSGMV): in it and its view already succeeds; masked anywhere
// else (front-end paths through another view) refuses a single-node
// volume ("volume already present in a different masking view"). Without
// the node's masking view the storage group is made (no SRP) and the view
// created with the configured port group, as the driver does; the driver
// adds the volume there with an asynchronous job, the emulation
// synchronously (the simulator has no jobs).
func (p *PowerMax) ControllerPublish(ctx context.Context, handle, nodeID string, multiNode bool) error {
	fail := func(err error) error {
		return fmt.Errorf("emulated %s: publish %s to %s: %w", p.cfg.Driver, handle, nodeID, err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	v, err := p.volumeOf(ctx, handle)
	if err != nil {
		return fail(err)
	}
	host, sgID, mvID, err := p.target(ctx, nodeID)
	if err != nil {
		return fail(err)
	}
	sym := p.cfg.SymmetrixID
	inSG := slices.Contains(v.StorageGroupIDList, sgID)
	mvs, err := p.views(ctx, v)
	if err != nil {
		return fail(err)
	}
	if !multiNode && v.NumberOfFrontEndPaths > 0 {
		switch {
		case len(mvs) == 0:
			return fail(errors.New("no masking views found for volume"))
		case len(mvs) > 1:
			return fail(fmt.Errorf("volume already part of multiple masking views %v: %w", mvs, ErrAlreadyPublished))
		case mvs[0] == mvID && inSG:
			return nil
		case mvs[0] == mvID:
			return fail(errors.New("volume in conflicting masking view"))
		default:
			return fail(fmt.Errorf("volume already present in a different masking view (%s): %w", mvs[0], ErrAlreadyPublished))
		}
	}
	if inSG && slices.Contains(mvs, mvID) {
		return nil
	}
	mv, err := p.c.GetMaskingViewByID(ctx, sym, mvID)
	if err == nil {
		if !strings.EqualFold(mv.HostID, host) || !strings.EqualFold(mv.StorageGroupID, sgID) {
			return fail(fmt.Errorf("existing masking view %s with conflicting storage group %s or host %s", mvID, mv.StorageGroupID, mv.HostID))
		}
		if !inSG {
			if err := p.c.AddVolumesToStorageGroupS(ctx, sym, sgID, true, v.VolumeID); err != nil {
				return fail(fmt.Errorf("add volume %s to storage group %s: %w", v.VolumeID, sgID, err))
			}
		}
		return nil
	}
	if _, err := p.c.GetHostByID(ctx, sym, host); err != nil {
		return fail(fmt.Errorf("host %s: %w: %w", host, ErrNotFound, err))
	}
	if p.cfg.PortGroup == "" {
		return fail(fmt.Errorf("no port group configured for the masking view %s: %w", mvID, ErrInvalid))
	}
	if sg, err := p.c.GetStorageGroup(ctx, sym, sgID); err == nil {
		if sg.SRP != "" {
			return fail(fmt.Errorf("storage group %s exists with same name but with conflicting params", sgID))
		}
	} else if _, err := p.c.CreateStorageGroup(ctx, sym, sgID, "None", "", false, nil); err != nil {
		return fail(fmt.Errorf("create storage group %s: %w", sgID, err))
	}
	if !inSG {
		if err := p.c.AddVolumesToStorageGroupS(ctx, sym, sgID, true, v.VolumeID); err != nil {
			return fail(fmt.Errorf("add volume %s to storage group %s: %w", v.VolumeID, sgID, err))
		}
	}
	if _, err := p.c.CreateMaskingView(ctx, sym, mvID, sgID, host, true, p.cfg.PortGroup); err != nil {
		return fail(fmt.Errorf("create masking view %s: %w", mvID, err))
	}
	return nil
}

// ControllerUnpublish takes the volume out of the node's storage group
// (service/controller.go unpublishVolume, service/storage_group_svc.go
// removeVolumesFromSGMV): a volume that is gone, not in the group, or in a
// group outside the node's view succeeds; the view is deleted first when
// the volume is the group's last, and the emptied group after.
func (p *PowerMax) ControllerUnpublish(ctx context.Context, handle, nodeID string) error {
	fail := func(err error) error {
		return fmt.Errorf("emulated %s: unpublish %s from %s: %w", p.cfg.Driver, handle, nodeID, err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	v, err := p.volumeOf(ctx, handle)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return fail(err)
	}
	node, _, _ := strings.Cut(nodeID, ".")
	base := p.cfg.ClusterPrefix + "-" + node
	var sgID, mvID string
	for _, suffix := range []string{"-FC", ""} {
		if slices.Contains(v.StorageGroupIDList, "csi-no-srp-sg-"+base+suffix) {
			sgID, mvID = "csi-no-srp-sg-"+base+suffix, "csi-mv-"+base+suffix
			break
		}
	}
	if sgID == "" {
		return nil
	}
	sym := p.cfg.SymmetrixID
	sg, err := p.c.GetStorageGroup(ctx, sym, sgID)
	if err != nil {
		return fail(fmt.Errorf("read storage group %s: %w", sgID, err))
	}
	if !slices.Contains(sg.MaskingView, mvID) {
		return nil
	}
	deleted := false
	if sg.NumOfVolumes == 1 {
		if err := p.c.DeleteMaskingView(ctx, sym, mvID); err != nil {
			return fail(fmt.Errorf("delete masking view %s: %w", mvID, err))
		}
		deleted = true
	}
	if _, err := p.c.RemoveVolumesFromStorageGroup(ctx, sym, sgID, true, v.VolumeID); err != nil {
		return fail(fmt.Errorf("remove volume %s from storage group %s: %w", v.VolumeID, sgID, err))
	}
	if deleted {
		// The driver only logs a failure here.
		_ = p.c.DeleteStorageGroup(ctx, sym, sgID)
	}
	return nil
}
