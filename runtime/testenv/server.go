package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

const (
	// readyPollInterval is how often a starting server is probed: short,
	// because tests wait on it, and a loopback probe costs little.
	readyPollInterval = 10 * time.Millisecond
	// stopGrace is how long a server gets to exit after its stop signal
	// before it is killed; both servers hold only throwaway data.
	stopGrace = 10 * time.Second
	// maxStartAttempts bounds the retries when another process takes the
	// free port between the probe and the server's bind.
	maxStartAttempts = 5
)

// errExitedEarly means the server exited before it was ready, usually
// because its port was taken; the caller retries on another port.
var errExitedEarly = errors.New("server exited before it was ready")

// server is one running server process in its instance directory. The
// goroutine that waits for the process is owned by the server and ends when
// the process does; stop makes sure of that.
type server struct {
	name    string
	dir     string
	cmd     *exec.Cmd
	stopSig syscall.Signal
	exited  chan struct{} // closed once the process has been waited for
	waitErr error         // set before exited is closed
}

// startServer starts path with args as a server whose output goes to the log
// in dir. stopSig is sent to stop it, and by the kernel when the test process
// dies; cred, when not nil, is the account it runs as.
func startServer(name, dir string, stopSig syscall.Signal, cred *syscall.Credential, path string, args ...string) (*server, error) {
	logf, err := os.OpenFile(filepath.Join(dir, serverLogFileName), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open %s log: %w", name, err)
	}
	defer logf.Close()
	cmd := exec.Command(path, args...)
	cmd.Dir = dir
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.SysProcAttr = serverProcAttr(stopSig, cred)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	s := &server{name: name, dir: dir, cmd: cmd, stopSig: stopSig, exited: make(chan struct{})}
	go func() {
		s.waitErr = cmd.Wait()
		close(s.exited)
	}()
	pidFile := filepath.Join(dir, serverPIDFileName)
	if err := os.WriteFile(pidFile, []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o644); err != nil {
		return nil, errors.Join(fmt.Errorf("write %s pid file: %w", name, err), s.kill())
	}
	return s, nil
}

// waitReady probes the server until probe succeeds, the server exits
// (errExitedEarly) or ctx ends.
func (s *server) waitReady(ctx context.Context, probe func(context.Context) error) error {
	t := time.NewTicker(readyPollInterval)
	defer t.Stop()
	for {
		err := probe(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-s.exited:
			return fmt.Errorf("%s: %w (%v); log:\n%s", s.name, errExitedEarly, s.waitErr, logTail(s.dir))
		case <-ctx.Done():
			return fmt.Errorf("%s not ready: %w (last probe: %v); log:\n%s", s.name, ctx.Err(), err, logTail(s.dir))
		case <-t.C:
		}
	}
}

// stop ends the server with its stop signal and kills it if it lingers. The
// instance directory stays: its owner removes it.
func (s *server) stop() error {
	if err := s.cmd.Process.Signal(s.stopSig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return errors.Join(fmt.Errorf("signal %s: %w", s.name, err), s.kill())
	}
	timer := time.NewTimer(stopGrace)
	defer timer.Stop()
	select {
	case <-s.exited:
	case <-timer.C:
		if err := s.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
			return fmt.Errorf("kill %s: %w", s.name, err)
		}
		<-s.exited
	}
	return nil
}

// kill ends the server at once; it is for servers that never became ready.
func (s *server) kill() error {
	if err := s.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("kill %s: %w", s.name, err)
	}
	<-s.exited
	return nil
}

// startOnFreePort calls start with a fresh free port until it returns a
// ready server or an error other than errExitedEarly, at most
// maxStartAttempts times.
func startOnFreePort(start func(port int) (*server, error)) (*server, int, error) {
	var errs []error
	for range maxStartAttempts {
		port, err := freePort()
		if err != nil {
			return nil, 0, err
		}
		s, err := start(port)
		if err == nil {
			return s, port, nil
		}
		errs = append(errs, err)
		if !errors.Is(err, errExitedEarly) {
			break
		}
	}
	return nil, 0, errors.Join(errs...)
}
