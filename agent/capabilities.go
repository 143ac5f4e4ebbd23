package main

import (
	"fmt"
	"os"
	"syscall"
	"unsafe"
)

// dropCapsCommand is `sandboxd-agent drop-caps PATH ARGV0 ARGS...`: it empties this process's
// capability sets, then executes PATH. The agent routes commands that stay root through it when
// it was started with --drop-caps: the restrictive profile grants the agent CAP_SETUID and
// CAP_SETGID only to switch users, and a root command must not inherit them. It also sets
// no-new-privileges (the profile sets it anyway): an exec as root would otherwise be granted the
// bounding set again, and with it the kernel limits the new permitted set to the old, empty one.
func dropCapsCommand(args []string) int {
	if len(args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: sandboxd-agent drop-caps PATH ARGV0 [ARGS...]")
		return 2
	}
	if _, _, errno := syscall.RawSyscall6(syscall.SYS_PRCTL, prSetNoNewPrivs, 1, 0, 0, 0, 0); errno != 0 {
		fmt.Fprintln(os.Stderr, "sandboxd-agent: setting no-new-privileges:", errno)
		return 126
	}
	if err := clearCapabilities(); err != nil {
		fmt.Fprintln(os.Stderr, "sandboxd-agent: dropping capabilities:", err)
		return 126
	}
	err := syscall.Exec(args[0], args[1:], os.Environ())
	fmt.Fprintf(os.Stderr, "sandboxd-agent: %s: %v\n", args[1], err)
	if err == syscall.ENOENT {
		return 127
	}
	return 126
}

const prSetNoNewPrivs = 38

// clearCapabilities sets the effective, permitted and inheritable sets to empty (capset(2),
// version 3: two 32-bit words per set).
func clearCapabilities() error {
	header := struct {
		version uint32
		pid     int32
	}{version: 0x20080522}
	var data [2]struct{ effective, permitted, inheritable uint32 }
	_, _, errno := syscall.RawSyscall(syscall.SYS_CAPSET, uintptr(unsafe.Pointer(&header)), uintptr(unsafe.Pointer(&data[0])), 0)
	if errno != 0 {
		return errno
	}
	return nil
}
