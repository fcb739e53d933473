package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

const (
	// envRedisURL names a running Redis server (a redis:// URL) to use
	// instead of starting one.
	envRedisURL = "LLMPLAT_TEST_REDIS_URL"
	// redisStartTimeout bounds a start that takes milliseconds when idle.
	redisStartTimeout = 30 * time.Second
	// aptLockWaitSeconds lets parallel test processes that all lack
	// redis-server wait for each other's install instead of failing on the
	// package manager's lock.
	aptLockWaitSeconds = 300
)

// redisInstallHint tells a developer how to get a server.
const redisInstallHint = "install Redis (Debian: apt-get install redis-server) or set " +
	envRedisURL + " to a redis:// URL"

// installOnce makes a process try to install redis-server at most once.
var installOnce struct {
	once sync.Once
	err  error
}

// findRedisServer returns the path of redis-server from PATH. When it is
// missing and the process is root, it installs the Debian package first.
func findRedisServer() (string, error) {
	if p, err := exec.LookPath("redis-server"); err == nil {
		return p, nil
	}
	if os.Geteuid() != 0 {
		return "", &missingError{service: "Redis", why: "redis-server not found on PATH", hint: redisInstallHint}
	}
	installOnce.once.Do(func() { installOnce.err = installRedis() })
	if installOnce.err != nil {
		return "", &missingError{service: "Redis",
			why:  "redis-server not found on PATH and installing it failed: " + installOnce.err.Error(),
			hint: redisInstallHint}
	}
	p, err := exec.LookPath("redis-server")
	if err != nil {
		return "", &missingError{service: "Redis", why: "redis-server still not on PATH after installing it", hint: redisInstallHint}
	}
	return p, nil
}

// installRedis installs redis-server with apt-get, refreshing the package
// lists first when the install fails without them.
func installRedis() error {
	apt, err := exec.LookPath("apt-get")
	if err != nil {
		return fmt.Errorf("find apt-get: %w", err)
	}
	run := func(args ...string) error {
		cmd := exec.Command(apt, append([]string{"-o", "DPkg::Lock::Timeout=" + strconv.Itoa(aptLockWaitSeconds)}, args...)...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("apt-get %s: %w: %s", strings.Join(args, " "), err, tail(string(out)))
		}
		return nil
	}
	install := []string{"install", "-y", "--no-install-recommends", "redis-server"}
	if err := run(install...); err == nil {
		return nil
	}
	if err := run("update"); err != nil {
		return err
	}
	return run(install...)
}

// tail returns the end of a command's output, for an error message.
func tail(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > logTailBytes {
		s = "…" + s[len(s)-logTailBytes:]
	}
	return s
}

// startRedis starts a redis-server without persistence on a free loopback
// port in a new instance directory. Main stops it.
func startRedis() (*redisServer, error) {
	bin, err := findRedisServer()
	if err != nil {
		return nil, err
	}
	sweepStale()
	dir, err := newInstanceDir("redis")
	if err != nil {
		return nil, err
	}
	srv, port, err := startOnFreePort(func(port int) (*server, error) {
		s, err := startServer("redis-server", dir, syscall.SIGTERM, nil, bin,
			"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
			"--dir", dir, "--daemonize", "no")
		if err != nil {
			return nil, err
		}
		// The probe fails fast: waitReady paces the attempts, not the
		// client's own dial retries (100 ms apart by default).
		c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(port), MaxRetries: -1,
			DialerRetries: 1, DialerRetryTimeout: readyPollInterval})
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), redisStartTimeout)
		defer cancel()
		if err := s.waitReady(ctx, func(ctx context.Context) error { return c.Ping(ctx).Err() }); err != nil {
			return nil, errors.Join(err, s.kill())
		}
		return s, nil
	})
	if err != nil {
		return nil, errors.Join(err, os.RemoveAll(dir))
	}
	atShutdown(func() error { return errors.Join(srv.stop(), os.RemoveAll(dir)) })
	addr := "127.0.0.1:" + strconv.Itoa(port)
	return &redisServer{addr: addr, url: "redis://" + addr + "/0", where: "started by the harness", srv: srv}, nil
}

// externalRedis uses the server at raw, a redis:// URL.
func externalRedis(raw string) (*redisServer, error) {
	opts, err := redis.ParseURL(raw)
	if err != nil {
		return nil, fmt.Errorf("%s must be a redis:// URL: %w", envRedisURL, err)
	}
	c := redis.NewClient(opts)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), redisStartTimeout)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		return nil, fmt.Errorf("%s: ping: %w", envRedisURL, err)
	}
	return &redisServer{addr: opts.Addr, url: raw, where: envRedisURL}, nil
}
