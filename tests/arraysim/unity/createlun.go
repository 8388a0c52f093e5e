package unity

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/fenced-project/fenced/tests/arraysim/simcore"
)

// Provisioning, as csi-unity's CreateVolume reaches it through gounity
// (volume.go CreateLun): the storage pool by ID, the two license checks
// and POST /api/types/storageResource/action/createLun.

// poolID and poolName are the one storage pool the simulator has.
const (
	poolID   = "pool_1"
	poolName = "pool1"
)

// maxLUNName is Unity's limit on a LUN name (gounity checks it too).
const maxLUNName = 63

// licenses are the features the simulated array is licensed for.
var licenses = []string{"THIN_PROVISIONING", "DATA_REDUCTION"}

func poolJSON() map[string]any {
	return map[string]any{
		"id": poolID, "name": poolName, "description": "", "type": 2, "isAllFlash": true, "isFASTCacheEnabled": false,
		"sizeFree": uint64(10) << 40, "sizeTotal": uint64(20) << 40, "sizeUsed": uint64(10) << 40, "sizeSubscribed": uint64(10) << 40,
		"hasDataReductionEnabledLuns": false, "hasDataReductionEnabledFs": false,
		"poolFastVP": map[string]any{"status": 0, "relocationRate": 0, "type": 0, "isScheduleEnabled": false},
	}
}

// licenseJSON renders a license by its ID (the feature name); false when
// the array has no such license.
func licenseJSON(id string) (map[string]any, bool) {
	for _, l := range licenses {
		if l == id {
			return map[string]any{"id": id, "name": id, "isInstalled": true, "isValid": true}, true
		}
	}
	return nil, false
}

type createLunBody struct {
	Name          string `json:"name"`
	Description   string `json:"description"`
	LunParameters *struct {
		Pool *struct {
			ID string `json:"id"`
		} `json:"pool"`
		Size                   json.Number     `json:"size"`
		IsThinEnabled          string          `json:"isThinEnabled"`
		IsDataReductionEnabled string          `json:"isDataReductionEnabled"`
		FastVPParameters       json.RawMessage `json:"fastVPParameters"`
		IoLimitParameters      json.RawMessage `json:"ioLimitParameters"`
		HostAccess             json.RawMessage `json:"hostAccess"`
	} `json:"lunParameters"`
}

// createLun creates a LUN in the pool, with no host access, and answers
// 201 with its storage resource's ID as Unity does. A name in use is a 409
// (the simulator's choice of status; csi-unity looks a name up before it
// creates one, so it does not depend on the answer).
func (s *Sim) createLun(w http.ResponseWriter, r *http.Request) {
	var body createLunBody
	dec := json.NewDecoder(r.Body)
	dec.UseNumber()
	if err := dec.Decode(&body); err != nil {
		s.fail(w, http.StatusUnprocessableEntity, CodeBadRequest, "Invalid JSON in request body: %v", err)
		return
	}
	p := body.LunParameters
	switch {
	case body.Name == "" || len(body.Name) > maxLUNName || strings.TrimSpace(body.Name) != body.Name:
		s.fail(w, http.StatusUnprocessableEntity, CodeBadRequest, "name %q is not a valid LUN name (1..%d characters)", body.Name, maxLUNName)
		return
	case p == nil || p.Pool == nil || p.Pool.ID == "":
		s.fail(w, http.StatusUnprocessableEntity, CodeBadRequest, "lunParameters.pool.id is required")
		return
	case p.Pool.ID != poolID:
		s.fail(w, http.StatusNotFound, CodeNotFound, "The specified pool %s does not exist", p.Pool.ID)
		return
	case len(p.HostAccess) > 0:
		s.fail(w, http.StatusUnprocessableEntity, CodeBadRequest, "lunParameters.hostAccess at creation is not modelled by the simulator")
		return
	}
	size, err := strconv.ParseUint(p.Size.String(), 10, 64)
	if err != nil || size == 0 {
		s.fail(w, http.StatusUnprocessableEntity, CodeBadRequest, "lunParameters.size %q is not a positive number of bytes", p.Size)
		return
	}
	for _, f := range []struct{ name, v string }{{"isThinEnabled", p.IsThinEnabled}, {"isDataReductionEnabled", p.IsDataReductionEnabled}} {
		if _, err := strconv.ParseBool(f.v); f.v != "" && err != nil {
			s.fail(w, http.StatusUnprocessableEntity, CodeBadRequest, "lunParameters.%s %q is not a boolean", f.name, f.v)
			return
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range s.luns {
		if l.Name == body.Name {
			s.fail(w, http.StatusConflict, CodeNameInUse, "The LUN name %s is already in use", body.Name)
			return
		}
	}
	n := len(s.luns) + 1
	for s.luns[fmt.Sprintf("sv_%d", n)] != nil {
		n++
	}
	l := &lun{ID: fmt.Sprintf("sv_%d", n), Name: body.Name, Size: size, WWN: lunWWN(n - 1)}
	s.luns[l.ID] = l
	s.changes.Touch(collLUNs, l.ID)
	simcore.WriteJSON(w, http.StatusCreated, one(map[string]any{"storageResource": idRef{l.ID}}))
}

// lunWWN is the WWN of the i-th LUN (from 0).
func lunWWN(i int) string {
	return fmt.Sprintf("60:06:01:60:0B:C0:52:00:5A:5B:C0:6C:00:%02X:%02X:%02X", (i>>16)&0xff, (i>>8)&0xff, i&0xff)
}
