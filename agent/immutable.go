package main

import (
	"fmt"
	"os"
	"syscall"
	"unsafe"
)

// The ioctls of chattr(1), and its `i` flag: an immutable directory takes no new entry, loses
// none and changes no attribute, whoever asks, until a holder of CAP_LINUX_IMMUTABLE clears it.
const (
	fsIocGetFlags = 0x80086601
	fsIocSetFlags = 0x40086602
	fsImmutableFl = 0x00000010
)

// setImmutableCommand is `sandboxd-agent set-immutable on|off PATH...`. The host side runs it
// (the agent binary is a static Linux executable) on a sandbox's socket directory: sealed once
// the agent has made its socket, no command in the sandbox, root or not, can write there; a
// sandbox holds no CAP_LINUX_IMMUTABLE in any profile. It is unsealed before the sandbox starts
// again, when the agent makes a new socket.
func setImmutableCommand(args []string) int {
	if len(args) < 2 || (args[0] != "on" && args[0] != "off") {
		fmt.Fprintln(os.Stderr, "usage: sandboxd-agent set-immutable on|off PATH...")
		return 2
	}
	code := 0
	for _, path := range args[1:] {
		if err := setImmutable(path, args[0] == "on"); err != nil {
			fmt.Fprintln(os.Stderr, "sandboxd-agent: set-immutable:", err)
			code = 1
		}
	}
	return code
}

// setImmutable sets or clears the immutable flag of path, leaving its other flags as they are.
// The kernel reads and writes the flags as an int. A symlink is refused (O_NOFOLLOW), and
// O_NONBLOCK keeps a FIFO from blocking the open.
func setImmutable(path string, on bool) error {
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	defer syscall.Close(fd)
	var flags int32
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), fsIocGetFlags, uintptr(unsafe.Pointer(&flags))); errno != 0 {
		return fmt.Errorf("%s: reading flags: %w", path, errno)
	}
	if on {
		flags |= fsImmutableFl
	} else {
		flags &^= fsImmutableFl
	}
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), fsIocSetFlags, uintptr(unsafe.Pointer(&flags))); errno != 0 {
		return fmt.Errorf("%s: setting flags: %w", path, errno)
	}
	return nil
}
