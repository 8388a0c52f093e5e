package unity

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/fenced-project/fenced/tests/arraysim/simcore"
)

// lunMetricPath matches the per-LUN real-time metrics the simulator serves.
var lunMetricPath = regexp.MustCompile(`^sp\.\*\.storage\.lun\.\*\.(currentIOCount|readsRate|writesRate)$`)

// createQuery answers POST metricRealTimeQuery/instances {paths, interval}.
func (s *Sim) createQuery(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Paths    []string `json:"paths"`
		Interval int      `json:"interval"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		s.fail(w, http.StatusUnprocessableEntity, CodeBadRequest, "Invalid JSON in request body: %v", err)
		return
	}
	if len(body.Paths) == 0 {
		s.fail(w, http.StatusUnprocessableEntity, CodeBadRequest, "paths must not be empty")
		return
	}
	for _, p := range body.Paths {
		if !lunMetricPath.MatchString(p) {
			s.fail(w, http.StatusUnprocessableEntity, CodeBadRequest, "The metric path %s is not available in real time", p)
			return
		}
	}
	if body.Interval < 5 || body.Interval%5 != 0 {
		s.fail(w, http.StatusUnprocessableEntity, CodeBadRequest, "interval %d must be a multiple of 5 seconds", body.Interval)
		return
	}
	s.mu.Lock()
	q := &metricQuery{ID: s.nextQuery, Paths: body.Paths, Interval: body.Interval}
	s.queries[q.ID] = q
	s.nextQuery++
	now := s.now()
	s.mu.Unlock()
	out := one(map[string]any{
		"id": q.ID, "paths": q.Paths, "interval": q.Interval, "maximumSamples": 60,
		"expiration": now.Add(time.Hour).UTC().Format("2006-01-02T15:04:05.000Z"),
	})
	simcore.WriteJSON(w, http.StatusCreated, out)
}

func (s *Sim) deleteQuery(w http.ResponseWriter, id string) {
	n, err := strconv.Atoi(id)
	s.mu.Lock()
	_, ok := s.queries[n]
	delete(s.queries, n)
	s.mu.Unlock()
	if err != nil || !ok {
		s.fail(w, http.StatusNotFound, CodeNotFound, "The requested metric query does not exist")
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// queryResultsLocked answers GET metricQueryResult/instances?filter=queryId eq N
// with the latest sample of every path of the query: values are nested
// maps of strings, per SP then per LUN. An unknown (expired) query yields
// no entries, as on the array.
func (s *Sim) queryResultsLocked(w http.ResponseWriter, r *http.Request) {
	filter := r.URL.Query().Get("filter")
	var id int
	if _, err := fmt.Sscanf(strings.TrimSpace(filter), "queryId eq %d", &id); err != nil {
		s.fail(w, http.StatusUnprocessableEntity, CodeBadRequest, "filter %q must be \"queryId eq <id>\"", filter)
		return
	}
	q := s.queries[id]
	contents := []any{}
	if q != nil {
		ts := s.now().UTC().Truncate(time.Duration(q.Interval) * time.Second).Format("2006-01-02T15:04:05.000Z")
		for _, p := range q.Paths {
			values := map[string]map[string]string{"spa": {}, "spb": {}}
			for _, lid := range sortedIDs(s.luns) {
				l := s.luns[lid]
				v := 0
				if s.lunBusyLocked(l) {
					v = 4
					if !strings.HasSuffix(p, "currentIOCount") {
						v = 180
					}
				}
				n := newIDKey(l.ID).n
				owner, other := "spa", "spb"
				if n%2 == 0 {
					owner, other = "spb", "spa"
				}
				values[owner][l.ID] = strconv.Itoa(v)
				values[other][l.ID] = "0"
			}
			contents = append(contents, map[string]any{"queryId": q.ID, "path": p, "timestamp": ts, "values": values})
		}
	}
	simcore.WriteJSON(w, http.StatusOK, list(contents))
}
