package main

import (
	"bufio"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

func TestHostnamerRefusesMalformedRequests(t *testing.T) {
	for line, want := range map[string]string{
		"":                              "error: want PID NAME",
		"12":                            "error: want PID NAME",
		"12 a b":                        "error: want PID NAME",
		"x name":                        "error: PID must be a process number above 1",
		"1 name":                        "error: PID must be a process number above 1",
		"-5 name":                       "error: PID must be a process number above 1",
		"12 " + strings.Repeat("n", 65): "error: NAME must be at most 64 bytes",
		"999999999 name":                "error: no such file or directory",
	} {
		if got := nameHostOf(line); got != want {
			t.Errorf("nameHostOf(%q) = %q, want %q", line, got, want)
		}
	}
}

func TestHostnamerNamesTheHostOfAnotherUTSNamespaceOnly(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("entering another process's UTS namespace needs root")
	}
	before, _ := os.Hostname()
	// A process in a UTS namespace of its own prints its hostname once told to.
	child := exec.Command("sh", "-c", "read go; hostname")
	child.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUTS}
	stdin, _ := child.StdinPipe()
	stdout, _ := child.StdoutPipe()
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if got := nameHostOf(strconv.Itoa(child.Process.Pid) + " claimed-" + strconv.Itoa(i)); got != "ok" {
			t.Fatalf("nameHostOf: %s", got)
		}
	}
	stdin.Write([]byte("\n"))
	printed, _ := bufio.NewReader(stdout).ReadString('\n')
	child.Wait()
	if printed != "claimed-2\n" {
		t.Errorf("the child's hostname is %q, want claimed-2", printed)
	}
	if after, _ := os.Hostname(); after != before {
		t.Errorf("the hostnamer's own hostname changed from %q to %q", before, after)
	}
}
