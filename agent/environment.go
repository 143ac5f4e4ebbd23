package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strconv"
	"syscall"
	"unsafe"
)

// envFdVar names the descriptor from which a re-executed agent reads the sandbox's environment.
const envFdVar = "SANDBOXD_AGENT_ENV_FD"

// hideEnvironment moves the sandbox's environment out of /proc/1/environ, which gVisor shows
// to every user of the sandbox whatever the agent's dumpable flag (the kernel reads it from the
// process's initial stack). The first time, it writes the environment to a memfd and executes
// the agent again (still PID 1) with nothing in its environment but that descriptor's number;
// the second time, it reads the environment back into the process's own copy, which commands
// inherit, and closes the descriptor. It returns only in the second case or on an error.
func hideEnvironment() error {
	if value, ok := os.LookupEnv(envFdVar); ok {
		return restoreEnvironment(value)
	}
	fd, err := memfd("sandboxd-env")
	if err != nil {
		return err
	}
	file := os.NewFile(uintptr(fd), "sandboxd-env")
	var env bytes.Buffer
	for _, kv := range os.Environ() {
		env.WriteString(kv)
		env.WriteByte(0)
	}
	if _, err := file.Write(env.Bytes()); err != nil {
		return err
	}
	return syscall.Exec("/proc/self/exe", os.Args, []string{envFdVar + "=" + strconv.Itoa(fd)})
}

// restoreEnvironment reads the NUL-separated environment from the descriptor named by value.
func restoreEnvironment(value string) error {
	fd, err := strconv.Atoi(value)
	if err != nil {
		return fmt.Errorf("%s=%q: %w", envFdVar, value, err)
	}
	file := os.NewFile(uintptr(fd), "sandboxd-env")
	defer file.Close()
	if _, err := file.Seek(0, io.SeekStart); err != nil {
		return err
	}
	content, err := io.ReadAll(file)
	if err != nil {
		return err
	}
	os.Clearenv()
	for _, kv := range bytes.Split(content, []byte{0}) {
		if key, val, ok := bytes.Cut(kv, []byte("=")); ok && len(key) > 0 {
			os.Setenv(string(key), string(val))
		}
	}
	return nil
}

// memfd makes an anonymous file that stays open across execve (no MFD_CLOEXEC).
func memfd(name string) (int, error) {
	namePtr, err := syscall.BytePtrFromString(name)
	if err != nil {
		return 0, err
	}
	fd, _, errno := syscall.RawSyscall(sysMemfdCreate, uintptr(unsafe.Pointer(namePtr)), 0, 0)
	if errno != 0 {
		return 0, fmt.Errorf("memfd_create: %w", errno)
	}
	return int(fd), nil
}
