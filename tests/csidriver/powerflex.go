package csidriver

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"

	"github.com/dell/goscaleio"
	siotypes "github.com/dell/goscaleio/types/v1"

	"github.com/fenced-project/fenced/arrayclients"
)

// PowerFlexDriver is csi-vxflexos' driver name.
const PowerFlexDriver = "csi-vxflexos.dellemc.com"

// PowerFlexConfig is what the emulated csi-vxflexos controller knows of
// one system (the driver's secret).
type PowerFlexConfig struct {
	// Driver is the CSI driver name. Default PowerFlexDriver.
	Driver string
	// Endpoint is the gateway URL.
	Endpoint, Username, Password string
	// SystemID is the system's ID; handles are "<SystemID>-<volume ID>".
	SystemID string
	// StoragePool is the pool volumes are created in (the StorageClass'
	// storagepool). Default "pool1", the simulator's.
	StoragePool string
	// Version is the gateway's API version ("4.5"). Giving it keeps
	// goscaleio from discovering it at login, which writes the library's
	// package-level headers.
	Version string
	// CAFile verifies the gateway's certificate; Insecure skips that.
	CAFile   string
	Insecure bool
	// NasName is the NAS server NFS volumes are created on (the secret's
	// or StorageClass' nasName). Default "nas1", the simulator's.
	NasName string
	// InterfaceIPs is the driver ConfigMap's interfaceNames once the node
	// plugins have written their interfaces' IPs into it: node name to
	// comma-separated IPs. It is one map for the whole driver instance,
	// read by every publish and unpublish (findNetworkInterfaceIPs reads
	// the ConfigMap each time); SetInterfaceIPs changes it as a node
	// plugin's start would. Empty: NFS publish uses the node's SDC IPs.
	InterfaceIPs map[string]string
	// ExternalAccess is X_CSI_POWERFLEX_EXTERNAL_ACCESS: an IP or CIDR
	// that every NFS publish adds beside the node's IPs (as
	// "<first address>/<dotted mask>", service/service.go ParseCIDR) and
	// that no unpublish removes. Empty: none.
	ExternalAccess string
}

// PowerFlex emulates the csi-vxflexos controller for one system: block
// volumes mapped to the node's SDC (node ID = SDC GUID) or, for an
// NVMe/TCP node, to its NVMe host (node ID = the host's name), and NFS volumes
// (PowerFlex file) whose export lists the node's IPs (powerflex_nfs.go).
type PowerFlex struct {
	cfg PowerFlexConfig
	// mu serialises the calls: a goscaleio client serves one call at a
	// time (Client.WithContext keeps the context in the client).
	mu  sync.Mutex
	c   *goscaleio.Client
	sys *goscaleio.System
}

// NewPowerFlex builds the controller and logs in. goscaleio writes its
// version headers into package variables when a client is built: build
// controllers before anything else in the process uses goscaleio.
func NewPowerFlex(ctx context.Context, cfg PowerFlexConfig) (*PowerFlex, error) {
	if cfg.Driver == "" {
		cfg.Driver = PowerFlexDriver
	}
	if cfg.StoragePool == "" {
		cfg.StoragePool = "pool1"
	}
	if cfg.Version == "" {
		cfg.Version = "4.5"
	}
	if cfg.NasName == "" {
		cfg.NasName = "nas1"
	}
	if cfg.SystemID == "" || cfg.Endpoint == "" {
		return nil, fmt.Errorf("emulated %s: endpoint and systemID are required: %w", cfg.Driver, ErrInvalid)
	}
	if cfg.ExternalAccess != "" {
		// The driver logs a bad value and runs without one; a test
		// that set one means it, so it is refused here.
		entry, err := externalAccessEntry(cfg.ExternalAccess)
		if err != nil {
			return nil, fmt.Errorf("emulated %s: externalAccess: %w", cfg.Driver, err)
		}
		cfg.ExternalAccess = entry
	}
	cfg.InterfaceIPs = maps.Clone(cfg.InterfaceIPs)
	c, err := goscaleio.NewClientWithArgs(cfg.Endpoint, cfg.Version, 10, cfg.Insecure, false, cfg.CAFile)
	if err != nil {
		return nil, fmt.Errorf("emulated %s: build client for %s: %w", cfg.Driver, cfg.Endpoint, err)
	}
	if _, err := c.WithContext(ctx).Authenticate(&goscaleio.ConfigConnect{Endpoint: cfg.Endpoint,
		Username: cfg.Username, Password: cfg.Password, Version: cfg.Version}); err != nil {
		return nil, fmt.Errorf("emulated %s: log in to %s: %w", cfg.Driver, cfg.Endpoint, err)
	}
	sys, err := c.WithContext(ctx).FindSystem(cfg.SystemID, "", "")
	if err != nil {
		return nil, fmt.Errorf("emulated %s: find system %s: %w", cfg.Driver, cfg.SystemID, err)
	}
	return &PowerFlex{cfg: cfg, c: c, sys: sys}, nil
}

// SetInterfaceIPs sets the node's entry of the driver ConfigMap's
// interfaceNames (comma-separated IPs; empty removes it), as the node
// plugin of that node does when it starts. Every later publish and
// unpublish of an NFS volume, to any node, uses the whole map.
func (p *PowerFlex) SetInterfaceIPs(node, ips string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if ips == "" {
		delete(p.cfg.InterfaceIPs, node)
		return
	}
	if p.cfg.InterfaceIPs == nil {
		p.cfg.InterfaceIPs = map[string]string{}
	}
	p.cfg.InterfaceIPs[node] = ips
}

// Driver is the CSI driver name.
func (p *PowerFlex) Driver() string { return p.cfg.Driver }

// SystemID is the system the controller provisions on.
func (p *PowerFlex) SystemID() string { return p.cfg.SystemID }

// CreateVolume creates a block volume in the storage pool, its size
// rounded up to the 8 GiB granularity of PowerFlex, and returns
// "<systemID>-<volumeID>" (dell/csi-powerflex service/controller.go
// CreateVolume and getCSIVolume). A name in use returns the existing
// volume (the driver looks it up by name). An NFS volume is a file system
// (createFileSystem).
func (p *PowerFlex) CreateVolume(ctx context.Context, name string, size int64, protocol arrayclients.Protocol) (string, error) {
	switch protocol {
	case arrayclients.ProtocolNFS:
		return p.createFileSystem(ctx, name, size)
	case arrayclients.ProtocolBlock:
	default:
		return "", fmt.Errorf("emulated %s: create %s volume %s: %w", p.cfg.Driver, protocol, name, ErrUnsupported)
	}
	if name == "" {
		return "", fmt.Errorf("emulated %s: create volume: name is empty: %w", p.cfg.Driver, ErrInvalid)
	}
	const granule = 8 << 30
	if size < granule {
		size = granule
	}
	size = (size + granule - 1) / granule * granule
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.c.WithContext(ctx)
	resp, err := c.CreateVolume(&siotypes.VolumeParam{Name: name, VolumeSizeInKb: fmt.Sprint(size / 1024),
		VolumeType: "ThinProvisioned"}, p.cfg.StoragePool, "")
	var id string
	switch {
	case err == nil:
		id = resp.ID
	case strings.EqualFold(err.Error(), "Volume name already in use. Please use a different name."):
		if id, err = c.FindVolumeID(name); err != nil {
			return "", fmt.Errorf("emulated %s: find existing volume %s: %w", p.cfg.Driver, name, err)
		}
	default:
		return "", fmt.Errorf("emulated %s: create volume %s in pool %s: %w", p.cfg.Driver, name, p.cfg.StoragePool, err)
	}
	return p.cfg.SystemID + "-" + id, nil
}

// volumeOf splits a block handle as csi-powerflex does (service/service.go
// getVolumeIDFromCsiVolumeID, getSystemIDFromCsiVolumeID): the volume ID
// is the last "-" token, the system the first when there are exactly two.
// A handle of another system is refused.
func (p *PowerFlex) volumeOf(handle string) (string, error) {
	tokens := strings.Split(handle, "-")
	id := tokens[len(tokens)-1]
	if id == "" {
		return "", fmt.Errorf("volume handle %q: %w", handle, ErrInvalid)
	}
	if len(tokens) == 2 && tokens[0] != p.cfg.SystemID {
		return "", fmt.Errorf("volume handle %q names system %s, not %s: %w", handle, tokens[0], p.cfg.SystemID, ErrInvalid)
	}
	return id, nil
}

// volume reads a volume by ID; a missing one is ErrNotFound. The caller
// holds p.mu.
func (p *PowerFlex) volume(ctx context.Context, id string) (*siotypes.Volume, error) {
	vols, err := p.c.WithContext(ctx).GetVolume("", id, "", "", false)
	if err != nil {
		if strings.EqualFold(err.Error(), "Could not find the volume") {
			return nil, fmt.Errorf("volume %s: %w", id, ErrNotFound)
		}
		return nil, fmt.Errorf("read volume %s: %w", id, err)
	}
	if len(vols) != 1 {
		return nil, fmt.Errorf("volume %s: %w", id, ErrNotFound)
	}
	return vols[0], nil
}

// sdcID finds the node's SDC by GUID (service/service.go getSDCID). The
// caller holds p.mu.
func (p *PowerFlex) sdcID(ctx context.Context, nodeID string) (string, error) {
	p.c.WithContext(ctx) // the system calls through the same client
	sdc, err := p.sys.FindSdc("SdcGUID", strings.ToUpper(nodeID))
	if err != nil {
		return "", fmt.Errorf("SDC with GUID %s: %w: %w", nodeID, ErrNotFound, err)
	}
	return sdc.Sdc.ID, nil
}

// pflexHost is the node's host on the array: an SDC, or an NVMe host.
type pflexHost struct {
	id, name string
	nvme     bool
}

// hostOf finds the node's host as the controller does
// (service/service.go getHostIDAndType): the SDC whose GUID is the node
// ID, else the host (an NVMe host, listed among the SDCs) whose name is
// the node ID (FindSdc("Name", nodeID)). The caller holds p.mu.
func (p *PowerFlex) hostOf(ctx context.Context, nodeID string) (pflexHost, error) {
	id, err := p.sdcID(ctx, nodeID)
	if err == nil {
		return pflexHost{id: id}, nil
	}
	p.c.WithContext(ctx)
	h, nerr := p.sys.FindSdc("Name", nodeID)
	if nerr != nil {
		return pflexHost{}, fmt.Errorf("no SDC or NVMe host for node ID %s: %w: %w", nodeID, ErrNotFound, errors.Join(err, nerr))
	}
	return pflexHost{id: h.Sdc.ID, name: h.Sdc.Name, nvme: h.Sdc.HostType == "NVMeHost"}, nil
}

// ControllerPublish maps a block volume to the node's SDC
// (service/publisher.go SDCPublisher.Publish): already mapped to it
// succeeds; mapped to another SDC is refused for a single-node volume;
// otherwise addMappedSdc, with allowMultipleMappings for a multi-node one.
// A node whose node ID names an NVMe host publishes over NVMe/TCP
// (NVMePublisher.Publish): already mapped to the host (by name) succeeds;
// mapped to any other SDC or NVMe host is refused for a single-node
// volume; otherwise MapVolumeNVMe (addMappedHost with hostId).
// An NFS volume's export gets the node's IPs (exportFilesystem).
func (p *PowerFlex) ControllerPublish(ctx context.Context, handle, nodeID string, multiNode bool) error {
	if strings.Contains(handle, "/") {
		return p.exportFilesystem(ctx, handle, nodeID, multiNode)
	}
	id, err := p.volumeOf(handle)
	if err != nil {
		return fmt.Errorf("emulated %s: publish: %w", p.cfg.Driver, err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	vol, err := p.volume(ctx, id)
	if err != nil {
		return fmt.Errorf("emulated %s: publish %s to %s: %w", p.cfg.Driver, handle, nodeID, err)
	}
	host, err := p.hostOf(ctx, nodeID)
	if err != nil {
		return fmt.Errorf("emulated %s: publish %s to %s: %w", p.cfg.Driver, handle, nodeID, err)
	}
	if host.nvme {
		return p.publishNVMe(ctx, vol, host, handle, nodeID, multiNode)
	}
	sdc := host.id
	for _, m := range vol.MappedSdcInfo {
		if m.SdcID == sdc {
			return nil
		}
	}
	if len(vol.MappedSdcInfo) > 0 && !multiNode {
		return fmt.Errorf("emulated %s: publish %s to %s: volume already published to SDC id: %s: %w",
			p.cfg.Driver, handle, nodeID, vol.MappedSdcInfo[0].SdcID, ErrAlreadyPublished)
	}
	allow := "FALSE"
	if multiNode {
		allow = "TRUE"
	}
	tv := goscaleio.NewVolume(p.c.WithContext(ctx))
	tv.Volume = &siotypes.Volume{ID: vol.ID}
	if err := tv.MapVolumeSdc(&siotypes.MapVolumeSdcParam{SdcID: sdc, AllowMultipleMappings: allow}); err != nil {
		return fmt.Errorf("emulated %s: publish %s to %s: error mapping volume to node: %w", p.cfg.Driver, handle, nodeID, err)
	}
	return nil
}

// ControllerUnpublish unmaps a block volume from the node's SDC, or from
// its NVMe host with RemoveMappedHost (service/controller.go
// ControllerUnpublishVolume): a deleted volume or one not mapped to the
// host succeeds. An NFS volume's export loses the
// node's IPs (unexportFilesystem).
func (p *PowerFlex) ControllerUnpublish(ctx context.Context, handle, nodeID string) error {
	if strings.Contains(handle, "/") {
		return p.unexportFilesystem(ctx, handle, nodeID)
	}
	id, err := p.volumeOf(handle)
	if err != nil {
		return fmt.Errorf("emulated %s: unpublish: %w", p.cfg.Driver, err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	vol, err := p.volume(ctx, id)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("emulated %s: unpublish %s from %s: %w", p.cfg.Driver, handle, nodeID, err)
	}
	host, err := p.hostOf(ctx, nodeID)
	if err != nil {
		return fmt.Errorf("emulated %s: unpublish %s from %s: %w", p.cfg.Driver, handle, nodeID, err)
	}
	sdc := host.id
	mapped := false
	for _, m := range vol.MappedSdcInfo {
		mapped = mapped || m.SdcID == sdc
	}
	if !mapped {
		return nil
	}
	tv := goscaleio.NewVolume(p.c.WithContext(ctx))
	tv.Volume = vol
	if host.nvme {
		if err := tv.RemoveMappedHost(&siotypes.UnmapVolumeNVMeParam{HostID: host.id}); err != nil {
			return fmt.Errorf("emulated %s: unpublish %s from %s: Error unmapping volume from NVMe host: %w", p.cfg.Driver, handle, nodeID, err)
		}
		return nil
	}
	if err := tv.UnmapVolumeSdc(&siotypes.UnmapVolumeSdcParam{SdcID: sdc}); err != nil {
		return fmt.Errorf("emulated %s: unpublish %s from %s: %w", p.cfg.Driver, handle, nodeID, err)
	}
	return nil
}

// publishNVMe is NVMePublisher.Publish (service/publisher.go): the
// mapping to the NVMe host is recognised by host name; any other mapping
// refuses a single-node volume ("volume already published to NVMe host");
// otherwise MapVolumeNVMe with the host ID and allowMultipleMappings for a
// multi-node volume. The caller holds p.mu.
func (p *PowerFlex) publishNVMe(ctx context.Context, vol *siotypes.Volume, host pflexHost, handle, nodeID string, multiNode bool) error {
	for _, m := range vol.MappedSdcInfo {
		if m.SdcName == host.name {
			return nil
		}
	}
	if len(vol.MappedSdcInfo) > 0 && !multiNode {
		return fmt.Errorf("emulated %s: publish %s to %s: volume already published to NVMe host: %s: %w",
			p.cfg.Driver, handle, nodeID, vol.MappedSdcInfo[0].SdcName, ErrAlreadyPublished)
	}
	allow := "FALSE"
	if multiNode {
		allow = "TRUE"
	}
	tv := goscaleio.NewVolume(p.c.WithContext(ctx))
	tv.Volume = &siotypes.Volume{ID: vol.ID}
	if err := tv.MapVolumeNVMe(&siotypes.MapVolumeNVMeParam{HostID: host.id, AllowMultipleMappings: allow}); err != nil {
		return fmt.Errorf("emulated %s: publish %s to %s: error mapping volume to nvme host: %w", p.cfg.Driver, handle, nodeID, err)
	}
	return nil
}
