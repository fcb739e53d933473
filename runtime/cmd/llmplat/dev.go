package main

import (
	"context"
	"io"
	"log/slog"
	"os"

	"github.com/llmplat/llmplat/runtime/devmode"
)

func init() {
	register("dev", "run the whole platform locally on embedded defaults", runDev)
}

func runDev(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("dev")
	addr := fs.String("addr", devmode.DefaultAddr, "gateway listen address")
	metricsAddr := fs.String("metrics-addr", devmode.DefaultMetricsAddr, "Prometheus metrics listen address")
	nodeAddr := fs.String("node-addr", "", "node socket listen address, for node agents added by hand (default: a free loopback port; the URL is printed)")
	dataDir := fs.String("data-dir", "", "directory for the SQLite store and the minted credentials, kept across restarts (default: a temporary one, removed at exit)")
	timeScale := fs.Float64("time-scale", 1, "run the simulated engines this many times faster than real time")
	verbose := fs.Bool("v", false, "log each request (never its prompt or answer)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelInfo
	}
	return devmode.Run(ctx, devmode.Config{
		Addr:        *addr,
		MetricsAddr: *metricsAddr,
		NodeAddr:    *nodeAddr,
		DataDir:     *dataDir,
		TimeScale:   *timeScale,
		Stdout:      stdout,
		Logger:      slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})),
	})
}
