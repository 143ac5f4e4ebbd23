package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"unsafe"
)

// File operations can run in the agent itself, on an OS thread of their own whose file-system
// credentials are the user's, instead of in a child process (whose start costs ~3 ms, most of a
// small file operation). Linux keeps credentials per thread: the raw setfsuid, setfsgid and
// setgroups system calls change the calling thread only (Go's and libc's setuid and setgroups
// change every thread; they are not used here). The kernel then checks every open, mkdir and
// unlink of that thread against the user, and new files belong to the user, as in the child.
// A change of fsuid away from 0 also clears the file capabilities (CAP_DAC_OVERRIDE and the
// like) of the thread. Afterwards the thread goes back to the agent's own credentials, checked
// like the switch, and only then is it unlocked for other goroutines; a thread that could not
// go back stays locked, and Go terminates it when its goroutine ends. Reusing the thread keeps
// the reserve of idle threads that survives a full pids limit (threads.go) intact.
//
// gVisor ignores setfsuid and applies setgroups to the whole process, so whether the kernel
// honours a per-thread fsuid is probed once, on a throwaway thread, before any setgroups; where
// it does not, file operations stay in child processes.

// probeUID is the uid the probe switches its thread's fsuid to (nobody).
const probeUID = 65534

var (
	threadCredentialsOnce sync.Once
	threadCredentialsOK   bool
	// agentCredentials are the agent's own file-system credentials, which a thread goes back to.
	agentCredentials identity
)

// perThreadCredentials reports whether this kernel gives threads credentials of their own.
func perThreadCredentials() bool {
	threadCredentialsOnce.Do(func() {
		if os.Getuid() != 0 {
			return
		}
		groups, err := syscall.Getgroups()
		if err != nil {
			return
		}
		agentCredentials = identity{uid: 0, gid: uint32(os.Getgid())}
		for _, group := range groups {
			agentCredentials.groups = append(agentCredentials.groups, uint32(group))
		}
		honoured := make(chan bool, 1)
		go func() {
			runtime.LockOSThread() // never unlocked: the thread ends with this goroutine
			syscall.RawSyscall(syscall.SYS_SETFSUID, probeUID, 0, 0)
			ok := threadFSUID() == probeUID
			// Back to 0 as well: the thread may linger a moment before it ends.
			syscall.RawSyscall(syscall.SYS_SETFSUID, 0, 0, 0)
			honoured <- ok
		}()
		threadCredentialsOK = <-honoured
	})
	return threadCredentialsOK
}

// threadFSUID is the calling thread's fsuid as /proc reports it (the fourth Uid field), or -1.
func threadFSUID() int {
	status, err := os.ReadFile("/proc/thread-self/status")
	if err != nil {
		return -1
	}
	for _, line := range bytes.Split(status, []byte("\n")) {
		if fields := bytes.Fields(line); len(fields) == 5 && string(fields[0]) == "Uid:" {
			if uid, err := strconv.Atoi(string(fields[4])); err == nil {
				return uid
			}
		}
	}
	return -1
}

// asUser runs op on an OS thread of its own with the file-system credentials of id, and waits
// for it. The thread is unlocked only once it is back to the agent's credentials.
func asUser(id identity, op func() error) error {
	result := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer func() {
			if p := recover(); p != nil {
				result <- fmt.Errorf("file operation failed: %v", p)
			}
		}()
		if err := setThreadCredentials(id); err != nil {
			result <- err // half switched, maybe: the thread ends with this goroutine
			return
		}
		err := op()
		if setThreadCredentials(agentCredentials) == nil {
			runtime.UnlockOSThread()
		}
		result <- err
	}()
	return <-result
}

// errCredentials is a thread whose credentials did not change as asked; nothing ran on it.
var errCredentials = errors.New("the kernel did not switch the thread's file-system credentials")

// setThreadCredentials switches the calling (locked) thread to id: fsuid first, checked before
// anything else changes, then the groups and the fsgid. setfsuid and setfsgid answer the previous
// value instead of an error, so a second call with the same value reads back what holds now.
func setThreadCredentials(id identity) error {
	syscall.RawSyscall(syscall.SYS_SETFSUID, uintptr(id.uid), 0, 0)
	if uid, _, _ := syscall.RawSyscall(syscall.SYS_SETFSUID, uintptr(id.uid), 0, 0); uint32(uid) != id.uid {
		return errCredentials
	}
	groups := id.groups
	var first unsafe.Pointer
	if len(groups) > 0 {
		first = unsafe.Pointer(&groups[0])
	}
	if _, _, errno := syscall.RawSyscall(syscall.SYS_SETGROUPS, uintptr(len(groups)), uintptr(first), 0); errno != 0 {
		return fmt.Errorf("setgroups: %w", errno)
	}
	syscall.RawSyscall(syscall.SYS_SETFSGID, uintptr(id.gid), 0, 0)
	if gid, _, _ := syscall.RawSyscall(syscall.SYS_SETFSGID, uintptr(id.gid), 0, 0); uint32(gid) != id.gid {
		return errCredentials
	}
	return nil
}
