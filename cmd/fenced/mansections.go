package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// rootManSections are the sections the fenced(1) page carries besides
// what cobra generates: the environment, the files and the exit statuses,
// which apply to every command.
const rootManSections = `.SH ENVIRONMENT
.TP
\fBFENCED_<PATH>\fP
overrides a configuration setting outside lists: the path upper-cased with
_ for . (FENCED_LOG_LEVEL=debug, FENCED_HTTP_LISTEN=127.0.0.1:9000). A
FENCED_* variable that names no setting is reported as a warning.
.TP
\fBFENCED_ADDR\fP, \fBFENCED_CONFIG\fP, \fBFENCED_TOKEN_FILE\fP, \fBFENCED_CERT_FILE\fP, \fBFENCED_KEY_FILE\fP, \fBFENCED_CA_FILE\fP
defaults of the operator commands' \-\-addr, \-\-config, \-\-token\-file,
\-\-cert\-file, \-\-key\-file and \-\-ca\-file.
.TP
\fBCREDENTIALS_DIRECTORY\fP
set by systemd (LoadCredential=): where credential:NAME references resolve;
the default of \-\-credentials\-dir.
.SH FILES
.TP
\fI/etc/fenced/fenced.yaml\fP
the replica's configuration, see \fBfenced.yaml\fP(5); installed in dry\-run.
.TP
\fI/etc/fenced/credentials/\fP
secrets (array passwords, the API token, TLS keys), root only; a file NAME is
referenced as credential:NAME.
.TP
\fI/etc/fenced/public/\fP
world\-readable copies of public files (the replicas' CA certificate), so
that \fBfenced status \-\-config\fP works without root.
.TP
\fI/var/lib/fenced/\fP
the replica's data directory: the Raft log, snapshots and the ledger.
.TP
\fI/usr/lib/systemd/system/fenced.service\fP
the unit; \fBjournalctl \-u fenced\fP shows the replica's log.
.TP
\fI/usr/share/doc/fenced/\fP
the operator's guide (docs/operations.md), the configuration reference
(docs/config.md), the metrics and the example alert rules.
.SH EXIT STATUS
.TP
\fB0\fP
success (\fBstatus\fP: ready with a leader; \fBplan\fP: the node is protected).
.TP
\fB1\fP
failure: the call was refused or failed, a configuration file is invalid, or
(\fBplan\fP) the node is not protected.
.TP
\fB2\fP
usage: a flag, argument or file given is wrong.
.TP
\fB3\fP
\fBstatus\fP: not ready; \fBconfig validate \-\-online\fP: every file is valid
but a target failed its online check.
.TP
\fB4\fP
\fBstatus\fP: no leader.
.TP
\fB65\fP
\fBrun\fP: the Raft store is missing, empty or damaged after it held the
ledger (see \fBfenced datadir recover\fP); systemd does not restart it.
.TP
\fB78\fP
\fBrun\fP: the configuration is invalid; systemd does not restart it.
`

// configManPage is fenced.yaml(5), dated when.
func configManPage(when time.Time, source string) string {
	return fmt.Sprintf(`.TH "FENCED.YAML" "5" "%s" "%s" "fenced manual"
.SH NAME
fenced.yaml \- configuration of a fenced replica
.SH SYNOPSIS
\fI/etc/fenced/fenced.yaml\fP
.SH DESCRIPTION
One YAML file per replica configures it: who it is and its peers
(\fBreplica\fP, \fBpeers\fP), its Raft settings (\fBraft\fP), its HTTP endpoint and
API token (\fBhttp\fP), its log (\fBlog\fP), the arrays it fences at (\fBarrays\fP)
and the Kubernetes clusters it protects (\fBclusters\fP: kubeconfig, detection
timing, corroboration, storm limit, dry\-run, NodeHealthCheck). Unknown keys
are errors; secrets are never inline but credential:NAME references or files.
\fBfenced config validate\fP checks a file (\fB\-\-online\fP also logs in to the
arrays and asks the API servers); \fBfenced run\fP refuses an invalid one
(exit status 78).
.PP
Every key, its default and its range are described in
\fI/usr/share/doc/fenced/docs/config.md\fP; the example configurations are in
\fI/usr/share/doc/fenced/examples/\fP.
.SH ENVIRONMENT
\fBFENCED_<PATH>\fP overrides a setting outside lists, as described in
\fBfenced\fP(1).
.SH SEE ALSO
\fBfenced\fP(1), \fBfenced\-config\-validate\fP(1), \fBfenced\-run\fP(1)
`, when.Format("Jan 2006"), source)
}

// addManSections appends rootManSections to the fenced(1) page in dir
// (before its SEE ALSO, where cobra ends it) and writes fenced.yaml(5)
// into man5 beside it.
func addManSections(man1 string, when time.Time, source string) error {
	root := filepath.Join(man1, "fenced.1")
	b, err := os.ReadFile(root)
	if err != nil {
		return fmt.Errorf("add sections to %s: %w", root, err)
	}
	page := string(b)
	if i := strings.Index(page, ".SH SEE ALSO"); i >= 0 {
		page = page[:i] + rootManSections + strings.TrimRight(page[i:], "\n") + ", \\fBfenced.yaml(5)\\fP\n"
	} else {
		page += rootManSections
	}
	if err := os.WriteFile(root, []byte(page), 0o644); err != nil {
		return fmt.Errorf("add sections to %s: %w", root, err)
	}
	man5 := filepath.Join(filepath.Dir(man1), "man5")
	if err := os.MkdirAll(man5, 0o755); err != nil {
		return fmt.Errorf("generate docs: %w", err)
	}
	if err := os.WriteFile(filepath.Join(man5, "fenced.yaml.5"), []byte(configManPage(when, source)), 0o644); err != nil {
		return fmt.Errorf("generate docs: %w", err)
	}
	return nil
}
