package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// threadScenarioVar makes the test binary run threadScenario instead of the tests (TestMain).
const threadScenarioVar = "SANDBOXD_TEST_THREAD_SCENARIO"

// threadScenario is what a fork bomb does to the agent, in one process: it caps the threads its
// uid may have at the number it has now, as a full pids limit does, then keeps more goroutines
// inside a blocking system call at once than GOMAXPROCS. The runtime then needs more threads;
// with "reserve" they come from the reserve, without it the runtime dies of "newosproc".
func threadScenario(mode string) int {
	if mode == "reserve" {
		reserveThreads(reservedThreads)
	}
	threads := uint64(threadCount())
	if err := syscall.Setrlimit(rlimitNproc, &syscall.Rlimit{Cur: threads, Max: threads}); err != nil {
		fmt.Println("setrlimit:", err)
		return 1
	}
	var blocked sync.WaitGroup
	for i := 0; i < reservedThreads-maxProcs-2; i++ {
		blocked.Add(1)
		go func() {
			defer blocked.Done()
			syscall.Nanosleep(&syscall.Timespec{Nsec: int64(50 * time.Millisecond)}, nil)
		}()
	}
	blocked.Wait()
	// A fork fails now, and must fail cleanly.
	if err := exec.Command("/proc/self/exe", "-test.run", "^$").Run(); err == nil {
		fmt.Println("a fork succeeded past the limit")
		return 1
	}
	fmt.Printf("survived with %d threads\n", threadCount())
	return 0
}

// runThreadScenario runs the scenario in a child of a uid that no other process has, so that
// RLIMIT_NPROC counts the child's threads alone (root is exempt from it).
func runThreadScenario(t *testing.T, mode string) (string, error) {
	uid := uint32(2_000_000_000 + os.Getpid())
	cmd := exec.Command("/proc/self/exe")
	cmd.Env = append(os.Environ(), threadScenarioVar+"="+mode)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	// The tests' reaper (TestMain) owns wait4: exec.Cmd.Wait would race it.
	_, done, err := startCmd(cmd)
	if err != nil {
		t.Fatal(err)
	}
	status := <-done
	// The output is copied by goroutines that end when the child's pipes close.
	deadline := time.Now().Add(2 * time.Second)
	for cmd.Process != nil && time.Now().Before(deadline) && !strings.Contains(out.String(), "\n") {
		time.Sleep(10 * time.Millisecond)
	}
	if status.ExitStatus() != 0 {
		return out.String(), fmt.Errorf("exit status %v", status)
	}
	return out.String(), nil
}

func TestReservedThreadsSurviveAFullPidsLimit(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root: to run the scenario as a uid of its own under RLIMIT_NPROC")
	}
	out, err := runThreadScenario(t, "none")
	if err == nil || !(strings.Contains(out, "newosproc") || strings.Contains(out, "pthread_create failed")) {
		t.Fatalf("without the reserve the runtime should die of newosproc; got %v: %.300s", err, out)
	}
	out, err = runThreadScenario(t, "reserve")
	if err != nil || !strings.Contains(out, "survived") {
		t.Fatalf("with the reserve: %v: %.2000s", err, out)
	}
	t.Log(strings.TrimSpace(out))
}

func TestReserveThreadsKeepsThemIdle(t *testing.T) {
	holdThreads(reservedThreads)
	after := threadCount()
	var blocked sync.WaitGroup
	for i := 0; i < reservedThreads-maxProcs-2; i++ {
		blocked.Add(1)
		go func() {
			defer blocked.Done()
			syscall.Nanosleep(&syscall.Timespec{Nsec: int64(30 * time.Millisecond)}, nil)
		}()
	}
	blocked.Wait()
	if now := threadCount(); now > after {
		t.Fatalf("blocking system calls made threads: %d after the reserve, %d now", after, now)
	}
}

// TestEnvironOfAnotherUser: root reads the environment of another user's process on a thread
// with that user's filesystem ids (the kernel refuses it to root without CAP_SYS_PTRACE), and
// puts the thread's ids back.
func TestEnvironOfAnotherUser(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("switching users needs root")
	}
	tag := newTag()
	const uid, gid = 65534, 65534
	cmd := exec.Command("sleep", "34")
	cmd.Env = append(os.Environ(), tagVar+"="+tag)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Credential: &syscall.Credential{Uid: uid, Gid: gid}}
	pid, done, err := startCmd(cmd)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { syscall.Kill(pid, syscall.SIGKILL); <-done }()
	// Between its fork and its exec the child has changed its ids and is not dumpable, so its
	// environment reads empty to anyone: read until the exec has happened.
	var environ []byte
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if environ = environOf(pid); strings.Contains(string(environ), tagVar+"="+tag+"\x00") {
			break
		}
	}
	if !strings.Contains(string(environ), tagVar+"="+tag+"\x00") {
		stat, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
		t.Fatalf("the environment of %d (%s) as its owner: %q", pid, stat, environ)
	}
	tasks, _ := filepath.Glob("/proc/self/task/*/status")
	for _, task := range tasks {
		status, _ := os.ReadFile(task)
		for _, line := range strings.Split(string(status), "\n") {
			if fields := strings.Fields(line); len(fields) == 5 && (fields[0] == "Uid:" || fields[0] == "Gid:") && fields[4] != "0" {
				t.Fatalf("%s: a thread kept filesystem id %s", task, line)
			}
		}
	}
}

// TestUserThreadsGoBackToTheAgent: a file operation's thread is reused once it is back to the
// agent's credentials, so that operations neither leave a thread with a user's credentials nor
// use up the reserve of idle threads.
func TestUserThreadsGoBackToTheAgent(t *testing.T) {
	if !perThreadCredentials() {
		t.Skip("needs root and per-thread credentials")
	}
	nobody := identity{uid: probeUID, gid: probeUID, groups: []uint32{probeUID}}
	groupsLine := func() string {
		status, _ := os.ReadFile("/proc/thread-self/status")
		for _, line := range strings.Split(string(status), "\n") {
			if strings.HasPrefix(line, "Groups:") {
				return line
			}
		}
		return ""
	}
	runtime.LockOSThread()
	agentGroups := groupsLine()
	runtime.UnlockOSThread()
	// Each operation runs on a locked thread; a thread that ended would make every operation's
	// thread a new one, while reused threads serve many operations.
	used := map[int]bool{}
	for i := 0; i < 50; i++ {
		err := asUser(nobody, func() error {
			used[syscall.Gettid()] = true
			if uid := threadFSUID(); uid != probeUID {
				return fmt.Errorf("fsuid %d inside the operation", uid)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(used) > 10 {
		t.Fatalf("50 operations ran on %d threads: their threads were not reused", len(used))
	}
	var wg sync.WaitGroup
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			if uid, groups := threadFSUID(), groupsLine(); uid != 0 || groups != agentGroups {
				t.Errorf("a thread runs with fsuid %d and %q after the operations", uid, groups)
			}
		}()
	}
	wg.Wait()
}
