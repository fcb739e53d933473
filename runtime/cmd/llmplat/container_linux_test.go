//go:build linux

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"unsafe"
)

// envAsContainer makes this test binary run one llmplat command (its
// arguments) the way a container with the given capabilities runs it:
// started as the container's user (the parent sets the credentials), and,
// as root, with only the capabilities the container keeps. Its value is a
// containerProc as JSON.
const envAsContainer = "LLMPLAT_TEST_AS_CONTAINER"

// containerProc is a container's process as the test runs it.
type containerProc struct {
	// Caps are the capability numbers a root process keeps; a non-root
	// one has none after exec, as in a container without ambient ones.
	Caps []int
	// Confined is set once the capabilities are dropped and the binary
	// started again.
	Confined bool
}

func init() {
	raw, ok := os.LookupEnv(envAsContainer)
	if !ok {
		return
	}
	os.Exit(asContainer(raw))
}

// asContainer runs the command in os.Args as p says; see envAsContainer.
func asContainer(raw string) int {
	var p containerProc
	if err := json.Unmarshal([]byte(raw), &p); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if os.Geteuid() == 0 && !p.Confined {
		// The bounding set is per thread, and the exec below takes this
		// thread's: root keeps, after it, exactly the capabilities left.
		runtime.LockOSThread()
		if err := confine(p.Caps); err != nil {
			fmt.Fprintln(os.Stderr, "confine capabilities:", err)
			return 2
		}
		p.Confined = true
		next, _ := json.Marshal(p)
		env := []string{envAsContainer + "=" + string(next)}
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, envAsContainer+"=") {
				env = append(env, kv)
			}
		}
		err := syscall.Exec("/proc/self/exe", os.Args, env)
		fmt.Fprintln(os.Stderr, "exec:", err)
		return 2
	}
	want := uint64(0)
	if os.Geteuid() == 0 {
		for _, c := range p.Caps {
			want |= 1 << c
		}
	}
	if got, err := effectiveCaps(); err != nil || got != want {
		fmt.Fprintf(os.Stderr, "effective capabilities %#x (%v), want %#x\n", got, err, want)
		return 2
	}
	return realMain(os.Args[1:], os.Stdout, os.Stderr)
}

// Linux's prctl and capset constants.
const (
	prCapbsetDrop         = 24
	prCapAmbient          = 47
	prCapAmbientClearAll  = 4
	linuxCapabilityV3     = 0x20080522
	capLastCapPath        = "/proc/sys/kernel/cap_last_cap"
	procStatusCapEffField = "CapEff:"
)

// confine drops every capability but keep from this thread's bounding
// set, and clears its inheritable and ambient sets, so that the next exec
// as root has keep and nothing more.
func confine(keep []int) error {
	b, err := os.ReadFile(capLastCapPath)
	if err != nil {
		return err
	}
	last, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return err
	}
	kept := map[int]bool{}
	for _, c := range keep {
		kept[c] = true
	}
	for c := 0; c <= last; c++ {
		if kept[c] {
			continue
		}
		if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, prCapbsetDrop, uintptr(c), 0); e != 0 {
			return fmt.Errorf("drop capability %d: %w", c, e)
		}
	}
	if _, _, e := syscall.RawSyscall6(syscall.SYS_PRCTL, prCapAmbient, prCapAmbientClearAll, 0, 0, 0, 0); e != 0 {
		return fmt.Errorf("clear ambient capabilities: %w", e)
	}
	hdr := struct {
		version uint32
		pid     int32
	}{version: linuxCapabilityV3}
	var data [2]struct{ effective, permitted, inheritable uint32 }
	if _, _, e := syscall.RawSyscall(syscall.SYS_CAPGET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0); e != 0 {
		return fmt.Errorf("capget: %w", e)
	}
	data[0].inheritable, data[1].inheritable = 0, 0
	if _, _, e := syscall.RawSyscall(syscall.SYS_CAPSET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0); e != 0 {
		return fmt.Errorf("capset: %w", e)
	}
	return nil
}

// effectiveCaps reads this process's effective capabilities.
func effectiveCaps() (uint64, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, procStatusCapEffField); ok {
			return strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		}
	}
	return 0, fmt.Errorf("no %s in /proc/self/status", procStatusCapEffField)
}
