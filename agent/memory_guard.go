package main

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// The memory guard: an OOM killer inside a gVisor sandbox. There, the host's OOM killer sees one
// process, gVisor's kernel (the sentry), and a command that allocates past the sandbox's memory
// limit makes the host kill it, and with it every process and file of the sandbox. gVisor has no
// OOM killer of its own, so the agent watches the sandbox's free memory (gVisor's /proc/meminfo,
// which counts the memory of every process and tmpfs against the limit) and, when less than the
// reserve is left, kills the command process with the largest resident set, as the kernel's OOM
// killer would: that command fails (exit 137, oom_killed) and the sandbox lives. The reserve is
// room for gVisor's own kernel, whose memory counts against the host's limit but not in MemFree:
// a quarter of MemTotal, at least the flag's bytes, at most half of MemTotal (a sandbox may be
// resized while stopped, and MemTotal follows its limit).
const (
	// memoryGuardPeriod is how often the guard reads the free memory while nothing is short. A
	// command allocating as fast as it can takes ~1 s per GiB under gVisor here, so one period
	// is well under what the reserve takes to fill.
	memoryGuardPeriod = 5 * time.Millisecond
	// memoryGuardSettle is how long the guard waits at most for a killed process to be gone (its
	// memory is free only then) before it looks again: it must not take the next process for one
	// that is still dying.
	memoryGuardSettle = 2 * time.Second
)

var (
	// guardKills counts the processes the memory guard killed; oomKills adds it to the cgroup's count.
	guardKills atomic.Int64
	// memoryGuarded is set once the guard runs: the OOM kills it counts are then known.
	memoryGuarded atomic.Bool
	// meminfoFile is gVisor's view of the sandbox's memory (a variable for the tests).
	meminfoFile = "/proc/meminfo"
	// procDir lists the sandbox's processes (a variable for the tests).
	procDir = "/proc"
	// kernelHeadroom is the part of the memory limit kept for gVisor's own kernel (the host's
	// limit is the sandbox's memory plus it): gVisor's MemTotal and MemFree count it as the
	// sandbox's, so the guard takes it off both, and the sandbox's programs get the memory asked
	// for while the kernel, which grows with every process the sandbox ran and which MemFree does
	// not show, has this much beside the reserve.
	kernelHeadroom uint64
)

// startMemoryGuard runs the guard until stop is called (the agent never does): whenever less
// than the reserve (memoryReserve) is free, it kills the largest command process.
func startMemoryGuard(leastReserve uint64) (stop func()) {
	memoryGuarded.Store(true)
	quit := make(chan struct{})
	go func() {
		for {
			if free, total, ok := freeMemory(); ok && free < memoryReserve(total, leastReserve) {
				if pid := largestProcess(); pid > 0 && syscall.Kill(pid, syscall.SIGKILL) == nil {
					guardKills.Add(1)
					waitGone(pid, memoryReserve(total, leastReserve))
					continue
				}
			}
			select {
			case <-quit:
				return
			case <-time.After(memoryGuardPeriod):
			}
		}
	}()
	return func() {
		close(quit)
		memoryGuarded.Store(false)
	}
}

// memoryReserve is the free memory the guard keeps: a quarter of total, at least least, at most half.
func memoryReserve(total, least uint64) uint64 {
	reserve := total / 4
	if reserve < least {
		reserve = least
	}
	if reserve > total/2 {
		reserve = total / 2
	}
	return reserve
}

// waitGone waits, at most memoryGuardSettle, until the killed process pid is gone (or a zombie)
// or the free memory is back above the reserve.
func waitGone(pid int, reserve uint64) {
	deadline := time.Now().Add(memoryGuardSettle)
	for time.Now().Before(deadline) {
		if free, _, ok := freeMemory(); ok && free >= reserve {
			return
		}
		stat, err := os.ReadFile(filepath.Join(procDir, strconv.Itoa(pid), "stat"))
		if err != nil || processState(stat) == 'Z' {
			// Gone: give its pages a moment to return to the free count.
			time.Sleep(20 * time.Millisecond)
			return
		}
		time.Sleep(memoryGuardPeriod)
	}
}

// processState is the state letter of a /proc/PID/stat line (after the command's closing parenthesis).
func processState(stat []byte) byte {
	end := bytes.LastIndexByte(stat, ')')
	if end < 0 || end+2 >= len(stat) {
		return 0
	}
	return stat[end+2]
}

// freeMemory is MemFree and MemTotal of /proc/meminfo in bytes.
func freeMemory() (free, total uint64, ok bool) {
	data, err := os.ReadFile(meminfoFile)
	if err != nil {
		return 0, 0, false
	}
	var seen int
	scanner := bufio.NewScanner(bytes.NewReader(data))
	for scanner.Scan() && seen < 2 {
		fields := strings.Fields(scanner.Text())
		if len(fields) < 2 || (fields[0] != "MemFree:" && fields[0] != "MemTotal:") {
			continue
		}
		kb, err := strconv.ParseUint(fields[1], 10, 64)
		if err != nil {
			return 0, 0, false
		}
		if fields[0] == "MemFree:" {
			free = kb * 1024
		} else {
			total = kb * 1024
		}
		seen++
	}
	return withoutHeadroom(free), withoutHeadroom(total), seen == 2
}

// withoutHeadroom is a MemFree or MemTotal figure less the kernel's headroom (at least 0).
func withoutHeadroom(bytes uint64) uint64 {
	if bytes <= kernelHeadroom {
		return 0
	}
	return bytes - kernelHeadroom
}

// largestProcess is the pid with the largest resident set, the agent (PID 1, and this process
// where it is another) excepted; 0 when there is none.
func largestProcess() int {
	entries, err := os.ReadDir(procDir)
	if err != nil {
		return 0
	}
	self := os.Getpid()
	best, bestPages := 0, uint64(0)
	for _, entry := range entries {
		pid, err := strconv.Atoi(entry.Name())
		if err != nil || pid == 1 || pid == self {
			continue
		}
		data, err := os.ReadFile(filepath.Join(procDir, entry.Name(), "statm"))
		if err != nil {
			continue
		}
		fields := strings.Fields(string(data))
		if len(fields) < 2 {
			continue
		}
		pages, err := strconv.ParseUint(fields[1], 10, 64)
		if err == nil && pages > bestPages {
			best, bestPages = pid, pages
		}
	}
	return best
}
