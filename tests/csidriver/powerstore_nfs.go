package csidriver

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"

	"github.com/dell/gopowerstore"
)

// NFS volumes of the emulated csi-powerstore controller: a file system on
// the secret's NAS server, published by adding the node's IP to its NFS
// export's RWRootHosts (shared reference csi-drivers.md, PowerStore).

// ipv4InNodeID finds IPv4 addresses in a node ID as csi-powerstore's
// common.GetIPListFromString does (an IPv4 pattern over the whole string):
// NFS publish and unpublish use the first one.
var ipv4InNodeID = regexp.MustCompile(`(?:(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])\.){3}(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])`)

// nfsHostMask is the netmask the array lists an added IP with; the
// driver's unpublish removes that form ("we can't remove without
// netmask", pkg/controller/controller.go ControllerUnpublishVolume).
const nfsHostMask = "/255.255.255.255"

func apiErrOf(err error) (gopowerstore.APIError, bool) {
	var apiErr gopowerstore.APIError
	ok := errors.As(err, &apiErr) && apiErr.ErrorMsg != nil
	return apiErr, ok
}

// nfsReservedSize is what csi-powerstore adds to an NFS volume's size
// when it creates the file system (pkg/controller/creator.go ReservedSize).
const nfsReservedSize = 1610612736

// createFS creates a file system on the secret's NAS server and returns
// "<UUID>/<globalID>/nfs" as csi-powerstore's CreateVolume does
// (pkg/controller/controller.go CreateVolume, creator.go NfsCreator): the
// size is rounded up to 8 KiB (at least 1 MiB); a job in progress for the
// name is AlreadyExists (GetInProgressJobsByFsName); a file system of the
// name is the volume when it is large enough (GetFSByName, then GetNAS);
// else GetNASByName and CreateFS with the size plus nfsReservedSize. The
// NFS export is created by the first publish, as the driver does.
func (p *PowerStore) createFS(ctx context.Context, name string, size int64) (string, error) {
	fail := func(err error) (string, error) {
		return "", fmt.Errorf("emulated %s: create nfs volume %s: %w", p.cfg.Driver, name, err)
	}
	if name == "" || p.cfg.NASName == "" {
		return fail(fmt.Errorf("a name and the secret's nasName are required: %w", ErrInvalid))
	}
	const minSize, multiple = 1 << 20, 8192
	size = max(size, minSize)
	size = (size + multiple - 1) / multiple * multiple
	jobs, err := p.c.GetInProgressJobsByFsName(ctx, name)
	if err != nil {
		return fail(fmt.Errorf("error getting jobs that are in progress for FileSystem: %w", err))
	}
	if len(jobs) > 0 {
		return fail(fmt.Errorf("job already in progress to create FileSystem %s: %w", name, ErrInvalid))
	}
	if fs, err := p.c.GetFSByName(ctx, name); err == nil {
		if fs.SizeTotal < size {
			return fail(fmt.Errorf("filesystem '%s' already exists but is incompatible volume size: %d < %d: %w", name, fs.SizeTotal, size, ErrInvalid))
		}
		if _, err := p.c.GetNAS(ctx, fs.NasServerID); err != nil {
			return fail(fmt.Errorf("can't find nas server '%s': %w", fs.NasServerID, err))
		}
		return fs.ID + "/" + p.cfg.GlobalID + "/nfs", nil
	} else if apiErr, ok := apiErrOf(err); !ok || !apiErr.NotFound() {
		return fail(fmt.Errorf("can't find filesystem '%s': %w", name, err))
	}
	nas, err := p.c.GetNASByName(ctx, p.cfg.NASName)
	if err != nil {
		return fail(fmt.Errorf("find NAS server %s: %w", p.cfg.NASName, err))
	}
	resp, err := p.c.CreateFS(ctx, &gopowerstore.FsCreate{Name: name, NASServerID: nas.ID, Size: size + nfsReservedSize})
	if err != nil {
		return fail(fmt.Errorf("create file system: %w", err))
	}
	return resp.ID + "/" + p.cfg.GlobalID + "/nfs", nil
}

// nodeIP is the IP csi-powerstore's NFS publish and unpublish use: the
// first IPv4 address in the node ID.
func nodeIP(nodeID string) (string, error) {
	ips := ipv4InNodeID.FindAllString(nodeID, -1)
	if len(ips) == 0 {
		return "", fmt.Errorf("can't find IP in node ID %s: %w", nodeID, ErrNotFound)
	}
	return ips[0], nil
}

// publishFS gives the node the file system as
// pkg/controller/publisher.go NfsPublisher.Publish does: read the file
// system (404: not found), create its NFS export if it has none (named
// after the file system, path "/<name>"), then add the node's IP to the
// export's RWRootHosts unless a list holds it already
// (HostAlreadyPresentInNFSExport), with the configured external-access
// entry unless a list holds that (ExternalAccessAlreadyAdded), in one
// PATCH; the array's 400 (already present) is success. Like the driver,
// it does not refuse a single-node volume the export already gives to
// another node: NfsPublisher.Publish has no such check (only
// SCSIPublisher refuses).
func (p *PowerStore) publishFS(ctx context.Context, fsID, nodeID string, fail func(error) error) error {
	fs, err := p.c.GetFS(ctx, fsID)
	if err != nil {
		if apiErr, ok := apiErrOf(err); ok && apiErr.NotFound() {
			return fail(fmt.Errorf("volume with ID '%s': %w", fsID, ErrNotFound))
		}
		return fail(fmt.Errorf("read file system %s: %w", fsID, err))
	}
	ip, err := nodeIP(nodeID)
	if err != nil {
		return fail(err)
	}
	if _, err := p.c.GetNFSExportByFileSystemID(ctx, fs.ID); err != nil {
		apiErr, ok := apiErrOf(err)
		if !ok || !apiErr.NotFound() {
			return fail(fmt.Errorf("failure checking nfs export status: %w", err))
		}
		if _, err := p.c.CreateNFSExport(ctx, &gopowerstore.NFSExportCreate{Name: fs.Name, FileSystemID: fs.ID,
			Path: "/" + fs.Name}); err != nil {
			return fail(fmt.Errorf("failure creating nfs export: %w", err))
		}
	}
	x, err := p.c.GetNFSExportByFileSystemID(ctx, fs.ID)
	if err != nil {
		return fail(fmt.Errorf("failure getting nfs export: %w", err))
	}
	listed := func(h string) bool {
		return slices.Contains(x.ROHosts, h) || slices.Contains(x.RORootHosts, h) ||
			slices.Contains(x.RWHosts, h) || slices.Contains(x.RWRootHosts, h)
	}
	add := []string{}
	if !listed(ip + nfsHostMask) {
		add = append(add, ip)
	}
	if ext := p.cfg.ExternalAccess; ext != "" && !listed(ext) {
		add = append(add, ext)
	}
	if len(add) == 0 {
		// The driver sends the empty PATCH; it changes nothing.
		return nil
	}
	if _, err := p.c.ModifyNFSExport(ctx, &gopowerstore.NFSExportModify{AddRWRootHosts: add}, x.ID); err != nil {
		if apiErr, ok := apiErrOf(err); !ok || (!apiErr.NotFound() && !apiErr.HostAlreadyPresentInNFSExport()) {
			return fail(fmt.Errorf("failure when adding new host to nfs export: %w", err))
		}
	}
	return nil
}

// ListVolumesPublishedNodes answers ListVolumes as the driver does with
// the health monitor on (pkg/controller/controller.go ListVolumes,
// listPowerStoreVolumes): every block volume as "<UUID>/<globalID>/scsi"
// published to the names of the hosts its host_volume_mappings name
// (the driver's host names are node IDs), and every file system as
// "<UUID>/<globalID>/nfs" with no published nodes ("NFS does not have
// host mappings in the same way"). ok is false when the controller does
// not advertise LIST_VOLUMES_PUBLISHED_NODES (HealthMonitor off).
func (p *PowerStore) ListVolumesPublishedNodes(ctx context.Context) (map[string][]string, bool, error) {
	if !p.healthMonitor.Load() {
		return nil, false, nil
	}
	fail := func(err error) (map[string][]string, bool, error) {
		return nil, true, fmt.Errorf("emulated %s: ListVolumes: %w", p.cfg.Driver, err)
	}
	out := map[string][]string{}
	// The driver only logs a failed mapping read and reports no nodes.
	maps, _ := p.c.GetHostVolumeMappings(ctx)
	vols, err := p.c.GetVolumes(ctx)
	if err != nil {
		return fail(fmt.Errorf("unable to list volumes: %w", err))
	}
	for _, v := range vols {
		h := v.ID + "/" + p.cfg.GlobalID + "/scsi"
		out[h] = nil
		for _, m := range maps {
			if m.VolumeID != v.ID || m.HostID == "" {
				continue
			}
			if host, err := p.c.GetHost(ctx, m.HostID); err == nil && host.Name != "" {
				out[h] = append(out[h], host.Name)
			}
		}
	}
	fss, err := p.c.ListFS(ctx)
	if err != nil {
		return fail(fmt.Errorf("unable to list filesystems: %w", err))
	}
	for _, fs := range fss {
		out[fs.ID+"/"+p.cfg.GlobalID+"/nfs"] = nil
	}
	return out, true, nil
}

// unpublishFS removes the node from the export as
// pkg/controller/controller.go unpublishVolume (case "nfs") does: a
// deleted file system or export succeeds; the node's IP is the first in
// its node ID. The PATCH asks to remove "<ip>/255.255.255.255" from
// ROHosts and from RORootHosts whenever that list is not empty (the
// driver's sort.SearchStrings index is never negative, so it does not
// check that the entry is there), and from RWHosts and RWRootHosts only
// when they hold it; it is sent even when empty. A 400
// (HostAlreadyRemovedFromNFSExport, status only in the pinned
// gopowerstore) is success. So with another address in a read-only list
// an array that refuses the whole PATCH leaves the node's read-write
// entry, and the driver reports success: the emulation does the same,
// so our tests see what the real driver leaves.
func (p *PowerStore) unpublishFS(ctx context.Context, fsID, nodeID string, fail func(error) error) error {
	fs, err := p.c.GetFS(ctx, fsID)
	if err != nil {
		if apiErr, ok := apiErrOf(err); ok && apiErr.NotFound() {
			return nil
		}
		return fail(fmt.Errorf("failure checking volume status: %w", err))
	}
	ip, err := nodeIP(nodeID)
	if err != nil {
		return fail(err)
	}
	x, err := p.c.GetNFSExportByFileSystemID(ctx, fs.ID)
	if err != nil {
		if apiErr, ok := apiErrOf(err); ok && apiErr.NotFound() {
			return nil
		}
		return fail(fmt.Errorf("failure checking nfs export status: %w", err))
	}
	entry := ip + nfsHostMask
	var mod gopowerstore.NFSExportModify
	if len(x.ROHosts) > 0 {
		mod.RemoveROHosts = []string{entry}
	}
	if len(x.RORootHosts) > 0 {
		mod.RemoveRORootHosts = []string{entry}
	}
	if slices.Contains(x.RWHosts, entry) {
		mod.RemoveRWHosts = []string{entry}
	}
	if slices.Contains(x.RWRootHosts, entry) {
		mod.RemoveRWRootHosts = []string{entry}
	}
	if _, err := p.c.ModifyNFSExport(ctx, &mod, x.ID); err != nil {
		if apiErr, ok := apiErrOf(err); !ok || !apiErr.HostAlreadyRemovedFromNFSExport() {
			return fail(fmt.Errorf("failure when removing new host to nfs export: %w", err))
		}
	}
	return nil
}
