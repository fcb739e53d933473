package twin

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/llmplat/llmplat/runtime/testenv"
)

// PodRange is the twin's pod address range: local on the namespace's
// loopback device, so a process can bind any address in it and reach any
// other, as pods on one flat network.
var PodRange = netip.MustParsePrefix("10.244.0.0/16")

// hostAddr is the namespace's own address in PodRange, on lo: what the
// API server advertises. It lies in the platform's /24 (platformNet),
// which no node's pod range takes, so no pod is ever given it.
var hostAddr = netip.MustParseAddr("10.244.255.253")

// netnsEnv marks the test binary that runs inside the twin's namespace.
const netnsEnv = "LLMPLAT_TWIN_NETNS"

// netnsErr is why the tests do not run in a namespace of their own, when
// they do not: checked by every test that starts a twin.
var netnsErr error

// Main runs the package's tests inside a new network namespace: it starts
// this test binary again under `unshare --net` with lo up and PodRange on
// lo, and exits with the child's code. Inside, it runs the tests (through
// testenv.Main, which stops the harness's servers). Where no namespace can
// be made (not root, no unshare or ip), the tests run here and each twin
// reports the reason as a missing service.
func Main(m *testing.M) {
	if os.Getenv(netnsEnv) == "" {
		code, err := rerunInNetns()
		if err == nil {
			os.Exit(code)
		}
		netnsErr = err
		testenv.Main(m)
		return
	}
	if err := setUpLoopback(); err != nil {
		netnsErr = err
	}
	testenv.Main(m)
}

// rerunInNetns runs this binary with its arguments in a new network
// namespace and returns its exit code; an error means it could not.
func rerunInNetns() (int, error) {
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		return 0, fmt.Errorf("no unshare to make a network namespace: %w", err)
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return 0, fmt.Errorf("no ip (iproute2) to set up the network namespace: %w", err)
	}
	if err := exec.Command(unshare, "--net", "true").Run(); err != nil {
		return 0, fmt.Errorf("unshare --net: %w (a network namespace needs root or CAP_SYS_ADMIN)", err)
	}
	exe, err := os.Executable()
	if err != nil {
		return 0, err
	}
	cmd := exec.Command(unshare, append([]string{"--net", "--", exe}, os.Args[1:]...)...)
	cmd.Env = append(os.Environ(), netnsEnv+"=1")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	err = cmd.Run()
	if exit, ok := err.(*exec.ExitError); ok {
		return exit.ExitCode(), nil
	}
	if err != nil {
		return 0, err
	}
	return 0, nil
}

// setUpLoopback brings lo up and makes PodRange local on it.
func setUpLoopback() error {
	for _, args := range [][]string{
		{"link", "set", "lo", "up"},
		{"addr", "add", netip.PrefixFrom(hostAddr, PodRange.Bits()).String(), "dev", "lo"},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	return nil
}

// requireNetns reports a missing namespace as a missing service: the test
// is skipped, and fails under CI=true.
func requireNetns(tb testing.TB) bool {
	tb.Helper()
	if os.Getenv(netnsEnv) == "" || netnsErr != nil {
		why := "the tests did not run through twin.Main"
		if netnsErr != nil {
			why = netnsErr.Error()
		}
		testenv.Missing(tb, "a network namespace for the cluster twin", why,
			"run the tests as root on Linux with unshare and ip (iproute2) installed")
		return false
	}
	return true
}
