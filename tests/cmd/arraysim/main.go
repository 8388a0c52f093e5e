// Command arraysim serves every simulated array of a fixture on loopback and
// prints one line per array: "name family URL" (plus the CA file with
// -tls). It runs until interrupted.
//
//	arraysim -fixture testbed.yaml [-tls] [-host 127.0.0.1] [-base-port 0] [-cert-dir DIR] [-v]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"github.com/fenced-project/fenced/tests/arraysim/families"
	"github.com/fenced-project/fenced/tests/arraysim/fixture"
	"github.com/fenced-project/fenced/tests/arraysim/simcore"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "arraysim:", err)
		os.Exit(1)
	}
}

// options are the command-line flags.
type options struct {
	fixture  string
	useTLS   bool
	host     string
	basePort int
	certDir  string
	verbose  bool
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("arraysim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.fixture, "fixture", "", "fixture file (YAML) describing nodes and arrays (required)")
	fs.BoolVar(&o.useTLS, "tls", false, "serve HTTPS with a generated self-signed certificate per array")
	fs.StringVar(&o.host, "host", "127.0.0.1", "loopback address to listen on")
	fs.IntVar(&o.basePort, "base-port", 0, "first port; array i listens on base-port+i (0 = free ports)")
	fs.StringVar(&o.certDir, "cert-dir", "", "directory for the generated certificates (default: a temporary directory)")
	fs.BoolVar(&o.verbose, "v", false, "log every request to stderr")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if o.fixture == "" {
		return o, errors.New("flag -fixture is required")
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if ip := net.ParseIP(o.host); o.host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return o, fmt.Errorf("flag -host: %q is not a loopback address", o.host)
	}
	if o.basePort < 0 || o.basePort > 65535 {
		return o, fmt.Errorf("flag -base-port: %d is out of range", o.basePort)
	}
	return o, nil
}

// run serves the fixture's arrays until ctx is done.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	fx, err := fixture.Load(o.fixture)
	if err != nil {
		return err
	}
	level := slog.LevelInfo
	if o.verbose {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))

	var listeners []*simcore.Listener
	defer func() {
		for _, l := range listeners {
			_ = l.Close()
		}
	}()
	for i, a := range fx.Arrays {
		fam, err := families.New(a, fx.Nodes)
		if err != nil {
			return err
		}
		port := 0
		if o.basePort != 0 {
			port = o.basePort + i
		}
		addr := net.JoinHostPort(o.host, strconv.Itoa(port))
		l, err := simcore.Serve(simcore.New(a.Name, fam, logger), addr, o.useTLS, o.certDir)
		if err != nil {
			return fmt.Errorf("arrays[%s]: %w", a.Name, err)
		}
		listeners = append(listeners, l)
		line := fmt.Sprintf("%s %s %s", a.Name, a.Family, l.URL)
		if l.CAFile != "" {
			line += " " + l.CAFile
		}
		fmt.Fprintln(stdout, line)
	}
	<-ctx.Done()
	return nil
}
