package powerstore

import (
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"

	"github.com/fenced-project/fenced/tests/arraysim/simcore"
)

// File systems, NAS servers and NFS exports: what csi-powerstore creates
// for an NFS volume and what its publish and unpublish change
// (dell/csi-powerstore pkg/controller/creator.go NfsCreator,
// pkg/controller/publisher.go NfsPublisher.Publish,
// pkg/controller/controller.go ControllerUnpublishVolume; shared reference
// csi-drivers.md, PowerStore). The REST shapes are gopowerstore v1.22.0's
// (fs.go, nfs.go): GET/POST file_system, GET nas_server, GET/POST nfs_export
// and PATCH nfs_export/<id> with add_*/remove_* host lists.
//
// Behaviour assumed where the reference is silent (arrayclients/README.md
// lists it): a host added to a list is stored normalised as the array lists
// it (an IPv4 address as ip/255.255.255.255, ip/<prefix> as
// ip/<dotted mask>, an IPv6 address as ip/128; names as given); adding a
// host that any of the four access lists already holds answers 400
// (gopowerstore's HostAlreadyPresentInNFSExport), removing one the list
// does not hold in exactly that form answers 400
// (HostAlreadyRemovedFromNFSExport; csi-powerstore removes "ip/255.255.255.255"
// because "we can't remove without netmask"); a PATCH is checked whole
// before anything changes. A new export's default_access is No_Access.

// fileSystem is a file system on a NAS server.
type fileSystem struct {
	ID        string
	Name      string
	NASServer string
	Size      int64
}

// nasServer is a NAS server.
type nasServer struct {
	ID   string
	Name string
}

// nfsExport is an NFS export of a file system with its host lists.
type nfsExport struct {
	ID            string
	Name          string
	FileSystemID  string
	Path          string
	Description   string
	DefaultAccess string
	MinSecurity   string
	AnonymousUID  int32
	AnonymousGID  int32
	IsNoSUID      bool
	// Lists holds the five host lists by their API field names.
	Lists map[string][]string
}

// Host-list field names of an NFS export.
const (
	listRW       = "read_write_hosts"
	listRO       = "read_only_hosts"
	listRWRoot   = "read_write_root_hosts"
	listRORoot   = "read_only_root_hosts"
	listNoAccess = "no_access_hosts"
)

// allLists are every host list of an export.
var allLists = []string{listRO, listRORoot, listRW, listRWRoot, listNoAccess}

// DefaultNASName is the simulated array's NAS server, the nasName a csi-powerstore
// secret would name for it.
const DefaultNASName = "nas-sim"

// FileSystemState is a file system in a Snapshot.
type FileSystemState struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	NASServerID string `json:"nasServerId"`
	Size        int64  `json:"size"`
}

// NFSExportState is an NFS export in a Snapshot, its host lists as the
// array lists them.
type NFSExportState struct {
	ID                 string   `json:"id"`
	Name               string   `json:"name"`
	FileSystemID       string   `json:"fileSystemId"`
	Path               string   `json:"path"`
	DefaultAccess      string   `json:"defaultAccess"`
	IsNoSUID           bool     `json:"isNoSUID"`
	ReadOnlyHosts      []string `json:"read_only_hosts"`
	ReadOnlyRootHosts  []string `json:"read_only_root_hosts"`
	ReadWriteHosts     []string `json:"read_write_hosts"`
	ReadWriteRootHosts []string `json:"read_write_root_hosts"`
	NoAccessHosts      []string `json:"no_access_hosts"`
}

// FileSystemSpec is a file system of the fixture with its NFS export (as
// csi-powerstore leaves it after publishing the volume to the hosts
// listed).
type FileSystemSpec struct {
	Name   string `yaml:"name"`
	SizeGB int64  `yaml:"sizeGB"`
	// NoExport leaves the file system without an NFS export (created but
	// never published).
	NoExport bool `yaml:"noExport"`
	// DefaultAccess is the export's default_access (default No_Access).
	DefaultAccess string `yaml:"defaultAccess"`
	// The export's host lists; entries are normalised as the array stores
	// them (an IPv4 address becomes ip/255.255.255.255).
	ReadWriteRootHosts []string `yaml:"readWriteRootHosts"`
	ReadWriteHosts     []string `yaml:"readWriteHosts"`
	ReadOnlyHosts      []string `yaml:"readOnlyHosts"`
	ReadOnlyRootHosts  []string `yaml:"readOnlyRootHosts"`
}

// normalizeNFSHost returns a host entry as the array stores it.
func normalizeNFSHost(h string) (string, error) {
	h = strings.TrimSpace(h)
	if h == "" || strings.ContainsAny(h, " \t\r\n,") {
		return "", fmt.Errorf("host %q is not a host name, IP address or subnet", h)
	}
	addr, mask, hasMask := strings.Cut(h, "/")
	ip := net.ParseIP(addr)
	if ip == nil {
		if hasMask {
			return "", fmt.Errorf("host %q: %q is not an IP address", h, addr)
		}
		return h, nil // a host name or netgroup, as given
	}
	if ip4 := ip.To4(); ip4 != nil && !strings.Contains(addr, ":") {
		if !hasMask {
			return ip4.String() + "/255.255.255.255", nil
		}
		if m := net.ParseIP(mask); m != nil && m.To4() != nil {
			return ip4.String() + "/" + m.To4().String(), nil
		}
		var n int
		if _, err := fmt.Sscanf(mask, "%d", &n); err != nil || n < 0 || n > 32 || fmt.Sprint(n) != mask {
			return "", fmt.Errorf("host %q: netmask %q is neither a prefix length nor a dotted mask", h, mask)
		}
		return ip4.String() + "/" + net.IP(net.CIDRMask(n, 32)).String(), nil
	}
	if !hasMask {
		return ip.String() + "/128", nil
	}
	var n int
	if _, err := fmt.Sscanf(mask, "%d", &n); err != nil || n < 0 || n > 128 || fmt.Sprint(n) != mask {
		return "", fmt.Errorf("host %q: prefix length %q is not 0..128", h, mask)
	}
	return ip.String() + "/" + mask, nil
}

// ensureNASLocked returns the id of the NAS server named name, creating it.
func (s *Sim) ensureNASLocked(name string) string {
	id := uuidFor("nas_server", name)
	if _, ok := s.nasServers[id]; !ok {
		s.nasServers[id] = &nasServer{ID: id, Name: name}
	}
	return id
}

// addFileSystemSpec creates a fixture file system and its export.
func (s *Sim) addFileSystemSpec(fs FileSystemSpec) error {
	if fs.Name == "" {
		return fmt.Errorf("name is empty")
	}
	id := uuidFor("file_system", fs.Name)
	if _, dup := s.fileSystems[id]; dup {
		return fmt.Errorf("duplicate file system name %q", fs.Name)
	}
	size := fs.SizeGB
	if size <= 0 {
		size = defaultSizeGB
	}
	s.fileSystems[id] = &fileSystem{ID: id, Name: fs.Name, NASServer: s.ensureNASLocked(DefaultNASName), Size: size << 30}
	if fs.NoExport {
		return nil
	}
	x := s.newExportLocked(fs.Name, id, "/"+fs.Name)
	if fs.DefaultAccess != "" {
		if !validDefaultAccess(fs.DefaultAccess) {
			return fmt.Errorf("defaultAccess %q is not an export access level", fs.DefaultAccess)
		}
		x.DefaultAccess = fs.DefaultAccess
	}
	for list, hosts := range map[string][]string{listRWRoot: fs.ReadWriteRootHosts, listRW: fs.ReadWriteHosts,
		listRO: fs.ReadOnlyHosts, listRORoot: fs.ReadOnlyRootHosts} {
		for _, h := range hosts {
			n, err := normalizeNFSHost(h)
			if err != nil {
				return err
			}
			if where := x.holder(n); where != "" {
				return fmt.Errorf("host %s is listed twice (%s)", n, where)
			}
			x.Lists[list] = append(x.Lists[list], n)
		}
	}
	return nil
}

// newExportLocked adds an export with empty lists.
func (s *Sim) newExportLocked(name, fsID, path string) *nfsExport {
	x := &nfsExport{ID: uuidFor("nfs_export", name), Name: name, FileSystemID: fsID, Path: path,
		DefaultAccess: "No_Access", MinSecurity: "Sys", AnonymousUID: -2, AnonymousGID: -2, Lists: map[string][]string{}}
	for _, l := range allLists {
		x.Lists[l] = []string{}
	}
	s.exports[x.ID] = x
	s.changes.Touch(collNFSExports, x.ID)
	return x
}

func validDefaultAccess(a string) bool {
	return slices.Contains([]string{"No_Access", "Read_Only", "Read_Write", "Root", "Read_Only_Root"}, a)
}

// holder returns the list that holds host entry h exactly, or "".
func (x *nfsExport) holder(h string) string {
	for _, l := range allLists {
		if slices.Contains(x.Lists[l], h) {
			return l
		}
	}
	return ""
}

func (s *Sim) renderFSLocked(fs *fileSystem) map[string]any {
	return map[string]any{"id": fs.ID, "name": fs.Name, "description": "", "nas_server_id": fs.NASServer,
		"filesystem_type": "Primary", "size_total": fs.Size, "size_used": 0, "parent_id": nil,
		"config_type": "General", "access_policy": "Native", "locking_policy": "Advisory"}
}

func (s *Sim) renderExportLocked(x *nfsExport) map[string]any {
	out := map[string]any{"id": x.ID, "name": x.Name, "file_system_id": x.FileSystemID, "path": x.Path,
		"description": nullable(x.Description), "default_access": x.DefaultAccess, "min_security": x.MinSecurity,
		"anonymous_UID": x.AnonymousUID, "anonymous_GID": x.AnonymousGID, "is_no_SUID": x.IsNoSUID,
		"nfs_owner_username": "root"}
	for _, l := range allLists {
		out[l] = append([]string{}, x.Lists[l]...)
	}
	return out
}

// serveFileSystems answers GET file_system (collection with name/id
// filters, or one by id) and POST file_system (gopowerstore CreateFS).
func (s *Sim) serveFileSystems(w http.ResponseWriter, r *http.Request, id, action string, body []byte) *apiError {
	switch {
	case r.Method == http.MethodPost && id == "":
		return s.createFS(w, body)
	case r.Method != http.MethodGet || action != "":
		return errf(http.StatusMethodNotAllowed, "%s file_system %s %s is not supported", r.Method, id, action)
	case id != "":
		s.mu.Lock()
		defer s.mu.Unlock()
		fs, ok := s.fileSystems[id]
		if !ok {
			return errf(http.StatusNotFound, "file system %s not found", id)
		}
		simcore.WriteJSON(w, http.StatusOK, s.renderFSLocked(fs))
		return nil
	}
	// gopowerstore's ListFS filters filesystem_type=not.eq.Snapshot;
	// every simulated file system is a Primary.
	q, e := s.parseQuery(r, "id", "name", "nas_server_id", "filesystem_type")
	if e != nil {
		return e
	}
	s.mu.Lock()
	rows := make([]row, 0, len(s.fileSystems))
	for _, fs := range s.fileSystems {
		rows = append(rows, row{fields: map[string]string{"id": fs.ID, "name": fs.Name, "nas_server_id": fs.NASServer,
			"filesystem_type": "Primary"},
			obj: s.renderFSLocked(fs)})
	}
	s.mu.Unlock()
	writePage(w, rows, q)
	return nil
}

// createFS answers POST file_system as gopowerstore's CreateFS sends it
// (FsCreate): a name in use is a 422 (csi-powerstore then looks the file
// system up by name: FSNameIsAlreadyUse), an unknown NAS server a 404.
func (s *Sim) createFS(w http.ResponseWriter, body []byte) *apiError {
	var b struct {
		Name        string `json:"name"`
		Description string `json:"description"`
		NASServerID string `json:"nas_server_id"`
		Size        int64  `json:"size_total"`
		ConfigType  string `json:"config_type"`
		// Accepted and ignored: the simulator does not model them.
		AccessPolicy        string `json:"access_policy"`
		LockingPolicy       string `json:"locking_policy"`
		ProtectionPolicyID  string `json:"protection_policy_id"`
		PerformancePolicyID string `json:"performance_policy_id"`
		HostIOSize          string `json:"host_io_size"`
	}
	if e := decodeBody(body, &b); e != nil {
		return e
	}
	if b.Name == "" || b.NASServerID == "" || b.Size < 1<<20 {
		return errf(http.StatusBadRequest, "name, nas_server_id and a size_total of at least 1 MB are required")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.nasServers[b.NASServerID]; !ok {
		return errf(http.StatusNotFound, "NAS server %s not found", b.NASServerID)
	}
	for _, fs := range s.fileSystems {
		if fs.Name == b.Name {
			return errf(http.StatusUnprocessableEntity, "the name %s is already in use by another file system", b.Name)
		}
	}
	id := uuidFor("file_system", b.Name)
	s.fileSystems[id] = &fileSystem{ID: id, Name: b.Name, NASServer: b.NASServerID, Size: b.Size}
	s.changes.Touch(collFileSystems, id)
	simcore.WriteJSON(w, http.StatusCreated, map[string]string{"id": id})
	return nil
}

// serveNAS answers GET nas_server (by name) and nas_server/<id>.
func (s *Sim) serveNAS(w http.ResponseWriter, r *http.Request, id, action string) *apiError {
	if r.Method != http.MethodGet || action != "" {
		return errf(http.StatusMethodNotAllowed, "nas_server is read-only in the simulator")
	}
	render := func(n *nasServer) map[string]any {
		return map[string]any{"id": n.ID, "name": n.Name, "description": "", "operational_status": "Started",
			"current_node_id": s.applianceName() + "-node-A", "current_preferred_IPv4_interface_id": uuidFor("file_interface", n.Name),
			"nfs_servers": []map[string]any{{"id": uuidFor("nfs_server", n.Name), "is_nfsv3_enabled": true, "is_nfsv4_enabled": true}}}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if id != "" {
		n, ok := s.nasServers[id]
		if !ok {
			return errf(http.StatusNotFound, "NAS server %s not found", id)
		}
		simcore.WriteJSON(w, http.StatusOK, render(n))
		return nil
	}
	q, e := s.parseQuery(r, "id", "name")
	if e != nil {
		return e
	}
	rows := make([]row, 0, len(s.nasServers))
	for _, n := range s.nasServers {
		rows = append(rows, row{fields: map[string]string{"id": n.ID, "name": n.Name}, obj: render(n)})
	}
	writePage(w, rows, q)
	return nil
}

// serveNFSExports answers GET nfs_export (filters id, name,
// file_system_id), GET nfs_export/<id>, POST nfs_export (CreateNFSExport)
// and PATCH nfs_export/<id> (ModifyNFSExport).
func (s *Sim) serveNFSExports(w http.ResponseWriter, r *http.Request, id, action string, body []byte) *apiError {
	switch {
	case action != "":
		return errf(http.StatusNotFound, "no such resource nfs_export/%s/%s", id, action)
	case r.Method == http.MethodPost && id == "":
		return s.createExport(w, body)
	case r.Method == http.MethodPatch && id != "":
		var mod exportModify
		if e := decodeBody(body, &mod); e != nil {
			return e
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if e := s.modifyExportLocked(id, mod); e != nil {
			return e
		}
		noContent(w)
		return nil
	case r.Method != http.MethodGet:
		return errf(http.StatusMethodNotAllowed, "%s nfs_export %s is not supported", r.Method, id)
	case id != "":
		s.mu.Lock()
		defer s.mu.Unlock()
		x, ok := s.exports[id]
		if !ok {
			return errf(http.StatusNotFound, "NFS export %s not found", id)
		}
		simcore.WriteJSON(w, http.StatusOK, s.renderExportLocked(x))
		return nil
	}
	q, e := s.parseQuery(r, "id", "name", "file_system_id")
	if e != nil {
		return e
	}
	s.mu.Lock()
	rows := make([]row, 0, len(s.exports))
	for _, x := range s.exports {
		fields := map[string]string{"id": x.ID, "name": x.Name, "file_system_id": x.FileSystemID}
		if q.keeps(fields) {
			rows = append(rows, row{fields: fields, obj: s.renderExportLocked(x)})
		}
	}
	s.mu.Unlock()
	writePage(w, rows, q)
	return nil
}

// createExport answers POST nfs_export as gopowerstore's CreateNFSExport
// sends it (NFSExportCreate; csi-powerstore sends name, file_system_id and
// path "/<fs name>"). A name in use is a 422.
func (s *Sim) createExport(w http.ResponseWriter, body []byte) *apiError {
	var b struct {
		Name               string   `json:"name"`
		Description        string   `json:"description"`
		FileSystemID       string   `json:"file_system_id"`
		Path               string   `json:"path"`
		DefaultAccess      string   `json:"default_access"`
		MinSecurity        string   `json:"min_security"`
		NoAccessHosts      []string `json:"no_access_hosts"`
		ReadOnlyHosts      []string `json:"read_only_hosts"`
		ReadOnlyRootHosts  []string `json:"read_only_root_hosts"`
		ReadWriteHosts     []string `json:"read_write_hosts"`
		ReadWriteRootHosts []string `json:"read_write_root_hosts"`
		AnonymousUID       int32    `json:"anonymous_UID"`
		AnonymousGID       int32    `json:"anonymous_GID"`
		IsNoSUID           bool     `json:"is_no_SUID"`
		NFSOwnerUsername   string   `json:"nfs_owner_username"`
	}
	if e := decodeBody(body, &b); e != nil {
		return e
	}
	if b.Name == "" || b.FileSystemID == "" || !strings.HasPrefix(b.Path, "/") {
		return errf(http.StatusBadRequest, "name, file_system_id and an absolute path are required")
	}
	if b.DefaultAccess != "" && !validDefaultAccess(b.DefaultAccess) {
		return errf(http.StatusBadRequest, "default_access %q is not an export access level", b.DefaultAccess)
	}
	lists := map[string][]string{listNoAccess: b.NoAccessHosts, listRO: b.ReadOnlyHosts, listRORoot: b.ReadOnlyRootHosts,
		listRW: b.ReadWriteHosts, listRWRoot: b.ReadWriteRootHosts}
	norm, e := normalizeLists(lists)
	if e != nil {
		return e
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.fileSystems[b.FileSystemID]; !ok {
		return errf(http.StatusNotFound, "file system %s not found", b.FileSystemID)
	}
	for _, x := range s.exports {
		if x.Name == b.Name {
			return errf(http.StatusUnprocessableEntity, "the name %s is already in use by another NFS export", b.Name)
		}
	}
	x := s.newExportLocked(b.Name, b.FileSystemID, b.Path)
	x.Description, x.IsNoSUID, x.AnonymousUID, x.AnonymousGID = b.Description, b.IsNoSUID, b.AnonymousUID, b.AnonymousGID
	if b.DefaultAccess != "" {
		x.DefaultAccess = b.DefaultAccess
	}
	if b.MinSecurity != "" {
		x.MinSecurity = b.MinSecurity
	}
	for l, hosts := range norm {
		x.Lists[l] = hosts
	}
	simcore.WriteJSON(w, http.StatusCreated, map[string]string{"id": x.ID})
	return nil
}

// normalizeLists normalises whole host lists; a host listed twice is a 400.
func normalizeLists(lists map[string][]string) (map[string][]string, *apiError) {
	out := map[string][]string{}
	seen := map[string]string{}
	for _, l := range allLists {
		hosts, ok := lists[l]
		if !ok || hosts == nil {
			continue
		}
		out[l] = []string{}
		for _, h := range hosts {
			n, err := normalizeNFSHost(h)
			if err != nil {
				return nil, errf(http.StatusBadRequest, "%s: %v", l, err)
			}
			if where, dup := seen[n]; dup {
				return nil, errf(http.StatusBadRequest, "host %s is in %s and %s", n, where, l)
			}
			seen[n] = l
			out[l] = append(out[l], n)
		}
	}
	return out, nil
}

// exportModify is the body of PATCH nfs_export/<id>: every field
// gopowerstore's NFSExportModify can send (is_no_SUID is always sent).
type exportModify struct {
	Description         *string   `json:"description"`
	AddRWHosts          []string  `json:"add_read_write_hosts"`
	RemoveRWHosts       []string  `json:"remove_read_write_hosts"`
	AddROHosts          []string  `json:"add_read_only_hosts"`
	RemoveROHosts       []string  `json:"remove_read_only_hosts"`
	AddRWRootHosts      []string  `json:"add_read_write_root_hosts"`
	RemoveRWRootHosts   []string  `json:"remove_read_write_root_hosts"`
	AddRORootHosts      []string  `json:"add_read_only_root_hosts"`
	RemoveRORootHosts   []string  `json:"remove_read_only_root_hosts"`
	AddNoAccessHosts    []string  `json:"add_no_access_hosts"`
	RemoveNoAccessHosts []string  `json:"remove_no_access_hosts"`
	DefaultAccess       *string   `json:"default_access"`
	MinSecurity         *string   `json:"min_security"`
	NoAccessHosts       *[]string `json:"no_access_hosts"`
	ReadOnlyHosts       *[]string `json:"read_only_hosts"`
	ReadOnlyRootHosts   *[]string `json:"read_only_root_hosts"`
	ReadWriteHosts      *[]string `json:"read_write_hosts"`
	ReadWriteRootHosts  *[]string `json:"read_write_root_hosts"`
	AnonymousUID        *int32    `json:"anonymous_UID"`
	AnonymousGID        *int32    `json:"anonymous_GID"`
	IsNoSUID            *bool     `json:"is_no_SUID"`
}

// modifyExportLocked checks a whole PATCH, then applies it: replaced
// lists first, then removals (exact stored form), then additions
// (normalised; a host any access list holds is refused).
func (s *Sim) modifyExportLocked(id string, mod exportModify) *apiError {
	x, ok := s.exports[id]
	if !ok {
		return errf(http.StatusNotFound, "NFS export %s not found", id)
	}
	if mod.DefaultAccess != nil && !validDefaultAccess(*mod.DefaultAccess) {
		return errf(http.StatusBadRequest, "default_access %q is not an export access level", *mod.DefaultAccess)
	}
	replace := map[string][]string{}
	for l, p := range map[string]*[]string{listNoAccess: mod.NoAccessHosts, listRO: mod.ReadOnlyHosts,
		listRORoot: mod.ReadOnlyRootHosts, listRW: mod.ReadWriteHosts, listRWRoot: mod.ReadWriteRootHosts} {
		if p != nil {
			replace[l] = *p
		}
	}
	adds := map[string][]string{listRW: mod.AddRWHosts, listRO: mod.AddROHosts, listRWRoot: mod.AddRWRootHosts,
		listRORoot: mod.AddRORootHosts, listNoAccess: mod.AddNoAccessHosts}
	removes := map[string][]string{listRW: mod.RemoveRWHosts, listRO: mod.RemoveROHosts, listRWRoot: mod.RemoveRWRootHosts,
		listRORoot: mod.RemoveRORootHosts, listNoAccess: mod.RemoveNoAccessHosts}
	for l := range replace {
		if len(adds[l]) > 0 || len(removes[l]) > 0 {
			return errf(http.StatusBadRequest, "%s cannot be replaced and changed in one request", l)
		}
	}
	norm, e := normalizeLists(replace)
	if e != nil {
		return e
	}
	// Work on a copy: nothing changes unless the whole request is valid.
	next := map[string][]string{}
	for _, l := range allLists {
		next[l] = append([]string{}, x.Lists[l]...)
		if r, ok := norm[l]; ok {
			next[l] = r
		}
	}
	for _, l := range allLists {
		for _, h := range removes[l] {
			i := slices.Index(next[l], h)
			if i < 0 && s.nfsRemoveAbsent == NFSRemoveAbsentIgnore {
				continue
			}
			if i < 0 {
				return &apiError{status: http.StatusBadRequest, code: codeNFSHostAbsent,
					msg: fmt.Sprintf("host %s is not in %s of NFS export %s", h, l, x.Name)}
			}
			next[l] = slices.Delete(next[l], i, i+1)
		}
	}
	for _, l := range allLists {
		for _, h := range adds[l] {
			n, err := normalizeNFSHost(h)
			if err != nil {
				return errf(http.StatusBadRequest, "%s: %v", l, err)
			}
			for _, other := range allLists {
				if slices.Contains(next[other], n) {
					return &apiError{status: http.StatusBadRequest, code: codeNFSHostPresent,
						msg: fmt.Sprintf("host %s is already present in %s of NFS export %s", n, other, x.Name)}
				}
			}
			next[l] = append(next[l], n)
		}
	}
	x.Lists = next
	s.changes.Touch(collNFSExports, x.ID)
	if mod.Description != nil {
		x.Description = *mod.Description
	}
	if mod.DefaultAccess != nil {
		x.DefaultAccess = *mod.DefaultAccess
	}
	if mod.MinSecurity != nil {
		x.MinSecurity = *mod.MinSecurity
	}
	if mod.AnonymousUID != nil {
		x.AnonymousUID = *mod.AnonymousUID
	}
	if mod.AnonymousGID != nil {
		x.AnonymousGID = *mod.AnonymousGID
	}
	if mod.IsNoSUID != nil {
		x.IsNoSUID = *mod.IsNoSUID
	}
	return nil
}

// fileSystemsSnapshotLocked returns the file systems and exports in a
// deterministic order.
func (s *Sim) fileSystemsSnapshotLocked() ([]FileSystemState, []NFSExportState) {
	var fss []FileSystemState
	for _, fs := range s.fileSystems {
		fss = append(fss, fs.state())
	}
	slices.SortFunc(fss, func(a, b FileSystemState) int { return strings.Compare(a.Name, b.Name) })
	var xs []NFSExportState
	for _, x := range s.exports {
		xs = append(xs, x.state())
	}
	slices.SortFunc(xs, func(a, b NFSExportState) int { return strings.Compare(a.Name, b.Name) })
	return fss, xs
}

// state is the file system as a Snapshot lists it.
func (fs *fileSystem) state() FileSystemState {
	return FileSystemState{ID: fs.ID, Name: fs.Name, NASServerID: fs.NASServer, Size: fs.Size}
}

// state is the export as a Snapshot lists it.
func (x *nfsExport) state() NFSExportState {
	return NFSExportState{ID: x.ID, Name: x.Name, FileSystemID: x.FileSystemID, Path: x.Path,
		DefaultAccess: x.DefaultAccess, IsNoSUID: x.IsNoSUID,
		ReadOnlyHosts: slices.Clone(x.Lists[listRO]), ReadOnlyRootHosts: slices.Clone(x.Lists[listRORoot]),
		ReadWriteHosts: slices.Clone(x.Lists[listRW]), ReadWriteRootHosts: slices.Clone(x.Lists[listRWRoot]),
		NoAccessHosts: slices.Clone(x.Lists[listNoAccess])}
}

// SetExportHosts replaces one host list of the NFS export of the file
// system named fsName, normalising the entries as the array does: for
// tests that stage what an operator or another tool did to an export.
func (s *Sim) SetExportHosts(fsName, list string, hosts []string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !slices.Contains(allLists, list) {
		return fmt.Errorf("powerstore sim: %q is not an NFS export host list", list)
	}
	for _, x := range s.exports {
		fs := s.fileSystems[x.FileSystemID]
		if fs == nil || fs.Name != fsName {
			continue
		}
		out := []string{}
		for _, h := range hosts {
			n, err := normalizeNFSHost(h)
			if err != nil {
				return fmt.Errorf("powerstore sim: %w", err)
			}
			out = append(out, n)
		}
		x.Lists[list] = out
		s.changes.Touch(collNFSExports, x.ID)
		return nil
	}
	return fmt.Errorf("powerstore sim: no NFS export of a file system named %q", fsName)
}
