package main

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
)

// hostnamerCommand names the hosts of claimed warm-pool instances under runc for the server, as
// one resident process on the host (`sandboxd-agent hostnamer`, root): each line `PID NAME` on
// its input sets the hostname of the UTS namespace of host process PID (a container's first
// process) and is answered `ok` or `error: WHY` on its output, in order. Before it, each claim
// ran `nsenter --uts=... sandboxd-agent sethostname NAME`: two processes started per claim, 3-6 ms
// on a quiet host and tens of milliseconds on a busy one. It ends when its input does.
func hostnamerCommand(args []string) int {
	if len(args) != 0 {
		fmt.Fprintln(os.Stderr, "usage: sandboxd-agent hostnamer (then lines of PID NAME on stdin)")
		return 2
	}
	in := bufio.NewScanner(os.Stdin)
	out := bufio.NewWriter(os.Stdout)
	for in.Scan() {
		fmt.Fprintln(out, nameHostOf(in.Text()))
		if err := out.Flush(); err != nil {
			return 1
		}
	}
	return 0
}

// nameHostOf does one request (`PID NAME`) and says how it went. The namespace is entered on a
// thread of its own, which is never handed back to the Go runtime: it ends with its goroutine,
// so nothing else ever runs in a sandbox's namespace.
func nameHostOf(line string) string {
	fields := strings.Fields(line)
	if len(fields) != 2 {
		return "error: want PID NAME"
	}
	pid, err := strconv.Atoi(fields[0])
	if err != nil || pid <= 1 {
		return "error: PID must be a process number above 1"
	}
	name := fields[1]
	if len(name) > 64 {
		return "error: NAME must be at most 64 bytes"
	}
	done := make(chan string, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with this goroutine
		fd, err := syscall.Open("/proc/"+strconv.Itoa(pid)+"/ns/uts", syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
		if err != nil {
			done <- "error: " + err.Error()
			return
		}
		defer syscall.Close(fd)
		if _, _, errno := syscall.RawSyscall(sysSetns, uintptr(fd), syscall.CLONE_NEWUTS, 0); errno != 0 {
			done <- "error: setns: " + errno.Error()
			return
		}
		if err := syscall.Sethostname([]byte(name)); err != nil {
			done <- "error: sethostname: " + err.Error()
			return
		}
		done <- "ok"
	}()
	return <-done
}
