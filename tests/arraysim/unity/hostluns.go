package unity

import (
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/fenced-project/fenced/tests/arraysim/simcore"
)

// hostLUN objects: Unity's record of one LUN (or LUN snapshot) a host has
// access to, with the HLU the host sees it at. The array keeps one per
// host-access entry of a LUN; its ID joins the host, the LUN and "prod"
// (production access) or "snap" (snapshot access), like Host_1_sv_1_prod.
// Fields per the REST API reference (type hostLUN): id, host, type
// (HostLUNTypeEnum: 1 LUN, 2 LUN_Snap), hlu, lun, snap, isReadOnly. A
// host's hostLUNs field lists the IDs. gounity has no call for either;
// clients read them with its api package (GET
// /api/types/hostLUN/instances?filter=host.id eq "Host_1").

const (
	hostLUNTypeLUN = 1
	// accessProduction and accessBoth are the HostLUNAccessEnum values that
	// give a host the production LUN (1 Production, 3 Both).
	accessProduction = 1
	accessBoth       = 3
)

type hostLUN struct {
	id   string
	host string
	lun  string
	hlu  int
}

// hostLUNsLocked lists the hostLUNs keep selects, in host, then LUN, ID
// order. Only production access makes one here: the simulator has no LUN
// snapshots.
func (s *Sim) hostLUNsLocked(keep func(hostLUN) bool) []hostLUN {
	var out []hostLUN
	for lid, l := range s.luns {
		for _, a := range l.HostAccess {
			if a.AccessMask != accessProduction && a.AccessMask != accessBoth {
				continue
			}
			h := hostLUN{id: a.Host + "_" + lid + "_prod", host: a.Host, lun: lid, hlu: a.HLU}
			if keep(h) {
				out = append(out, h)
			}
		}
	}
	slices.SortFunc(out, func(a, b hostLUN) int {
		if c := newIDKey(a.host).compare(newIDKey(b.host)); c != 0 {
			return c
		}
		return newIDKey(a.lun).compare(newIDKey(b.lun))
	})
	return out
}

func hostLUNJSON(h hostLUN) map[string]any {
	return map[string]any{
		"id": h.id, "host": idRef{h.host}, "type": hostLUNTypeLUN, "hlu": h.hlu, "lun": idRef{h.lun}, "isReadOnly": false,
	}
}

// hostLUNIDsLocked lists the IDs of the host's hostLUNs, as the host's
// hostLUNs field does.
func (s *Sim) hostLUNIDsLocked(hostID string) []string {
	var ids []string
	for _, h := range s.hostLUNsLocked(func(h hostLUN) bool { return h.host == hostID }) {
		ids = append(ids, h.id)
	}
	return ids
}

// filterClauseRE is one clause of a Unity filter the simulator supports:
// <attribute> eq "<value>" or <attribute> eq <number>.
var filterClauseRE = regexp.MustCompile(`^\s*([A-Za-z.]+)\s+(?i:eq)\s+("([^"]*)"|[0-9]+)\s*$`)

var filterAndRE = regexp.MustCompile(`(?i)\s+and\s+`)

// parseFilter parses clauses joined by "and" into attribute -> value.
// Only the attributes in allowed may appear.
func parseFilter(filter string, allowed ...string) (map[string]string, error) {
	out := map[string]string{}
	if strings.TrimSpace(filter) == "" {
		return out, nil
	}
	for _, clause := range filterAndRE.Split(filter, -1) {
		m := filterClauseRE.FindStringSubmatch(clause)
		if m == nil {
			return nil, fmt.Errorf("the filter clause %q is not supported (want <attribute> eq \"<value>\")", clause)
		}
		attr, val := m[1], m[2]
		if m[3] != "" || strings.HasPrefix(val, `"`) {
			val = m[3]
		}
		ok := false
		for _, a := range allowed {
			ok = ok || a == attr
		}
		if !ok {
			return nil, fmt.Errorf("the filter attribute %q is not an attribute of this type (or not one the simulator filters on)", attr)
		}
		out[attr] = val
	}
	return out, nil
}

// pageOf reads per_page (1..2000, default 2000) and page (from 1).
func pageOf(r *http.Request) (perPage, page int, err error) {
	q := r.URL.Query()
	perPage, page = 2000, 1
	if v := q.Get("per_page"); v != "" {
		if perPage, err = strconv.Atoi(v); err != nil || perPage < 1 || perPage > 2000 {
			return 0, 0, fmt.Errorf("per_page %q must be 1..2000", v)
		}
	}
	if v := q.Get("page"); v != "" {
		if page, err = strconv.Atoi(v); err != nil || page < 1 {
			return 0, 0, fmt.Errorf("page %q must be >= 1", v)
		}
	}
	return perPage, page, nil
}

// listHostLUNsLocked serves GET /api/types/hostLUN/instances with an
// optional filter on id, host.id, lun.id, type and hlu, paged like LUNs.
func (s *Sim) listHostLUNsLocked(w http.ResponseWriter, r *http.Request) {
	perPage, page, err := pageOf(r)
	if err != nil {
		s.fail(w, http.StatusUnprocessableEntity, CodeBadRequest, "%v", err)
		return
	}
	f, err := parseFilter(r.URL.Query().Get("filter"), "id", "host.id", "lun.id", "type", "hlu")
	if err != nil {
		s.fail(w, http.StatusUnprocessableEntity, CodeBadRequest, "%v", err)
		return
	}
	match := s.hostLUNsLocked(func(h hostLUN) bool {
		return (f["id"] == "" || f["id"] == h.id) && (f["host.id"] == "" || f["host.id"] == h.host) &&
			(f["lun.id"] == "" || f["lun.id"] == h.lun) && (f["type"] == "" || f["type"] == strconv.Itoa(hostLUNTypeLUN)) &&
			(f["hlu"] == "" || f["hlu"] == strconv.Itoa(h.hlu))
	})
	contents := []any{}
	for i := (page - 1) * perPage; i < len(match) && i < page*perPage; i++ {
		contents = append(contents, hostLUNJSON(match[i]))
	}
	body := list(contents)
	body["entryCount"] = len(match)
	simcore.WriteJSON(w, http.StatusOK, body)
}

// hostLUNLocked finds one hostLUN by ID.
func (s *Sim) hostLUNLocked(id string) (hostLUN, bool) {
	if hs := s.hostLUNsLocked(func(h hostLUN) bool { return h.id == id }); len(hs) == 1 {
		return hs[0], true
	}
	return hostLUN{}, false
}

// wantsField reports whether the request's fields parameter names f.
// gounity's field lists carry a literal '?' ("hostIPPorts?fields"): only
// the part before one counts.
func wantsField(r *http.Request, f string) bool {
	for _, name := range strings.Split(r.URL.Query().Get("fields"), ",") {
		name, _, _ = strings.Cut(strings.TrimSpace(name), "?")
		if name == f {
			return true
		}
	}
	return false
}
