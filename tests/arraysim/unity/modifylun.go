package unity

import (
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
)

type modifyLunBody struct {
	LunParameters *struct {
		HostAccess *[]struct {
			Host *struct {
				ID string `json:"id"`
			} `json:"host"`
			AccessMask json.RawMessage `json:"accessMask"`
		} `json:"hostAccess"`
	} `json:"lunParameters"`
}

// modifyLun replaces a LUN's host access with the list sent. Hosts that keep
// access keep their HLU; new hosts get the lowest HLU they do not use. A
// request that changes nothing fails with "nothing to modify" (0x6701020),
// as Unity does. Success is 204 with no body.
func (s *Sim) modifyLun(w http.ResponseWriter, r *http.Request, id string) {
	var body modifyLunBody
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		s.fail(w, http.StatusUnprocessableEntity, CodeBadRequest, "Invalid JSON in request body: %v", err)
		return
	}
	if body.LunParameters == nil || body.LunParameters.HostAccess == nil {
		s.fail(w, http.StatusUnprocessableEntity, CodeNothingToModify, "Nothing to modify")
		return
	}
	type want struct {
		host string
		mask int
	}
	var wants []want
	for i, e := range *body.LunParameters.HostAccess {
		if e.Host == nil || e.Host.ID == "" {
			s.fail(w, http.StatusUnprocessableEntity, CodeBadRequest, "hostAccess[%d].host.id is required", i)
			return
		}
		mask := 1
		if len(e.AccessMask) > 0 {
			var str string
			if err := json.Unmarshal(e.AccessMask, &str); err == nil {
				mask, err = strconv.Atoi(str)
				if err != nil {
					mask = -1
				}
			} else if err := json.Unmarshal(e.AccessMask, &mask); err != nil {
				mask = -1
			}
		}
		if mask < 0 || mask > 3 {
			s.fail(w, http.StatusUnprocessableEntity, CodeBadRequest, "hostAccess[%d].accessMask %s is not a HostLUNAccessEnum", i, e.AccessMask)
			return
		}
		for _, p := range wants {
			if p.host == e.Host.ID {
				s.fail(w, http.StatusUnprocessableEntity, CodeBadRequest, "hostAccess lists host %s twice", e.Host.ID)
				return
			}
		}
		wants = append(wants, want{e.Host.ID, mask})
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.luns[id]
	if l == nil {
		s.fail(w, http.StatusNotFound, CodeNotFound, "The requested storage resource does not exist")
		return
	}
	for _, p := range wants {
		if s.hosts[p.host] == nil {
			s.fail(w, http.StatusNotFound, CodeNotFound, "The specified host %s does not exist", p.host)
			return
		}
	}
	var next []access
	for _, p := range wants {
		i := slices.IndexFunc(l.HostAccess, func(a access) bool { return a.Host == p.host })
		if i >= 0 {
			next = append(next, access{Host: p.host, HLU: l.HostAccess[i].HLU, AccessMask: p.mask})
		}
	}
	s.changes.Touch(collLUNs, l.ID)
	// New hosts pick their HLUs after the kept ones are settled.
	old := l.HostAccess
	l.HostAccess = next
	for _, p := range wants {
		if !slices.ContainsFunc(old, func(a access) bool { return a.Host == p.host }) {
			l.HostAccess = append(l.HostAccess, access{Host: p.host, HLU: s.freeHLULocked(p.host), AccessMask: p.mask})
		}
	}
	if slices.Equal(sortedAccess(old), sortedAccess(l.HostAccess)) {
		l.HostAccess = old
		s.fail(w, http.StatusUnprocessableEntity, CodeNothingToModify, "Nothing to modify")
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
