package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// alive says whether pid runs (a zombie has ended).
func alive(pid int) bool {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	e, ok := parseStat(pid, stat)
	return ok && e.state != 'Z' && e.state != 'X'
}

// expectGone fails the test (and kills pid) unless pid ends within 3 s.
func expectGone(t *testing.T, pid int, why string) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for alive(pid) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if alive(pid) {
		syscall.Kill(pid, syscall.SIGKILL)
		t.Fatal(why)
	}
}

// escapee starts a command whose child leaves its session (through wrap: "env -i" also drops
// the tag) and is orphaned; it returns the command and the escapee's pid.
func escapee(t *testing.T, name, wrap string) (*process, int) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "pid")
	proc, err := startProcess(spec{Argv: []string{"sh", "-c", "(setsid " + wrap + "sleep " + name + " & echo $! > " + file + "); exec sleep " + name}}, "", false, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if data, err := os.ReadFile(file); err == nil && strings.HasSuffix(string(data), "\n") {
			pid, _ := strconv.Atoi(strings.TrimSpace(string(data)))
			// Once re-parented to the agent (here: the test, a subreaper), it is an orphan.
			for time.Now().Before(deadline) {
				stat, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
				if parentOf(stat) == os.Getpid() {
					return proc, pid
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("the escapee did not start")
	return nil, 0
}

// TestKillTreeFindsWhatLeftTheSessionAndItsTag: a process that called setsid, dropped its
// environment and was orphaned still goes with its command.
func TestKillTreeFindsWhatLeftTheSessionAndItsTag(t *testing.T) {
	proc, pid := escapee(t, "41", "env -i ")
	defer runs.release(proc)
	proc.killTree()
	<-proc.done
	expectGone(t, pid, "the escapee outlived its command's killTree")
}

// TestKillTreeSparesTheProcessesOfOtherLiveCommands: killing one command's tree leaves another
// live command's orphan alone (it is in that command's session), and a leftover whose command is
// gone goes with the next command that ends.
func TestKillTreeSparesTheProcessesOfOtherLiveCommands(t *testing.T) {
	other, otherPid := escapee(t, "42", "")
	proc, err := startProcess(spec{Argv: []string{"sh", "-c", "setsid sleep 43 & exec sleep 43"}}, "", false, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The escapee left the other command's session: only its tag (readable here) claims it.
	proc.killTree()
	<-proc.done
	runs.release(proc)
	time.Sleep(100 * time.Millisecond)
	if !alive(otherPid) {
		t.Fatal("the escapee of a live command was killed with another command's tree")
	}
	// Its command ends without a kill (its exec returned): the leftover goes with the next one.
	syscall.Kill(other.pid, syscall.SIGKILL)
	<-other.done
	runs.release(other)
	next, err := startProcess(spec{Argv: []string{"true"}}, "", false, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	<-next.done
	next.killTree()
	runs.release(next)
	expectGone(t, otherPid, "a leftover of an ended command survived the next command's end")
}

// The agent's tests run on a host, where kill(-1, SIGSTOP) would stop every process the user may
// signal (dockerd and the test runner included): the freeze of every process is PID 1's alone.
func TestFreezingEveryProcessIsForPidOneAlone(t *testing.T) {
	if os.Getpid() != 1 && mayFreezeAll() {
		t.Fatal("kill(-1) would reach every process of the host")
	}
}

// forkStressVar makes the test binary run forkStress instead of the tests (TestMain); it is run
// as PID 1 of a PID namespace of its own, where killTree freezes every process at once.
const forkStressVar = "SANDBOXD_TEST_FORK_STRESS"

// TestKillTreeNeverStopsAForkUnderWay: rounds of killTree, each freezing the whole sandbox (more
// than 64 processes, as PID 1), while other commands start. A child between its fork and its
// exec is an unregistered copy of the agent: a freeze once stopped it, and its starter, holding
// the reaper's lock, waited for the exec forever while the round waited for that lock (a whole
// sandbox hung so). Every start and every kill must finish.
func TestKillTreeNeverStopsAForkUnderWay(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("a PID namespace of its own needs root")
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skip("no unshare here")
	}
	cmd := exec.Command(unshare, "--pid", "--fork", "--mount-proc", os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), forkStressVar+"=1")
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	_, done, err := startCmd(cmd)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case status := <-done:
		if status.ExitStatus() != 0 || !strings.Contains(out.String(), "kills") {
			t.Fatalf("exit %d: %s", status.ExitStatus(), out.String())
		}
		t.Log(strings.TrimSpace(out.String()))
	case <-time.After(60 * time.Second):
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Process.Kill()
		t.Fatalf("hung: %s", out.String())
	}
}

// forkStress starts `true` from eight goroutines while two kill commands beside 70 processes that
// stay (each round freezes every process), for three seconds; 0 when every start and kill finished.
func forkStress() int {
	if !mayFreezeAll() {
		fmt.Println("not PID 1")
		return 1
	}
	var starts, kills atomic.Int64
	stop := time.Now().Add(3 * time.Second)
	failed := make(chan error, 12)
	var wg sync.WaitGroup
	loop := func(argv []string, kill bool, count *atomic.Int64) {
		defer wg.Done()
		for time.Now().Before(stop) {
			proc, err := startProcess(spec{Argv: argv}, "", false, nil, nil, nil)
			if err != nil {
				failed <- err
				return
			}
			if kill {
				proc.killTree()
			}
			<-proc.done
			runs.release(proc)
			count.Add(1)
		}
	}
	for worker := 0; worker < 8; worker++ {
		wg.Add(1)
		go loop([]string{"true"}, false, &starts)
	}
	// 70 processes that stay: every round of a kill finds more than 64, and freezes them all.
	hold, err := startProcess(spec{Argv: []string{"sh", "-c", "for i in $(seq 70); do sleep 60 & done; wait"}}, "", false, nil, nil, nil)
	if err != nil {
		fmt.Println(err)
		return 1
	}
	time.Sleep(200 * time.Millisecond)
	for killer := 0; killer < 2; killer++ {
		wg.Add(1)
		go loop([]string{"sleep", "5"}, true, &kills)
	}
	wg.Wait()
	hold.killTree()
	select {
	case err := <-failed:
		fmt.Println(err)
		return 1
	default:
	}
	fmt.Printf("%d starts, %d kills\n", starts.Load(), kills.Load())
	return 0
}
