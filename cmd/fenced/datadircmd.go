package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/fenced-project/fenced/cluster"
	"github.com/fenced-project/fenced/configs"
)

func newDataDirCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "datadir",
		Short: "Recover a replica's data directory",
	}
	cmd.AddCommand(newDataDirRecoverCmd())
	return cmd
}

func newDataDirRecoverCmd() *cobra.Command {
	var config string
	var rejoin, bootstrap, yes bool
	cmd := &cobra.Command{
		Use:   "recover --config FILE (--rejoin | --bootstrap) [--yes]",
		Short: "Move a refused Raft store aside and say how the replica starts next",
		Long: `A replica refuses to start (exit status 65) when its Raft store is
missing, empty, unreadable or damaged after it held the group's log:
starting anyway would bootstrap a new group or replay a rolled-back log and
lose the fencing ledger. This command is the explicit way out. With the
replica stopped, it moves the data directory's raft directory aside to
raft.damaged-TIMESTAMP (nothing is deleted), then:

  --rejoin     the next start waits, without state, for the leader of the
               running group to send it the ledger (the other replicas
               must hold a quorum). The normal choice for one damaged
               replica.
  --bootstrap  the next start bootstraps a new group from the configured
               peers with an empty ledger. Only when no replica holds the
               ledger any more; every fence it recorded is forgotten.

It asks for confirmation unless --yes is given.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if rejoin == bootstrap {
				return &exitError{code: exitUsage, err: errors.New("give exactly one of --rejoin and --bootstrap")}
			}
			cfg, err := configs.Load(config, configs.Options{CredentialsDir: os.Getenv("CREDENTIALS_DIRECTORY")})
			if err != nil {
				return &exitError{code: exitConfig, err: fmt.Errorf("--config: %w", err)}
			}
			dir := cfg.Replica.DataDir
			mode, what := cluster.Rejoin, "wait for the running group's leader to send it the ledger"
			if bootstrap {
				mode, what = cluster.Bootstrap, "bootstrap a NEW group with an EMPTY ledger (every recorded fence is forgotten)"
			}
			prompt := fmt.Sprintf("Move the Raft state in %s aside; replica %s will then %s.", dir, cfg.Replica.ID, what)
			if err := confirm(cmd.InOrStdin(), cmd.ErrOrStderr(), prompt, yes); err != nil {
				return err
			}
			moved, err := cluster.RecoverDataDir(dir, mode, time.Now())
			if err != nil {
				return &exitError{code: exitFailure, err: err}
			}
			out := cmd.OutOrStdout()
			if moved != "" {
				fmt.Fprintf(out, "moved the old Raft state to %s (kept for inspection; remove it when no longer needed)\n", moved)
			}
			fmt.Fprintf(out, "replica %s will %s on its next start\n", cfg.Replica.ID, what)
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&config, "config", "c", "", "the replica's configuration file (required)")
	fl.BoolVar(&rejoin, "rejoin", false, "rejoin the running group and copy the ledger from its leader")
	fl.BoolVar(&bootstrap, "bootstrap", false, "bootstrap a new group with an empty ledger")
	fl.BoolVar(&yes, "yes", false, "do not ask for confirmation")
	_ = cmd.MarkFlagRequired("config")
	return cmd
}

// confirm asks the operator to type "yes" unless assumeYes; anything else,
// or no terminal input, refuses with a usage error naming --yes.
func confirm(in io.Reader, out io.Writer, prompt string, assumeYes bool) error {
	if assumeYes {
		return nil
	}
	fmt.Fprintf(out, "%s\nType yes to go on: ", prompt)
	line, err := bufio.NewReader(io.LimitReader(in, 64)).ReadString('\n')
	if strings.TrimSpace(line) == "yes" && (err == nil || errors.Is(err, io.EOF)) {
		return nil
	}
	return &exitError{code: exitUsage, err: errors.New("not confirmed: nothing done (type yes, or pass --yes)")}
}
