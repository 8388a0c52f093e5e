package replica

import (
	"errors"
	"fmt"

	"github.com/fenced-project/fenced/cmd/fenced/internal/daemon"
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
	if len(cfg.UncheckedCredentials()) == 0 {
		d, err := daemon.New(cfg, daemon.Options{CredentialsDir: credDir})
		if err == nil {
			err = Preflight(d)
		}
		if err != nil {
			r.Error = fmt.Sprintf("configuration %s: fenced run refuses it: %v", f, err)
			return r
		}
	}
	r.Valid, r.Summary = true, cfg.Summary()
	return r
}
