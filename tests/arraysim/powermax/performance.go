package powermax

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/fenced-project/fenced/tests/arraysim/simcore"
)

// volumeMetricsQuery is the body of POST performance/Volume/metrics.
type volumeMetricsQuery struct {
	SystemID         string   `json:"systemId"`
	StartDate        int64    `json:"startDate"`
	EndDate          int64    `json:"endDate"`
	VolumeStartRange string   `json:"volumeStartRange"`
	VolumeEndRange   string   `json:"volumeEndRange"`
	DataFormat       string   `json:"dataFormat"`
	StorageGroups    string   `json:"commaSeparatedStorageGroupList"`
	Metrics          []string `json:"metrics"`
}

// maxSamples bounds the samples in one volume result.
const maxSamples = 120

func (s *Sim) servePerformance(w http.ResponseWriter, r *http.Request, parts []string) {
	switch strings.Join(parts, "/") {
	case "Array/keys":
		s.only(w, r, http.MethodGet, func() {
			s.mu.Lock()
			last := s.lastSampleLocked()
			s.mu.Unlock()
			simcore.WriteJSON(w, http.StatusOK, map[string]any{"arrayInfo": []map[string]any{{
				"symmetrixId":        s.spec.SymmetrixID,
				"firstAvailableDate": last.Add(-24 * time.Hour).UnixMilli(),
				"lastAvailableDate":  last.UnixMilli(),
			}}})
		})
	case "Volume/metrics":
		s.only(w, r, http.MethodPost, func() { s.volumeMetrics(w, r) })
	default:
		s.fail(w, http.StatusNotFound, "Resource not found: %s", r.URL.Path)
	}
}

// lastSampleLocked is the time of the newest performance sample.
func (s *Sim) lastSampleLocked() time.Time {
	return s.now().Truncate(s.interval)
}

// volumeMetrics answers a volume metrics query with one result per
// matching volume. A query that matches no volume is a 400, never an empty
// result list (gopowermax callers index result[0]).
func (s *Sim) volumeMetrics(w http.ResponseWriter, r *http.Request) {
	var q volumeMetricsQuery
	if err := json.NewDecoder(r.Body).Decode(&q); err != nil {
		s.fail(w, http.StatusBadRequest, "Invalid JSON in request body: %v", err)
		return
	}
	switch {
	case q.SystemID != s.spec.SymmetrixID:
		s.fail(w, http.StatusBadRequest, "systemId %q is not a registered array for performance", q.SystemID)
		return
	case q.DataFormat != "Average" && q.DataFormat != "Maximum":
		s.fail(w, http.StatusBadRequest, "dataFormat %q must be Average or Maximum", q.DataFormat)
		return
	case len(q.Metrics) == 0:
		s.fail(w, http.StatusBadRequest, "metrics must not be empty")
		return
	case q.StartDate <= 0 || q.EndDate < q.StartDate:
		s.fail(w, http.StatusBadRequest, "startDate %d and endDate %d do not form a time range", q.StartDate, q.EndDate)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var vols []*volume
	for _, id := range sortedKeys(s.volumes) {
		v := s.volumes[id]
		switch {
		case q.VolumeStartRange != "":
			end := q.VolumeEndRange
			if end == "" {
				end = q.VolumeStartRange
			}
			if id < q.VolumeStartRange || id > end {
				continue
			}
		case q.StorageGroups != "":
			match := false
			for _, g := range strings.Split(q.StorageGroups, ",") {
				match = match || slices.Contains(v.Groups, strings.TrimSpace(g))
			}
			if !match {
				continue
			}
		}
		vols = append(vols, v)
	}
	if len(vols) == 0 {
		s.fail(w, http.StatusBadRequest, "No volumes found for the requested range or storage groups")
		return
	}
	last := s.lastSampleLocked()
	var times []int64
	for t := last; !t.Before(time.UnixMilli(q.StartDate)) && len(times) < maxSamples; t = t.Add(-s.interval) {
		if t.UnixMilli() <= q.EndDate {
			times = append(times, t.UnixMilli())
		}
	}
	slices.Reverse(times)
	results := make([]map[string]any, 0, len(vols))
	for _, v := range vols {
		rate := 0.0
		if s.volumeBusy(v) {
			rate = 240
		}
		samples := make([]map[string]any, 0, len(times))
		for _, ts := range times {
			samples = append(samples, map[string]any{
				"timestamp": ts, "IoRate": rate, "Reads": rate / 2, "Writes": rate / 2,
				"MBRead": rate / 64, "MBWritten": rate / 64, "ReadResponseTime": 0.2, "WriteResponseTime": 0.3,
			})
		}
		results = append(results, map[string]any{
			"volumeId": v.ID, "storageGroups": strings.Join(slices.Sorted(slices.Values(v.Groups)), ","), "volumeResult": samples,
		})
	}
	simcore.WriteJSON(w, http.StatusOK, map[string]any{
		"id": "sim-perf-" + s.spec.SymmetrixID, "count": len(results), "maxPageSize": 1000,
		"expirationTime": s.now().Add(5 * time.Minute).UnixMilli(),
		"resultList":     map[string]any{"result": results, "from": 1, "to": len(results)},
	})
}
