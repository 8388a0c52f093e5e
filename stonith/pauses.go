package stonith

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/fenced-project/fenced/cluster/ledger"
)

// PauseHolder is one pause of fencing in effect, as the ledger records it.
type PauseHolder struct {
	// ID names the pause for `fenced resume --id`.
	ID string `json:"id"`
	// Scope is PauseScopeAll for a pause of every cluster, else the
	// cluster's name.
	Scope    string    `json:"scope"`
	Operator string    `json:"operator"`
	Reason   string    `json:"reason"`
	Since    time.Time `json:"since"`
	// UpdatedAt is when the same operator last paused the same scope again.
	UpdatedAt time.Time `json:"updatedAt,omitzero"`
}

// PauseScopeAll is the Scope of a pause of every cluster.
const PauseScopeAll = "all"

// String says who paused what, since when and why.
func (p PauseHolder) String() string {
	scope := "every cluster"
	if p.Scope != PauseScopeAll {
		scope = "cluster " + p.Scope
	}
	return fmt.Sprintf("%s: %s by %s since %s (%s)", p.ID, scope, p.Operator, p.Since.UTC().Format(time.RFC3339), p.Reason)
}

// scopeText names a pause's scope as the answers say it.
func scopeText(cluster string) string {
	if cluster == "" {
		return "all clusters"
	}
	return "cluster " + cluster
}

// PauseHolders converts the ledger's pauses in effect.
func PauseHolders(hs []ledger.PauseHolder) []PauseHolder {
	out := make([]PauseHolder, 0, len(hs))
	for _, h := range hs {
		scope := h.Cluster
		if scope == "" {
			scope = PauseScopeAll
		}
		out = append(out, PauseHolder{ID: h.ID, Scope: scope, Operator: h.Operator, Reason: h.Reason,
			Since: h.At.UTC(), UpdatedAt: h.UpdatedAt.UTC()})
	}
	return out
}

// holders returns every pause in effect.
func (c *Controller) holders() []ledger.PauseHolder {
	var hs []ledger.PauseHolder
	c.cfg.Ledger.Read(func(s *ledger.State) { hs = s.Holders() })
	return hs
}

// StillPaused says what is still paused, one line per pause after the
// first, for the answer to pause and resume.
func StillPaused(hs []PauseHolder) string {
	if len(hs) == 0 {
		return "nothing is paused: fencing runs for every cluster"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "still paused (%d):", len(hs))
	for _, h := range hs {
		b.WriteString("\n  " + h.String())
	}
	return b.String()
}

// stillPaused says what is still paused on one line, for error messages.
func stillPaused(hs []PauseHolder) string {
	if len(hs) == 0 {
		return "nothing is paused: fencing runs for every cluster"
	}
	parts := make([]string, 0, len(hs))
	for _, h := range hs {
		parts = append(parts, h.String())
	}
	return fmt.Sprintf("still paused (%d): %s", len(hs), strings.Join(parts, "; "))
}

// SetPause pauses (paused true) or resumes fencing for one cluster or all.
// While paused no fence is opened on a verdict and no verdict fence changes
// an array; recoveries and operator fences go on. From ledger version 5
// every pause is a holder of its own and a resume ends only the pauses it
// selects (see PauseRequest); in an older group a pause is the single slot
// of its scope, as before. The answer lists every pause still in effect.
func (c *Controller) SetPause(ctx context.Context, operator string, req PauseRequest, paused bool) (ActionResult, error) {
	if err := requireFields([2]string{"reason", req.Reason}, [2]string{"operator", operator}); err != nil {
		return ActionResult{}, err
	}
	if req.Cluster != "" {
		if _, err := c.cluster(req.Cluster); err != nil {
			return ActionResult{}, err
		}
	}
	selectors := 0
	for _, set := range []bool{req.ID != "", req.HeldBy != "", req.All} {
		if set {
			selectors++
		}
	}
	switch {
	case paused && selectors > 0:
		return ActionResult{}, fmt.Errorf("%w: id, heldBy and all select pauses to resume; a pause takes cluster and reason", ErrBadRequest)
	case selectors > 1:
		return ActionResult{}, fmt.Errorf("%w: give at most one of id, heldBy and all", ErrBadRequest)
	case req.ID != "" && req.Cluster != "":
		return ActionResult{}, fmt.Errorf("%w: id names one pause; cluster goes with the other selections", ErrBadRequest)
	}
	l, ctx, cancel, err := c.leaderContext(ctx)
	if err != nil {
		return ActionResult{}, err
	}
	defer cancel()
	var msg string
	if c.groupVersion() >= ledger.PauseHoldersVersion {
		msg, err = c.setPauseHolders(ctx, l, operator, req, paused)
	} else {
		msg, err = c.setPauseSlot(ctx, l, operator, req, paused)
	}
	if err != nil {
		return ActionResult{}, err
	}
	if !paused {
		c.mu.Lock()
		q := c.queue
		c.mu.Unlock()
		if q != nil {
			c.resync(q)
		}
	}
	still := PauseHolders(c.holders())
	return ActionResult{Message: msg, Paused: &still}, nil
}

// setPauseHolders adds a pause holder or ends the selected ones (ledger
// version 5).
func (c *Controller) setPauseHolders(ctx context.Context, l Leadership, operator string, req PauseRequest, paused bool) (string, error) {
	if paused {
		if err := c.commit(ctx, l, &ledger.AddPause{Meta: c.meta(l), Cluster: req.Cluster, Operator: operator,
			Reason: carried(ctx, req.Reason)}); err != nil {
			return "", err
		}
		var added ledger.PauseHolder
		for _, h := range c.holders() {
			if h.Operator == operator && h.Cluster == req.Cluster && !strings.HasPrefix(h.ID, ledger.LegacyPauseID) {
				added = h
			}
		}
		p := PauseHolders([]ledger.PauseHolder{added})[0]
		c.log.Warn("fencing paused", carriedArgs(ctx, "pauseID", p.ID, "scope", p.Scope, "operator", operator, "reason", req.Reason)...)
		return "fencing paused for " + scopeText(req.Cluster) + ": " + p.String(), nil
	}
	all := c.holders()
	chosen := slices.DeleteFunc(slices.Clone(all), func(h ledger.PauseHolder) bool {
		switch {
		case req.ID != "":
			return h.ID != req.ID
		case req.Cluster != "" && h.Cluster != req.Cluster:
			return true
		case req.All:
			return false
		case req.HeldBy != "":
			return h.Operator != req.HeldBy
		}
		return h.Operator != operator
	})
	if len(chosen) == 0 {
		return "", fmt.Errorf("%w: %s; %s", ErrConflict, noPauseSelected(operator, req), stillPaused(PauseHolders(all)))
	}
	ids := make([]string, 0, len(chosen))
	for _, h := range chosen {
		ids = append(ids, h.ID)
	}
	if err := c.commit(ctx, l, &ledger.EndPauses{Meta: c.meta(l), IDs: ids, Operator: operator,
		Reason: carried(ctx, req.Reason)}); err != nil {
		return "", err
	}
	ended := PauseHolders(chosen)
	parts := make([]string, 0, len(ended))
	for _, h := range ended {
		parts = append(parts, h.String())
		c.log.Warn("fencing resumed", carriedArgs(ctx, "pauseID", h.ID, "scope", h.Scope, "pausedBy", h.Operator, "operator", operator,
			"reason", req.Reason)...)
	}
	return "ended " + strings.Join(parts, "; "), nil
}

// noPauseSelected says why a resume selected no pause.
func noPauseSelected(operator string, req PauseRequest) string {
	of := ""
	if req.Cluster != "" {
		of = " of cluster " + req.Cluster
	}
	switch {
	case req.ID != "":
		return "no pause " + req.ID + " is in effect"
	case req.All:
		return "no pause" + of + " is in effect"
	case req.HeldBy != "":
		return req.HeldBy + " holds no pause" + of
	}
	return "you (" + operator + ") hold no pause" + of + "; end another's with --id ID, --held-by NAME or --all"
}

// setPauseSlot sets or clears the single pause slot of a scope, in a group
// that runs a ledger version before ledger.PauseHoldersVersion.
func (c *Controller) setPauseSlot(ctx context.Context, l Leadership, operator string, req PauseRequest, paused bool) (string, error) {
	g := c.groupVersion()
	if req.ID != "" || req.HeldBy != "" {
		return "", fmt.Errorf("%w: resuming a pause by id or holder needs ledger version %d, the group runs %d: upgrade every replica; until then `fenced resume [--cluster C]` ends the single pause of that scope",
			ErrLedgerVersion, ledger.PauseHoldersVersion, g)
	}
	scopes := []string{req.Cluster}
	if req.All && !paused {
		scopes = nil
		for _, h := range c.holders() {
			if req.Cluster == "" || h.Cluster == req.Cluster {
				scopes = append(scopes, h.Cluster)
			}
		}
	}
	for _, scope := range scopes {
		if err := c.commit(ctx, l, &ledger.SetPause{Meta: c.meta(l), Cluster: scope, Paused: paused,
			Operator: operator, Reason: carried(ctx, req.Reason)}); err != nil {
			return "", err
		}
	}
	names := make([]string, 0, len(scopes))
	for _, s := range scopes {
		if s == "" {
			s = "all clusters"
		} else {
			s = "cluster " + s
		}
		names = append(names, s)
	}
	verb := "resumed"
	if paused {
		verb = "paused"
	}
	c.log.Warn("fencing "+verb, carriedArgs(ctx, "scope", strings.Join(names, ", "), "operator", operator, "reason", req.Reason,
		"groupLedgerVersion", g)...)
	if len(names) == 0 {
		return "no pause was in effect", nil
	}
	return fmt.Sprintf("fencing %s for %s (the group runs ledger version %d: a pause is one slot per scope, the last one's operator and reason win and one resume ends it, until every replica runs version %d)",
		verb, strings.Join(names, ", "), g, ledger.PauseHoldersVersion), nil
}
