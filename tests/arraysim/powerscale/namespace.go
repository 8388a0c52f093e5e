package powerscale

import (
	"net/http"
	"path"
	"sort"
	"strings"

	"github.com/fenced-project/fenced/tests/arraysim/simcore"
)

// The namespace API as csi-isilon's CreateVolume reaches it through
// goisilon (api/v1 api_v1_volumes.go): a volume is a directory under the
// driver's isiPath, created with PUT /namespace/<path> and the header
// x-isi-ifs-target-type: container, and looked up with GET
// /namespace/<path>[?metadata]. Only directories are modelled: no files,
// ACLs or quotas.

// baseDirs exist on every simulated cluster: /ifs and csi-isilon's default
// isiPath.
var baseDirs = []string{"/ifs", "/ifs/data", "/ifs/data/csi"}

// addDirLocked records dir and its parents up to /ifs.
func (s *Sim) addDirLocked(dir string) {
	for d := path.Clean(dir); d != "/" && d != "."; d = path.Dir(d) {
		s.dirs[d] = true
	}
}

// serveNamespace serves /namespace/<path>: PUT creates a directory whose
// parent exists (an existing directory is left as it is and answers 200,
// as OneFS does for a container PUT without overwrite; an assumption, the
// driver looks the directory up first); GET answers its metadata or
// (without ?metadata) an empty listing; an unknown path is a 404.
func (s *Sim) serveNamespace(w http.ResponseWriter, r *http.Request, p string) *apiError {
	dir := path.Clean("/" + strings.TrimPrefix(p, "/namespace"))
	if dir != "/ifs" && !strings.HasPrefix(dir, "/ifs/") {
		return errf(http.StatusNotFound, "Path %s not found: only /ifs is served", dir)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch r.Method {
	case http.MethodPut:
		if r.Header.Get("x-isi-ifs-target-type") != "container" {
			return errf(http.StatusBadRequest, "x-isi-ifs-target-type %q: only containers (directories) are modelled",
				r.Header.Get("x-isi-ifs-target-type"))
		}
		if !s.dirs[path.Dir(dir)] {
			return errf(http.StatusNotFound, "Parent directory of %s not found", dir)
		}
		status := http.StatusOK
		if !s.dirs[dir] {
			s.dirs[dir] = true
			s.changes.Touch(collDirectories, dir)
			status = http.StatusCreated
		}
		w.WriteHeader(status)
		return nil
	case http.MethodGet:
		if !s.dirs[dir] {
			return errf(http.StatusNotFound, "Path %s not found", dir)
		}
		if _, ok := r.URL.Query()["metadata"]; ok {
			simcore.WriteJSON(w, http.StatusOK, map[string]any{"attrs": []map[string]any{
				{"name": "name", "value": path.Base(dir), "namespace": nil},
				{"name": "type", "value": "container", "namespace": nil},
				{"name": "mode", "value": "0777", "namespace": nil},
			}})
			return nil
		}
		children := []map[string]string{}
		for d := range s.dirs {
			if path.Dir(d) == dir && d != dir {
				children = append(children, map[string]string{"name": path.Base(d)})
			}
		}
		sort.Slice(children, func(i, j int) bool { return children[i]["name"] < children[j]["name"] })
		simcore.WriteJSON(w, http.StatusOK, map[string]any{"children": children})
		return nil
	}
	return errf(http.StatusMethodNotAllowed, "%s is not allowed on %s", r.Method, dir)
}

// sortedDirsLocked lists the directories.
func (s *Sim) sortedDirsLocked() []string {
	out := make([]string, 0, len(s.dirs))
	for d := range s.dirs {
		out = append(out, d)
	}
	sort.Strings(out)
	return out
}
