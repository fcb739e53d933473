// Command llmplat is the platform's one binary: each part runs as a
// subcommand (llmplat sim, llmplat dev, llmplat plan, …). main only parses
// the command line, builds components, runs them and exits once.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"sort"
	"syscall"
)

// command is one subcommand: its one-line summary and its entry point.
type command struct {
	summary string
	run     func(ctx context.Context, args []string, stdout io.Writer) error
}

// commands is filled by the init functions of the files beside this one,
// one file a subcommand.
var commands = map[string]command{}

func register(name, summary string, run func(context.Context, []string, io.Writer) error) {
	commands[name] = command{summary: summary, run: run}
}

func main() {
	os.Exit(realMain(os.Args[1:], os.Stdout, os.Stderr))
}

func realMain(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "llmplat: unknown command %q\n\n", args[0])
		usage(stderr)
		return 2
	}
	if _, err := applyMemoryLimit(os.Getenv); err != nil {
		fmt.Fprintf(stderr, "llmplat %s: %v\n", args[0], err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := cmd.run(ctx, args[1:], stdout); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "llmplat %s: %v\n", args[0], err)
		return 1
	}
	return 0
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: llmplat <command> [flags]\n\ncommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-13s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w, "\nRun 'llmplat <command> -h' for a command's flags.")
}

// envVar is an environment variable a command reads, for its help.
type envVar struct{ name, what string }

// The environment variables commands read. Secrets come from the
// environment only: flags show in the process list.
var (
	envDatabaseURL   = envVar{"LLMPLAT_DATABASE_URL", "PostgreSQL URL (postgres://…), the default of -database-url"}
	envDBSecret      = envVar{dbSecretEnv, "ARN of the Secrets Manager secret (RDS-managed, JSON with \"password\") the database password is read from, when -database-url carries none; the default of -database-password-secret"}
	envRedisURL      = envVar{"LLMPLAT_REDIS_URL", "Redis URL (redis:// or rediss://…), the default of -redis-url"}
	envInternalToken = envVar{internalTokenEnv, "shared secret of gateways and orchestrators on internal dispatch (at least 32 characters)"}
	envAdminToken    = envVar{"LLMPLAT_ADMIN_TOKEN", "bootstrap credential of the admin API, at least 32 characters (make one: openssl rand -hex 32)"}
	envNodeToken     = envVar{nodeTokenEnv, "this node's token (llpnode_…), issued by POST /admin/nodes/{id}/tokens"}
)

// newFlagSet returns a flag set for a subcommand that reports errors
// instead of exiting, so main exits once. Its -h lists the flags and the
// environment variables the command reads.
func newFlagSet(name string, env ...envVar) *flag.FlagSet {
	fs := flag.NewFlagSet("llmplat "+name, flag.ContinueOnError)
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "usage: llmplat %s [flags]\n\nflags:\n", name)
		fs.PrintDefaults()
		if len(env) > 0 {
			fmt.Fprintln(w, "\nenvironment:")
			for _, e := range env {
				fmt.Fprintf(w, "  %s\n    \t%s\n", e.name, e.what)
			}
		}
	}
	return fs
}

// newLogger returns the commands' JSON logger. Durations are written as
// text ("1.5s"), not as nanoseconds.
func newLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Value.Kind() == slog.KindDuration {
				a.Value = slog.StringValue(a.Value.Duration().String())
			}
			return a
		},
	}))
}
