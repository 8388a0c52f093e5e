package replica

import (
	"context"
	"errors"
	"fmt"

	"github.com/fenced-project/fenced/cmd/fenced/internal/daemon"
	"github.com/fenced-project/fenced/cmd/fenced/internal/online"
	"github.com/fenced-project/fenced/configs"
	"github.com/fenced-project/fenced/kube"
)

// ValidateResult is one file's result of `fenced config validate` (its
// -o json form).
type ValidateResult struct {
	File     string            `json:"file"`
	Valid    bool              `json:"valid"`
	Summary  string            `json:"summary,omitempty"`
	Problems []ValidateProblem `json:"problems,omitempty"`
	Warnings []ValidateProblem `json:"warnings,omitempty"`
	// Error is a failure that is not a list of problems (an unreadable
	// file, or what fenced run refuses).
	Error string `json:"error,omitempty"`
	// Targets are the online checks' results, one per array and cluster
	// (validate --online), when the file is valid.
	Targets []online.Target `json:"targets,omitempty"`
}

// OnlineFailed reports whether an online check of a valid file failed.
func (r ValidateResult) OnlineFailed() bool {
	for _, t := range r.Targets {
		if !t.OK() {
			return true
		}
	}
	return false
}

// ValidateProblem is a configs.Problem with JSON names.
type ValidateProblem struct {
	Field   string `json:"field,omitempty"`
	Line    int    `json:"line,omitempty"`
	Env     string `json:"env,omitempty"`
	Message string `json:"message"`
}

// problems gives configs problems their JSON names.
func problems(ps []configs.Problem) []ValidateProblem {
	var out []ValidateProblem
	for _, p := range ps {
		out = append(out, ValidateProblem{Field: p.Path, Line: p.Line, Env: p.Env, Message: p.Message})
	}
	return out
}

// ValidateFile checks one configuration file: the loader's checks with the
// contents of every file it names, then, when every credential could be
// read, what the runtime checks before it starts (daemon.New and
// preflight, the code fenced run uses).
func ValidateFile(f, credDir string) ValidateResult {
	return ValidateFileOnline(context.Background(), f, credDir, false)
}

// ValidateFileOnline is ValidateFile and, with connect set and the file
// valid, the online checks of every array and cluster (online.Check). The
// online checks need every credential: a file whose credentials could not
// be read is reported invalid for --online.
func ValidateFileOnline(ctx context.Context, f, credDir string, connect bool) ValidateResult {
	r := ValidateResult{File: f}
	cfg, err := configs.Load(f, configs.Options{CredentialsDir: credDir, CheckContents: true, CheckKubeconfig: kube.CheckKubeconfig})
	var pe *configs.ProblemsError
	switch {
	case errors.As(err, &pe):
		r.Problems, r.Error = problems(pe.Problems), pe.Error()
		return r
	case err != nil:
		r.Error = fmt.Sprintf("%s: %v", f, err)
		return r
	}
	r.Warnings = problems(cfg.Warnings())
	if unchecked := cfg.UncheckedCredentials(); connect && len(unchecked) > 0 {
		r.Error = fmt.Sprintf("configuration %s: --online needs every credential, and %d are not checked (%s first): "+
			"give --credentials-dir", f, len(unchecked), unchecked[0])
		return r
	}
	if len(cfg.UncheckedCredentials()) == 0 {
		d, err := daemon.New(cfg, daemon.Options{CredentialsDir: credDir})
		if err == nil {
			err = Preflight(d)
		}
		if err != nil {
			r.Error = fmt.Sprintf("configuration %s: fenced run refuses it: %v", f, err)
			return r
		}
		if connect {
			if r.Targets, err = online.Check(ctx, d); err != nil {
				r.Error = fmt.Sprintf("configuration %s: online checks: %v", f, err)
				return r
			}
		}
	}
	r.Valid, r.Summary = true, cfg.Summary()
	return r
}
