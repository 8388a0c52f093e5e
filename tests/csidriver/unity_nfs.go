package csidriver

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/dell/gounity"
	types "github.com/dell/gounity/apitypes"
)

// csi-unity's NFS volumes (dell/csi-unity service/controller.go): a volume
// is a file system on the StorageClass' NAS server; its share is created
// on the first publish and deleted by the unpublish that leaves it to no
// host. Snapshot-backed NFS volumes are not emulated.

const (
	// unityNFSShareNamePrefix and unityNFSSharePath are csi-unity's
	// NFSShareNamePrefix and NFSShareLocalPath: the driver's share of a
	// file system is "csishare-<file system name>" at "/".
	unityNFSShareNamePrefix = "csishare-"
	unityNFSSharePath       = "/"
	// unityFSExtraSize is csi-unity's AdditionalFilesystemSize: Unity keeps
	// 1.5 GiB of a file system for metadata, so CreateVolume asks for that
	// much more.
	unityFSExtraSize = 3 << 29
	// unityHostIOSize is the StorageClass' hostIoSize default for NFS
	// (service/validator.go ValidateCreateVolumeRequest).
	unityHostIOSize = 8192
	// unityProtocolNFS is the supportedProtocols csi-unity creates file
	// systems with (ProtocolNFS, 0).
	unityProtocolNFS = 0
)

// createFilesystem is CreateVolume for NFS (service/controller.go
// CreateVolume): a file system of size plus the metadata allowance in the
// pool on the NAS server; a file system of that name is returned when its
// size, NAS server and pool match ("'Filesystem name' already exists and
// size/NAS server/storage pool is different" otherwise).
func (u *Unity) createFilesystem(ctx context.Context, name string, size int64) (string, error) {
	size += unityFSExtraSize
	fs, _ := u.c.FindFilesystemByName(ctx, name)
	if fs != nil {
		c := fs.FileContent
		if int64(c.SizeTotal) != size || c.NASServer.ID != u.cfg.NasServer || c.Pool.ID != u.cfg.StoragePool {
			return "", fmt.Errorf("emulated %s: create volume %s: 'Filesystem name' already exists and size/NAS server/storage pool is different: %w",
				u.cfg.Driver, name, ErrInvalid)
		}
		return u.fsHandle(fs), nil
	}
	if _, err := u.c.CreateFilesystem(ctx, name, u.cfg.StoragePool, "", u.cfg.NasServer, uint64(size), 0, unityHostIOSize,
		unityProtocolNFS, true, false); err != nil {
		return "", fmt.Errorf("emulated %s: create file system %s in pool %s on NAS server %s: %w", u.cfg.Driver, name,
			u.cfg.StoragePool, u.cfg.NasServer, err)
	}
	fs, err := u.c.FindFilesystemByName(ctx, name)
	if err != nil {
		return "", fmt.Errorf("emulated %s: file system %s not found after create: %w", u.cfg.Driver, name, err)
	}
	return u.fsHandle(fs), nil
}

// fsHandle is "<name>-NFS-<arrayid>-<file system ID>"
// (service/csiutils/csiutils.go GetVolumeResponseFromFilesystem).
func (u *Unity) fsHandle(fs *types.Filesystem) string {
	return fmt.Sprintf("%s-NFS-%s-%s", fs.FileContent.Name, u.cfg.ArrayID, fs.FileContent.ID)
}

// driverShare returns the file system's share the driver uses: the one at
// "/" that exports the file system itself (not a snapshot), or nil.
func driverShare(fs *types.Filesystem) *types.Share {
	for i, sh := range fs.FileContent.NFSShare {
		if sh.Path == unityNFSSharePath && sh.ParentSnap.ID == "" {
			return &fs.FileContent.NFSShare[i]
		}
	}
	return nil
}

func hostsOf(hs []types.HostContent) []string {
	out := make([]string, 0, len(hs))
	for _, h := range hs {
		out = append(out, h.ID)
	}
	return out
}

// publishFilesystem gives the host access to the file system's share as
// service/controller.go exportFilesystem does for a mount volume that is
// not read-only-many: the share is created (no default access) if the file
// system has none at "/"; a host in readOnlyHosts, readWriteHosts or
// readOnlyRootAccessHosts is refused ("incompatible access mode"); a host
// in rootAccessHosts already succeeds; a single-node volume any other host
// has access to is refused ("Other hosts have access on NFS Share");
// otherwise the host is appended to rootAccessHosts (READ_WRITE_ROOT).
// csi-unity puts a read-only-many volume's hosts in
// readOnlyRootAccessHosts; the emulation is never asked for one (its
// Controller only knows single-node and multi-node writers).
func (u *Unity) publishFilesystem(ctx context.Context, fsID, hostID string, multiNode bool) error {
	fs, err := u.c.FindFilesystemByID(ctx, fsID)
	if errors.Is(err, gounity.ErrorFilesystemNotFound) {
		return fmt.Errorf("file system %s: %w", fsID, ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("find file system %s: %w", fsID, err)
	}
	sh := driverShare(fs)
	if sh == nil {
		name := unityNFSShareNamePrefix + fs.FileContent.Name
		fs, err = u.c.CreateNFSShare(ctx, name, unityNFSSharePath, fsID, gounity.NoneDefaultAccess)
		if err != nil {
			return fmt.Errorf("create NFS share %s: %w", name, err)
		}
		if sh = driverShare(fs); sh == nil {
			return fmt.Errorf("NFS share %s not found after create", name)
		}
	}
	share, err := u.c.FindNFSShareByID(ctx, sh.ID)
	if err != nil {
		return fmt.Errorf("find NFS share %s: %w", sh.ID, err)
	}
	c := share.NFSShareContent
	ro, rw, roRoot, root := hostsOf(c.ReadOnlyHosts), hostsOf(c.ReadWriteHosts), hostsOf(c.ReadOnlyRootAccessHosts), hostsOf(c.RootAccessHosts)
	if slices.Contains(ro, hostID) || slices.Contains(rw, hostID) || slices.Contains(roRoot, hostID) {
		return fmt.Errorf("host %s has access on NFS share %s with incompatible access mode: %w", hostID, sh.ID, ErrInvalid)
	}
	if slices.Contains(root, hostID) {
		return nil
	}
	if others := len(ro) + len(rw) + len(roRoot) + len(root); !multiNode && others > 0 {
		return fmt.Errorf("other hosts have access on NFS share %s: %w", sh.ID, ErrAlreadyPublished)
	}
	if err := u.c.ModifyNFSShareHostAccess(ctx, fsID, sh.ID, append(root, hostID), gounity.ReadWriteRootAccessType); err != nil {
		return fmt.Errorf("allocate host %s access to NFS share %s: %w", hostID, sh.ID, err)
	}
	return nil
}

// unpublishFilesystem is service/controller.go unexportFilesystem: a file
// system or share that is gone succeeds; a host in readOnlyHosts or
// readWriteHosts is refused ("incompatible access mode"); the host leaves
// readOnlyRootAccessHosts if it is there, else rootAccessHosts (one list
// is written, the others are kept); then the driver's own share
// ("csishare-<name>") is deleted when no other host is in any of its
// lists.
func (u *Unity) unpublishFilesystem(ctx context.Context, fsID, hostID string) error {
	fs, err := u.c.FindFilesystemByID(ctx, fsID)
	if errors.Is(err, gounity.ErrorFilesystemNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("find file system %s: %w", fsID, err)
	}
	sh := driverShare(fs)
	if sh == nil {
		return nil
	}
	own := sh.Name == unityNFSShareNamePrefix+fs.FileContent.Name
	share, err := u.c.FindNFSShareByID(ctx, sh.ID)
	if err != nil {
		return fmt.Errorf("find NFS share %s: %w", sh.ID, err)
	}
	c := share.NFSShareContent
	ro, rw, roRoot, root := hostsOf(c.ReadOnlyHosts), hostsOf(c.ReadWriteHosts), hostsOf(c.ReadOnlyRootAccessHosts), hostsOf(c.RootAccessHosts)
	if slices.Contains(ro, hostID) || slices.Contains(rw, hostID) {
		return fmt.Errorf("cannot remove host access: host %s has access on NFS share %s with incompatible access mode: %w", hostID, sh.ID, ErrInvalid)
	}
	others := len(ro) + len(rw)
	keepRORoot := slices.DeleteFunc(slices.Clone(roRoot), func(h string) bool { return h == hostID })
	keepRoot := slices.DeleteFunc(slices.Clone(root), func(h string) bool { return h == hostID })
	others += len(keepRORoot) + len(keepRoot)
	switch {
	case len(keepRORoot) < len(roRoot):
		err = u.c.ModifyNFSShareHostAccess(ctx, fsID, sh.ID, keepRORoot, gounity.ReadOnlyRootAccessType)
	case len(keepRoot) < len(root):
		err = u.c.ModifyNFSShareHostAccess(ctx, fsID, sh.ID, keepRoot, gounity.ReadWriteRootAccessType)
	}
	if err != nil {
		return fmt.Errorf("remove host %s access to NFS share %s: %w", hostID, sh.ID, err)
	}
	if own && others == 0 {
		if err := u.c.DeleteNFSShare(ctx, fsID, sh.ID); err != nil {
			return fmt.Errorf("delete NFS share %s: %w", sh.ID, err)
		}
	}
	return nil
}
