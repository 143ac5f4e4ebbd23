package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// gVisor's /proc shows the maps and environ of every process to every user (mode 0444, whatever
// the process's dumpable flag; runsc 20240729), so under gVisor the agent hides its own: with
// `--mask-proc` it bind-mounts, read-only, an empty file that nobody may read (mode 0000, root's)
// over /proc/PID/environ, maps and smaps, and an empty directory that nobody may list over
// /proc/PID/task and over /proc/TID of each of its other threads (each shows the same memory).
// That needs gVisor's CAP_SYS_ADMIN (a capability of gVisor's kernel, which the host never sees;
// commands never hold it), which the Docker backend grants under runsc; `--drop-sys-admin` then
// gives it up. The mounts are made once the agent holds every thread it reserves (threads.go): a
// thread the runtime makes later would show its maps (the reserve exists so that it does not).
// Commands cannot undo them: unmounting needs CAP_SYS_ADMIN. Under runc the dumpable flag
// already does it (the kernel asks for CAP_SYS_PTRACE), and these files stay as the kernel has them.

// maskedFiles are the files of /proc/PID hidden for the agent's own PID.
var maskedFiles = []string{"environ", "maps", "smaps"}

// maskProc hides the agent's environ and memory maps from the sandbox (see above).
func maskProc() error {
	dir, err := os.MkdirTemp("/dev", ".sandboxd-mask-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	emptyFile := filepath.Join(dir, "file")
	emptyDir := filepath.Join(dir, "dir")
	if err := os.WriteFile(emptyFile, nil, 0); err != nil {
		return err
	}
	if err := os.Mkdir(emptyDir, 0); err != nil {
		return err
	}
	for _, path := range []string{emptyFile, emptyDir} {
		if err := os.Chmod(path, 0); err != nil {
			return err
		}
	}
	self := strconv.Itoa(os.Getpid())
	var targets [][2]string
	for _, name := range maskedFiles {
		targets = append(targets, [2]string{emptyFile, filepath.Join("/proc", self, name)})
	}
	tasks, err := os.ReadDir(filepath.Join("/proc", self, "task"))
	if err != nil {
		return err
	}
	for _, task := range tasks {
		if task.Name() != self {
			targets = append(targets, [2]string{emptyDir, filepath.Join("/proc", task.Name())})
		}
	}
	// Last: the agent reads its own thread list above.
	targets = append(targets, [2]string{emptyDir, filepath.Join("/proc", self, "task")})
	for _, target := range targets {
		if err := maskPath(target[0], target[1]); err != nil {
			return err
		}
	}
	return nil
}

// maskPath bind-mounts source over target, then makes that mount read-only (a bind mount takes
// its flags only from a remount).
func maskPath(source, target string) error {
	if err := syscall.Mount(source, target, "", syscall.MS_BIND, ""); err != nil {
		return fmt.Errorf("masking %s: %w", target, err)
	}
	flags := uintptr(syscall.MS_REMOUNT | syscall.MS_BIND | syscall.MS_RDONLY | syscall.MS_NOSUID | syscall.MS_NODEV | syscall.MS_NOEXEC)
	if err := syscall.Mount("", target, "", flags, ""); err != nil {
		return fmt.Errorf("masking %s read-only: %w", target, err)
	}
	return nil
}
