package main

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The agent shares the sandbox's pids limit with the commands it runs, and a thread counts as a
// pid. When a fork bomb fills that limit, clone(2) fails with EAGAIN, and the Go runtime treats a
// thread it cannot create as fatal ("runtime: failed to create new OS thread", "fatal error:
// newosproc"): the agent, PID 1, would exit, and with it the whole sandbox. The runtime needs a
// new thread whenever every thread it has is busy: running Go code (at most GOMAXPROCS of them)
// or blocked in a system call (the os/signal loop that receives SIGCHLD always is; a request in
// fork, open or read of /proc is for a moment). It never gives an idle thread back to the
// system, so threads made at start, before any command runs, serve every later need.

// maxProcs caps GOMAXPROCS, and with it the threads that run Go code at once: the runtime sizes
// it by the host's CPUs, not the sandbox's quota, and the agent mostly waits for its children.
const maxProcs = 2

// reservedThreads is how many threads the agent makes at start and keeps idle: enough for
// maxProcs threads running Go code, the signal loop, and a dozen requests inside a blocking system
// call at the same moment. They cost as many pids of the sandbox's limit.
const reservedThreads = 16

// reserveThreads caps GOMAXPROCS at maxProcs and makes the runtime hold n more OS threads, idle.
func reserveThreads(n int) {
	if runtime.GOMAXPROCS(0) > maxProcs {
		runtime.GOMAXPROCS(maxProcs)
	}
	holdThreads(n)
}

// holdThreads has n goroutines lock themselves to an OS thread each, all at the same time, so
// that the runtime must make n distinct threads; then they unlock and return, and the threads
// go to the runtime's list of idle threads, where it looks first before it makes a new one. (A
// goroutine that returned while still locked would take its thread with it.)
func holdThreads(n int) {
	var locked, finished sync.WaitGroup
	release := make(chan struct{})
	locked.Add(n)
	finished.Add(n)
	for i := 0; i < n; i++ {
		go func() {
			defer finished.Done()
			runtime.LockOSThread()
			locked.Done()
			<-release
			runtime.UnlockOSThread()
		}()
	}
	locked.Wait()
	close(release)
	finished.Wait()
	settleThreads()
}

// settleThreads waits until the thread count has not changed for 10 ms (at most 200 ms). A
// locked thread that blocks asks the runtime's template thread for a new thread to run the
// other goroutines, and that thread may come a moment after holdThreads' goroutines are done:
// it must come now, not when a command may hold every pid.
func settleThreads() {
	last, stable := threadCount(), 0
	for i := 0; i < 100 && stable < 5; i++ {
		time.Sleep(2 * time.Millisecond)
		if now := threadCount(); now == last {
			stable++
		} else {
			last, stable = now, 0
		}
	}
}

// threadCount is the number of this process's threads, from /proc/self/status.
func threadCount() int {
	status, _ := os.ReadFile("/proc/self/status")
	for _, line := range strings.Split(string(status), "\n") {
		if strings.HasPrefix(line, "Threads:") {
			n, _ := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "Threads:")))
			return n
		}
	}
	return 0
}
