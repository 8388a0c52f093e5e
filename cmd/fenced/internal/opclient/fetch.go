package opclient

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/fenced-project/fenced/cmd/fenced/status"
)

// Status GETs the replica's /status and decodes it; it returns the
// document as served too.
func (e *Endpoint) Status(ctx context.Context) ([]byte, status.Status, error) {
	var st status.Status
	url := e.Base + "/status"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, st, fmt.Errorf("status from %s: %w", url, err)
	}
	resp, err := e.HTTP.Do(req)
	if err != nil {
		return nil, st, fmt.Errorf("status from %s: %w", e.Base, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, st, fmt.Errorf("read status from %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		hint := ""
		if resp.StatusCode == http.StatusBadRequest && e.Base[:5] == "http:" {
			hint = " (an HTTPS endpoint? use https://, or --config)"
		}
		return nil, st, fmt.Errorf("status from %s: %s%s", url, resp.Status, hint)
	}
	if err := json.Unmarshal(raw, &st); err != nil {
		return nil, st, fmt.Errorf("decode status from %s: %w", url, err)
	}
	return raw, st, nil
}

// History GETs the replica's fence history, of one cluster or node when
// they are not empty, the newest limit records when limit is above 0.
func (e *Endpoint) History(ctx context.Context, cluster, node string, limit int) (status.History, error) {
	var h status.History
	q := url.Values{}
	for k, v := range map[string]string{"cluster": cluster, "node": node} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	u := e.Base + status.HistoryPath
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return h, fmt.Errorf("history from %s: %w", e.Base, err)
	}
	resp, err := e.HTTP.Do(req)
	if err != nil {
		return h, fmt.Errorf("history from %s: %w", e.Base, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return h, fmt.Errorf("read history from %s: %w", e.Base, err)
	}
	if resp.StatusCode != http.StatusOK {
		return h, fmt.Errorf("history from %s: %s: %s", e.Base, resp.Status, strings.TrimSpace(string(raw)))
	}
	if err := json.Unmarshal(raw, &h); err != nil {
		return h, fmt.Errorf("decode history from %s: %w", e.Base, err)
	}
	return h, nil
}
