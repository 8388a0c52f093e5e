package unity

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/fenced-project/fenced/tests/arraysim/simcore"
)

// csi-unity's node plugin registers its node (service/node.go
// addNodeInformationIntoArray, createHost) with gounity's CreateHost
// (POST /api/types/host/instances {type, name, description, osType,
// tenant}), CreateHostIPPort (POST /api/types/hostIPPort/instances {host:
// {id}, address}) and CreateHostInitiator (POST
// /api/types/hostInitiator/instances {host: {id}, initiatorType,
// initiatorWWNorIqn}); each answers 201 with {"content": {"id"}}, which
// gounity decodes. gounity looks an initiator up by name before it creates
// one (FindHostInitiatorByName), so the driver never asks the array to
// register an initiator another host has; the simulator refuses that
// with 409, its own choice of status.

// createHost answers POST /api/types/host/instances.
func (s *Sim) createHost(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Type        string          `json:"type"`
		Name        string          `json:"name"`
		Description string          `json:"description"`
		OSType      string          `json:"osType"`
		Tenant      json.RawMessage `json:"tenant"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		s.fail(w, http.StatusUnprocessableEntity, CodeBadRequest, "Invalid JSON in request body: %v", err)
		return
	}
	if body.Name == "" || strings.TrimSpace(body.Name) != body.Name {
		s.fail(w, http.StatusUnprocessableEntity, CodeBadRequest, "name %q is not a valid host name", body.Name)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.hosts) + 1
	for s.hosts[fmt.Sprintf("Host_%d", n)] != nil {
		n++
	}
	h := &host{ID: fmt.Sprintf("Host_%d", n), Name: body.Name, Connected: true}
	s.hosts[h.ID] = h
	s.changes.Touch(collHosts, h.ID)
	simcore.WriteJSON(w, http.StatusCreated, one(map[string]any{"id": h.ID}))
}

// createHostIPPort answers POST /api/types/hostIPPort/instances.
func (s *Sim) createHostIPPort(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Host    *idRef `json:"host"`
		Address string `json:"address"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		s.fail(w, http.StatusUnprocessableEntity, CodeBadRequest, "Invalid JSON in request body: %v", err)
		return
	}
	if body.Host == nil || body.Address == "" {
		s.fail(w, http.StatusUnprocessableEntity, CodeBadRequest, "host.id and address are required")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.hosts[body.Host.ID]
	if h == nil {
		s.fail(w, http.StatusNotFound, CodeNotFound, "The specified host %s does not exist", body.Host.ID)
		return
	}
	n := len(s.ipPorts) + 1
	for s.ipPorts[fmt.Sprintf("HostNetworkAddress_%d", n)] != nil {
		n++
	}
	p := &ipPort{ID: fmt.Sprintf("HostNetworkAddress_%d", n), Address: body.Address, Host: h.ID}
	s.ipPorts[p.ID] = p
	h.IPPorts = append(h.IPPorts, p.ID)
	s.changes.Touch(collIPPorts, p.ID)
	s.changes.Touch(collHosts, h.ID)
	simcore.WriteJSON(w, http.StatusCreated, one(map[string]any{"id": p.ID}))
}

// createHostInitiator answers POST /api/types/hostInitiator/instances
// (initiatorType "1" FC, "2" iSCSI: gounity's api constants send them as
// JSON strings; a number is accepted too).
func (s *Sim) createHostInitiator(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Host    *idRef          `json:"host"`
		RawType json.RawMessage `json:"initiatorType"`
		WWN     string          `json:"initiatorWWNorIqn"`
		Type    int             `json:"-"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		s.fail(w, http.StatusUnprocessableEntity, CodeBadRequest, "Invalid JSON in request body: %v", err)
		return
	}
	switch strings.Trim(string(body.RawType), `"`) {
	case "1":
		body.Type = 1
	case "2":
		body.Type = 2
	}
	if body.Host == nil || body.WWN == "" || body.Type == 0 {
		s.fail(w, http.StatusUnprocessableEntity, CodeBadRequest, "host.id, initiatorWWNorIqn and an initiatorType of 1 (FC) or 2 (iSCSI) are required")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.hosts[body.Host.ID]
	if h == nil {
		s.fail(w, http.StatusNotFound, CodeNotFound, "The specified host %s does not exist", body.Host.ID)
		return
	}
	for _, in := range s.initiators {
		if strings.EqualFold(in.InitiatorID, body.WWN) {
			s.fail(w, http.StatusConflict, CodeBadRequest, "The initiator %s is already registered with host %s", body.WWN, in.Host)
			return
		}
	}
	n := len(s.initiators) + 1
	for s.initiators[fmt.Sprintf("HostInitiator_%d", n)] != nil {
		n++
	}
	in := &initiator{ID: fmt.Sprintf("HostInitiator_%d", n), Type: body.Type, InitiatorID: body.WWN, Host: h.ID}
	s.initiators[in.ID] = in
	if body.Type == 1 {
		h.FC = append(h.FC, in.ID)
	} else {
		h.ISCSI = append(h.ISCSI, in.ID)
	}
	s.changes.Touch(collInitiators, in.ID)
	s.changes.Touch(collHosts, h.ID)
	simcore.WriteJSON(w, http.StatusCreated, one(map[string]any{"id": in.ID}))
}
