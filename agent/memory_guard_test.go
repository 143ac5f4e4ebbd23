package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// fakeProc points the guard at a scratch /proc: a meminfo with `free` kB and the given statm RSS pages per pid.
func fakeProc(t *testing.T, freeKB string, rss map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	savedMeminfo, savedProc := meminfoFile, procDir
	t.Cleanup(func() { meminfoFile, procDir = savedMeminfo, savedProc })
	meminfoFile, procDir = filepath.Join(dir, "meminfo"), dir
	os.WriteFile(meminfoFile, []byte("MemTotal:  262144 kB\nMemFree:  "+freeKB+" kB\nMemAvailable: 1 kB\n"), 0o644)
	for pid, pages := range rss {
		os.MkdirAll(filepath.Join(dir, pid), 0o755)
		os.WriteFile(filepath.Join(dir, pid, "statm"), []byte("9999 "+pages+" 0 0 0 0 0\n"), 0o644)
	}
	return dir
}

func TestMemoryGuardReadsFreeMemoryAndPicksTheLargestCommand(t *testing.T) {
	fakeProc(t, "1024", map[string]string{"1": "900000", "7": "10", "42": "5000", "43": "4999", "self": "1"})
	if free, total, ok := freeMemory(); !ok || free != 1024*1024 || total != 262144*1024 {
		t.Fatalf("free memory: %d of %d %v", free, total, ok)
	}
	// With a headroom for gVisor's kernel, both figures are that much less (never below 0).
	kernelHeadroom = 512 * 1024
	if free, total, ok := freeMemory(); !ok || free != 512*1024 || total != (262144-512)*1024 {
		t.Fatalf("free memory less the headroom: %d of %d %v", free, total, ok)
	}
	kernelHeadroom = 2048 * 1024
	if free, _, _ := freeMemory(); free != 0 {
		t.Fatalf("free memory less a headroom larger than it: %d", free)
	}
	kernelHeadroom = 0
	// A quarter, at least the least reserve, at most half.
	for _, c := range [][3]uint64{{1024, 64, 256}, {256, 64, 64}, {100, 64, 50}} {
		if got := memoryReserve(c[0], c[1]); got != c[2] {
			t.Fatalf("reserve of %d (least %d): %d, want %d", c[0], c[1], got, c[2])
		}
	}
	// PID 1 (the agent) is never taken, however large.
	if pid := largestProcess(); pid != 42 {
		t.Fatalf("victim: %d, want 42", pid)
	}
	if processState([]byte("42 (a (b) c) Z 1 2")) != 'Z' || processState([]byte("garbage")) != 0 {
		t.Fatal("process state")
	}
}

func TestMemoryGuardKillsTheLargestProcessWhenMemoryRunsShort(t *testing.T) {
	// A real process to kill; the scratch /proc gives it the largest resident set.
	victim := exec.Command("sleep", "30")
	if err := victim.Start(); err != nil {
		t.Fatal(err)
	}
	pid := victim.Process.Pid
	// Another test's reaper may reap it first: its end is watched in the real /proc, not by Wait.
	go victim.Wait()
	ended := func() bool {
		stat, err := os.ReadFile(filepath.Join("/proc", itoa(pid), "stat"))
		return err != nil || processState(stat) == 'Z'
	}
	dir := fakeProc(t, "1000", map[string]string{"1": "99999", itoa(pid): "500"})
	before := guardKills.Load()
	stop := startMemoryGuard(4096 * 1024) // a quarter of 256 MiB to keep, 1000 kB free: short
	defer stop()
	deadline := time.Now().Add(5 * time.Second)
	for !ended() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if !ended() {
		victim.Process.Kill()
		t.Fatal("the guard did not kill the largest process")
	}
	// Memory is back: the guard kills nothing more.
	os.RemoveAll(filepath.Join(dir, itoa(pid)))
	os.WriteFile(meminfoFile, []byte("MemTotal:  262144 kB\nMemFree:  200000 kB\n"), 0o644)
	time.Sleep(50 * time.Millisecond)
	if after, known := oomKills(); !known || after < before+1 || guardKills.Load() != before+1 {
		t.Fatalf("oom kills: %d -> %d (%v)", before, after, known)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
