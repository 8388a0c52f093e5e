package stonith

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// Client calls a replica's pipeline API (`fenced fence|unfence|pause|resume`).
// Mutating calls may go to any replica: followers forward them to the leader.
type Client struct {
	// BaseURL is the replica's HTTP endpoint, e.g. "https://mgmt1:9443".
	BaseURL string
	// Token is the API token (empty when a client certificate is used
	// through HTTP's TLS configuration).
	Token string
	// Operator optionally names the person behind the token in the ledger.
	Operator string
	// HTTP is the client to use; nil means http.DefaultClient.
	HTTP *http.Client
}

// APIError is a refusal by the API.
type APIError struct {
	StatusCode int
	Message    string
}

func (e *APIError) Error() string {
	return fmt.Sprintf("fenced API: %d %s: %s", e.StatusCode, http.StatusText(e.StatusCode), e.Message)
}

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }

func (c *Client) do(ctx context.Context, route string, in, out any) error {
	method, path, _ := strings.Cut(route, " ")
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("encode request: %w", err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(c.BaseURL, "/")+path, body)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	req.Header.Set("Content-Type", "application/json")
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	if c.Operator != "" {
		req.Header.Set(OperatorHeader, c.Operator)
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return fmt.Errorf("%s %s: read answer: %w", method, path, err)
	}
	if resp.StatusCode != http.StatusOK {
		var eb errorBody
		if json.Unmarshal(raw, &eb) != nil || eb.Error == "" {
			eb.Error = strings.TrimSpace(string(raw))
		}
		return &APIError{StatusCode: resp.StatusCode, Message: eb.Error}
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("%s %s: decode answer: %w", method, path, err)
	}
	return nil
}

// Fence asks to fence a node.
func (c *Client) Fence(ctx context.Context, req FenceRequest) (ActionResult, error) {
	var res ActionResult
	return res, c.do(ctx, RouteFence, req, &res)
}

// Unfence asks to restore a fenced node.
func (c *Client) Unfence(ctx context.Context, req UnfenceRequest) (ActionResult, error) {
	var res ActionResult
	return res, c.do(ctx, RouteUnfence, req, &res)
}

// Pause pauses fencing (one cluster, or all when req.Cluster is empty).
func (c *Client) Pause(ctx context.Context, req PauseRequest) (ActionResult, error) {
	var res ActionResult
	return res, c.do(ctx, RoutePause, req, &res)
}

// Resume resumes fencing.
func (c *Client) Resume(ctx context.Context, req PauseRequest) (ActionResult, error) {
	var res ActionResult
	return res, c.do(ctx, RouteResume, req, &res)
}

// Confirm records an operator's confirmation that a fenced node cannot
// write to an array (or is powered off).
func (c *Client) Confirm(ctx context.Context, req ConfirmRequest) (ActionResult, error) {
	var res ActionResult
	return res, c.do(ctx, RouteConfirm, req, &res)
}

// Abandon records an operator's decision that the unfence of a node does
// not restore access on an array confirmed gone for its fence.
func (c *Client) Abandon(ctx context.Context, req AbandonRequest) (ActionResult, error) {
	var res ActionResult
	return res, c.do(ctx, RouteAbandon, req, &res)
}

// Plan reads what a fence of the node would cut now (read-only).
func (c *Client) Plan(ctx context.Context, req PlanRequest) (NodePlan, error) {
	var res NodePlan
	q := url.Values{"cluster": {req.Cluster}, "node": {req.Node}}
	return res, c.do(ctx, RoutePlan+"?"+q.Encode(), nil, &res)
}

// Fences returns the pipeline's status section.
func (c *Client) Fences(ctx context.Context) (Status, error) {
	var st Status
	return st, c.do(ctx, RouteFences, nil, &st)
}
