package unity

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/fenced-project/fenced/tests/arraysim/simcore"
)

// File systems and their NFS shares, as csi-unity's NFS volumes reach them
// through gounity v1.24.0 (filesystem.go):
//
//   - FindFilesystemByID / ByName: GET /api/instances/filesystem/<id> (or
//     name:<name>) with the file system's nfsShare objects (id, name, path);
//   - FindNFSShareByID / ByName: GET /api/instances/nfsShare/<id> with the
//     four host lists readOnlyHosts, readWriteHosts,
//     readOnlyRootAccessHosts and rootAccessHosts ([{id}] each);
//   - CreateFilesystem: POST /api/types/storageResource/action/createFilesystem;
//   - CreateNFSShare, ModifyNFSShareHostAccess, DeleteNFSShare: POST
//     /api/instances/storageResource/<res>/action/modifyFilesystem with
//     nfsShareCreate, nfsShareModify or nfsShareDelete. A list sent in
//     nfsShareModify replaces that list of the share; lists not sent are
//     kept (gounity sends one list per call).
//
// Assumed where no public source says: a modify that changes nothing
// succeeds (204; the simulator's LUNs answer "nothing to modify", a file
// system's share lists are not known to); an empty host list is left out
// of a share's answer, as an empty hostAccess is of a LUN's; a host may be
// in several lists of one share (the array's own rule is not known; the
// driver never puts it there).

const (
	// nasServerID is the simulator's one NAS server (the StorageClass'
	// nasServer).
	nasServerID = "nas_1"
	// nasServerIP is the address in the shares' export paths.
	nasServerIP = "127.0.0.1"
	// maxFSName is gounity's FsNameMaxLength.
	maxFSName = 63
	// shareNamePrefix is csi-unity's NFSShareNamePrefix.
	shareNamePrefix = "csishare-"
)

// shareLists are the names of an NFS share's host lists, in the order
// Unity documents them.
var shareLists = []string{"readOnlyHosts", "readWriteHosts", "readOnlyRootAccessHosts", "rootAccessHosts"}

type filesystem struct {
	ID              string `json:"id"`
	Name            string `json:"name"`
	Description     string `json:"description,omitempty"`
	StorageResource string `json:"storageResource"`
	NASServer       string `json:"nasServer"`
	// Size is the file system's size in bytes; 0 is the default 8 GiB of
	// the file systems a fixture seeds.
	Size uint64 `json:"sizeTotal,omitempty"`
}

type nfsShare struct {
	ID         string `json:"id"`
	Name       string `json:"name"`
	Path       string `json:"path"`
	Filesystem string `json:"filesystem"`
	// DefaultAccess is NFSShareDefaultAccessEnum: 0 no access for hosts
	// not listed (what csi-unity creates), else every host has access.
	DefaultAccess           int      `json:"defaultAccess"`
	ReadOnlyHosts           []string `json:"readOnlyHosts"`
	ReadWriteHosts          []string `json:"readWriteHosts"`
	ReadOnlyRootAccessHosts []string `json:"readOnlyRootAccessHosts"`
	RootAccessHosts         []string `json:"rootAccessHosts"`
}

// list returns the share's host list of that name, nil for an unknown name.
func (sh *nfsShare) list(name string) *[]string {
	switch name {
	case "readOnlyHosts":
		return &sh.ReadOnlyHosts
	case "readWriteHosts":
		return &sh.ReadWriteHosts
	case "readOnlyRootAccessHosts":
		return &sh.ReadOnlyRootAccessHosts
	case "rootAccessHosts":
		return &sh.RootAccessHosts
	}
	return nil
}

// snapshot copies the share with every list non-nil, so equal states
// marshal alike.
func (sh *nfsShare) snapshot() nfsShare {
	out := *sh
	for _, name := range shareLists {
		l := out.list(name)
		*l = append([]string{}, *l...)
	}
	return out
}

// seedFilesystemsLocked creates the spec's file systems and shares; hosts
// are named and must be unique.
func (s *Sim) seedFilesystemsLocked(specs []FilesystemSpec, byName map[string][]string) error {
	for _, fs := range specs {
		f := s.newFilesystemLocked(fs.Name, 0)
		for _, ss := range fs.Shares {
			mask, _ := strconv.Atoi(ss.DefaultAccess)
			sh := &nfsShare{ID: s.nextShareIDLocked(), Name: ss.Name, Path: ss.Path, Filesystem: f.ID, DefaultAccess: mask}
			for _, l := range []struct {
				name  string
				hosts []string
			}{
				{"readOnlyHosts", ss.ReadOnlyHosts}, {"readWriteHosts", ss.ReadWriteHosts},
				{"readOnlyRootAccessHosts", ss.ReadOnlyRootAccessHosts}, {"rootAccessHosts", ss.RootAccessHosts},
			} {
				for _, name := range l.hosts {
					ids := byName[name]
					if len(ids) != 1 {
						return fmt.Errorf("unity spec: filesystem %q share %q: %s host %q matches %d hosts, want exactly 1", fs.Name, ss.Name, l.name, name, len(ids))
					}
					dst := sh.list(l.name)
					if slices.Contains(*dst, ids[0]) {
						return fmt.Errorf("unity spec: filesystem %q share %q: %s lists host %q twice", fs.Name, ss.Name, l.name, name)
					}
					*dst = append(*dst, ids[0])
				}
			}
			for _, other := range s.shares {
				if other.Name == sh.Name {
					return fmt.Errorf("unity spec: filesystem %q: share name %q is in use", fs.Name, sh.Name)
				}
			}
			s.shares[sh.ID] = sh
		}
	}
	return nil
}

// newFilesystemLocked adds a file system with the next fs_N and its
// storage resource res_N.
func (s *Sim) newFilesystemLocked(name string, size uint64) *filesystem {
	s.lastFS++
	n := s.lastFS
	f := &filesystem{ID: fmt.Sprintf("fs_%d", n), Name: name, StorageResource: fmt.Sprintf("res_%d", n), NASServer: nasServerID, Size: size}
	s.filesystems[f.ID] = f
	s.changes.Touch(collFilesystems, f.ID)
	return f
}

func (s *Sim) nextShareIDLocked() string {
	s.lastShare++
	return fmt.Sprintf("NFSShare_%d", s.lastShare)
}

// filesystemByResourceLocked finds the file system of a storage resource.
func (s *Sim) filesystemByResourceLocked(res string) *filesystem {
	for _, f := range s.filesystems {
		if f.StorageResource == res {
			return f
		}
	}
	return nil
}

// sharesOfLocked lists a file system's shares in ID order.
func (s *Sim) sharesOfLocked(fsID string) []*nfsShare {
	var out []*nfsShare
	for _, id := range sortedIDs(s.shares) {
		if sh := s.shares[id]; sh.Filesystem == fsID {
			out = append(out, sh)
		}
	}
	return out
}

func (s *Sim) filesystemJSONLocked(f *filesystem) map[string]any {
	size := f.Size
	if size == 0 {
		size = defaultLUNSize
	}
	out := map[string]any{
		"id": f.ID, "name": f.Name, "description": f.Description, "type": 1, "sizeTotal": size, "sizeUsed": 0, "sizeAllocated": 0,
		"isThinEnabled": true, "isDataReductionEnabled": false, "pool": idRef{poolID}, "nasServer": idRef{f.NASServer},
		"storageResource": idRef{f.StorageResource}, "tieringPolicy": 0, "hostIOSize": 8192, "health": healthOK,
	}
	if shares := s.sharesOfLocked(f.ID); len(shares) > 0 {
		refs := make([]map[string]any, 0, len(shares))
		for _, sh := range shares {
			refs = append(refs, map[string]any{"id": sh.ID, "name": sh.Name, "path": sh.Path})
		}
		out["nfsShare"] = refs
	}
	return out
}

func shareJSON(sh *nfsShare) map[string]any {
	out := map[string]any{
		"id": sh.ID, "name": sh.Name, "path": sh.Path, "type": 1, "role": 0, "defaultAccess": sh.DefaultAccess,
		"filesystem": idRef{sh.Filesystem}, "exportPaths": []string{nasServerIP + ":/" + sh.Name},
	}
	for _, name := range shareLists {
		if l := *sh.list(name); len(l) > 0 {
			out[name] = refs(l)
		}
	}
	return out
}

type createFilesystemBody struct {
	Name         string `json:"name"`
	Description  string `json:"description"`
	FsParameters *struct {
		Size                   json.Number     `json:"size"`
		IsThinEnabled          string          `json:"isThinEnabled"`
		IsDataReductionEnabled string          `json:"isDataReductionEnabled"`
		SupportedProtocols     *int            `json:"supportedProtocols"`
		HostIOSize             json.Number     `json:"hostIOSize"`
		Pool                   *idRef          `json:"pool"`
		NasServer              *idRef          `json:"nasServer"`
		FastVPParameters       json.RawMessage `json:"fastVPParameters"`
		HostAccess             json.RawMessage `json:"hostAccess"`
		IoLimitParameters      json.RawMessage `json:"ioLimitParameters"`
		FileEventSettings      json.RawMessage `json:"fileEventSettings"`
	} `json:"fsParameters"`
}

// createFilesystem creates a file system on the NAS server, with no share,
// and answers 201 with its storage resource's ID, as createLun does. A
// name in use is a 409 (the simulator's choice, as for LUNs: csi-unity
// looks a name up before it creates one).
func (s *Sim) createFilesystem(w http.ResponseWriter, r *http.Request) {
	var body createFilesystemBody
	dec := json.NewDecoder(r.Body)
	dec.UseNumber()
	if err := dec.Decode(&body); err != nil {
		s.fail(w, http.StatusUnprocessableEntity, CodeBadRequest, "Invalid JSON in request body: %v", err)
		return
	}
	p := body.FsParameters
	switch {
	case body.Name == "" || len(body.Name) > maxFSName || strings.TrimSpace(body.Name) != body.Name:
		s.fail(w, http.StatusUnprocessableEntity, CodeBadRequest, "name %q is not a valid file system name (1..%d characters)", body.Name, maxFSName)
		return
	case p == nil || p.Pool == nil || p.Pool.ID == "" || p.NasServer == nil || p.NasServer.ID == "":
		s.fail(w, http.StatusUnprocessableEntity, CodeBadRequest, "fsParameters.pool.id and fsParameters.nasServer.id are required")
		return
	case p.Pool.ID != poolID:
		s.fail(w, http.StatusNotFound, CodeNotFound, "The specified pool %s does not exist", p.Pool.ID)
		return
	case p.NasServer.ID != nasServerID:
		s.fail(w, http.StatusNotFound, CodeNotFound, "The specified NAS server %s does not exist", p.NasServer.ID)
		return
	case p.SupportedProtocols == nil || *p.SupportedProtocols < 0 || *p.SupportedProtocols > 2:
		s.fail(w, http.StatusUnprocessableEntity, CodeBadRequest, "fsParameters.supportedProtocols is not a FSSupportedProtocolEnum")
		return
	case len(p.HostAccess) > 0:
		s.fail(w, http.StatusUnprocessableEntity, CodeBadRequest, "fsParameters.hostAccess is not modelled by the simulator")
		return
	}
	size, err := strconv.ParseUint(p.Size.String(), 10, 64)
	if err != nil || size == 0 {
		s.fail(w, http.StatusUnprocessableEntity, CodeBadRequest, "fsParameters.size %q is not a positive number of bytes", p.Size)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range s.filesystems {
		if f.Name == body.Name {
			s.fail(w, http.StatusConflict, CodeNameInUse, "The file system name %s is already in use", body.Name)
			return
		}
	}
	f := s.newFilesystemLocked(body.Name, size)
	f.Description = body.Description
	simcore.WriteJSON(w, http.StatusCreated, one(map[string]any{"storageResource": idRef{f.StorageResource}, "filesystem": idRef{f.ID}}))
}

// shareParameters is nfsShareParameters: each list given replaces the
// share's list of that name.
type shareParameters struct {
	DefaultAccess           json.RawMessage `json:"defaultAccess"`
	ReadOnlyHosts           *[]*idRef       `json:"readOnlyHosts"`
	ReadWriteHosts          *[]*idRef       `json:"readWriteHosts"`
	ReadOnlyRootAccessHosts *[]*idRef       `json:"readOnlyRootAccessHosts"`
	RootAccessHosts         *[]*idRef       `json:"rootAccessHosts"`
}

// lists returns the lists sent, by name.
func (p *shareParameters) lists() map[string][]*idRef {
	out := map[string][]*idRef{}
	if p == nil {
		return out
	}
	for name, l := range map[string]*[]*idRef{
		"readOnlyHosts": p.ReadOnlyHosts, "readWriteHosts": p.ReadWriteHosts,
		"readOnlyRootAccessHosts": p.ReadOnlyRootAccessHosts, "rootAccessHosts": p.RootAccessHosts,
	} {
		if l != nil {
			out[name] = *l
		}
	}
	return out
}

type modifyFilesystemBody struct {
	Description    *string `json:"description"`
	NFSShareCreate *[]struct {
		Name               string           `json:"name"`
		Path               string           `json:"path"`
		NFSShareParameters *shareParameters `json:"nfsShareParameters"`
	} `json:"nfsShareCreate"`
	NFSShareModify *[]struct {
		NFSShare           *idRef           `json:"nfsShare"`
		NFSShareParameters *shareParameters `json:"nfsShareParameters"`
	} `json:"nfsShareModify"`
	NFSShareDelete *[]struct {
		NFSShare *idRef `json:"nfsShare"`
	} `json:"nfsShareDelete"`
	FsParameters json.RawMessage `json:"fsParameters"`
}

// parseDefaultAccess reads NFSShareDefaultAccessEnum sent as a string
// (gounity) or a number; absent is 0.
func parseDefaultAccess(raw json.RawMessage) (int, bool) {
	if len(raw) == 0 {
		return 0, true
	}
	var n int
	var str string
	if err := json.Unmarshal(raw, &str); err == nil {
		v, err := strconv.Atoi(str)
		if err != nil {
			return 0, false
		}
		n = v
	} else if err := json.Unmarshal(raw, &n); err != nil {
		return 0, false
	}
	return n, n >= 0 && n <= 4
}

// hostListLocked checks a host list sent for a share: every host exists,
// none twice. It returns the IDs, or answers the error itself.
func (s *Sim) hostListLocked(w http.ResponseWriter, what string, l []*idRef) ([]string, bool) {
	ids := []string{}
	for i, h := range l {
		switch {
		case h == nil || h.ID == "":
			s.fail(w, http.StatusUnprocessableEntity, CodeBadRequest, "%s[%d].id is required", what, i)
			return nil, false
		case s.hosts[h.ID] == nil:
			s.fail(w, http.StatusNotFound, CodeNotFound, "The specified host %s does not exist", h.ID)
			return nil, false
		case slices.Contains(ids, h.ID):
			s.fail(w, http.StatusUnprocessableEntity, CodeBadRequest, "%s lists host %s twice", what, h.ID)
			return nil, false
		}
		ids = append(ids, h.ID)
	}
	return ids, true
}

// modifyFilesystem creates, modifies and deletes the file system's NFS
// shares (the parts gounity sends; every part is checked before any is
// applied). Success is 204 with no body, as for modifyLun.
func (s *Sim) modifyFilesystem(w http.ResponseWriter, r *http.Request, res string) {
	var body modifyFilesystemBody
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		s.fail(w, http.StatusUnprocessableEntity, CodeBadRequest, "Invalid JSON in request body: %v", err)
		return
	}
	if len(body.FsParameters) > 0 {
		s.fail(w, http.StatusUnprocessableEntity, CodeBadRequest, "fsParameters (expanding a file system) is not modelled by the simulator")
		return
	}
	if body.Description == nil && body.NFSShareCreate == nil && body.NFSShareModify == nil && body.NFSShareDelete == nil {
		s.fail(w, http.StatusUnprocessableEntity, CodeNothingToModify, "Nothing to modify")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.filesystemByResourceLocked(res)
	if f == nil {
		s.fail(w, http.StatusNotFound, CodeNotFound, "The requested storage resource does not exist")
		return
	}
	type change struct {
		share *nfsShare
		lists map[string][]string
	}
	var creates []*nfsShare
	var changes []change
	var deletes []string
	if body.NFSShareCreate != nil {
		for i, c := range *body.NFSShareCreate {
			if c.Name == "" || !strings.HasPrefix(c.Path, "/") {
				s.fail(w, http.StatusUnprocessableEntity, CodeBadRequest, "nfsShareCreate[%d]: name and an absolute path are required", i)
				return
			}
			for _, other := range s.shares {
				if other.Name == c.Name {
					s.fail(w, http.StatusConflict, CodeNameInUse, "The NFS share name %s is already in use", c.Name)
					return
				}
			}
			sh := &nfsShare{Name: c.Name, Path: c.Path, Filesystem: f.ID}
			if c.NFSShareParameters != nil {
				mask, ok := parseDefaultAccess(c.NFSShareParameters.DefaultAccess)
				if !ok {
					s.fail(w, http.StatusUnprocessableEntity, CodeBadRequest, "nfsShareCreate[%d].defaultAccess %s is not a NFSShareDefaultAccessEnum", i, c.NFSShareParameters.DefaultAccess)
					return
				}
				sh.DefaultAccess = mask
				for name, l := range c.NFSShareParameters.lists() {
					ids, ok := s.hostListLocked(w, fmt.Sprintf("nfsShareCreate[%d].%s", i, name), l)
					if !ok {
						return
					}
					*sh.list(name) = ids
				}
			}
			creates = append(creates, sh)
		}
	}
	if body.NFSShareModify != nil {
		for i, m := range *body.NFSShareModify {
			if m.NFSShare == nil || s.shares[m.NFSShare.ID] == nil {
				s.fail(w, http.StatusNotFound, CodeNotFound, "nfsShareModify[%d]: the requested NFS share does not exist", i)
				return
			}
			sh := s.shares[m.NFSShare.ID]
			if sh.Filesystem != f.ID {
				s.fail(w, http.StatusUnprocessableEntity, CodeBadRequest, "nfsShareModify[%d]: NFS share %s is not on file system %s", i, sh.ID, f.ID)
				return
			}
			if m.NFSShareParameters != nil && len(m.NFSShareParameters.DefaultAccess) > 0 {
				s.fail(w, http.StatusUnprocessableEntity, CodeBadRequest, "nfsShareModify[%d].defaultAccess is not modelled by the simulator", i)
				return
			}
			c := change{share: sh, lists: map[string][]string{}}
			for name, l := range m.NFSShareParameters.lists() {
				ids, ok := s.hostListLocked(w, fmt.Sprintf("nfsShareModify[%d].%s", i, name), l)
				if !ok {
					return
				}
				c.lists[name] = ids
			}
			changes = append(changes, c)
		}
	}
	if body.NFSShareDelete != nil {
		for i, d := range *body.NFSShareDelete {
			if d.NFSShare == nil || s.shares[d.NFSShare.ID] == nil || s.shares[d.NFSShare.ID].Filesystem != f.ID {
				s.fail(w, http.StatusNotFound, CodeNotFound, "nfsShareDelete[%d]: the requested NFS share does not exist on file system %s", i, f.ID)
				return
			}
			deletes = append(deletes, d.NFSShare.ID)
		}
	}
	if body.Description != nil {
		f.Description = *body.Description
		s.changes.Touch(collFilesystems, f.ID)
	}
	for _, sh := range creates {
		sh.ID = s.nextShareIDLocked()
		s.shares[sh.ID] = sh
		s.changes.Touch(collNFSShares, sh.ID)
	}
	for _, c := range changes {
		for name, ids := range c.lists {
			*c.share.list(name) = ids
		}
		s.changes.Touch(collNFSShares, c.share.ID)
	}
	for _, id := range deletes {
		delete(s.shares, id)
		s.changes.Touch(collNFSShares, id)
	}
	w.WriteHeader(http.StatusNoContent)
}
