package main

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// tagVar marks every process of one command: children inherit it, so the whole tree is found
// again even after processes leave the group (setsid) or are re-parented to the agent.
const tagVar = "SANDBOXD_EXEC_TAG"

const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// spec is one command to start.
type spec struct {
	Argv []string `json:"argv"`
	// Env adds to (and overrides) the sandbox's base environment.
	Env  []string `json:"env,omitempty"`
	Cwd  string   `json:"cwd,omitempty"`
	User string   `json:"user,omitempty"`
	// tty, when set, is a terminal the command starts on as a session leader, with it as its
	// controlling terminal (pty.go) rather than in a process group of its own.
	tty *os.File
}

// process is a started command.
type process struct {
	pid  int
	tag  string
	uid  uint32
	gid  uint32
	done <-chan syscall.WaitStatus
}

// startError is a command that could not start; code is what a shell would exit with.
type startError struct {
	code int
	msg  string
}

func (e *startError) Error() string { return e.msg }

// startProcess starts argv as the requested user in its own process group, with stdin, stdout
// and stderr as given (nil means /dev/null), in the sandbox's environment plus spec.Env. With
// dropCaps, a command that runs as root goes through `drop-caps` and starts with no capabilities.
func startProcess(s spec, defaultUser string, dropCaps bool, stdin io.Reader, stdout, stderr *os.File) (*process, error) {
	if len(s.Argv) == 0 || s.Argv[0] == "" {
		return nil, &startError{code: 127, msg: "argv is empty"}
	}
	id, err := resolveUser(s.User, defaultUser)
	if err != nil {
		return nil, &startError{code: 126, msg: err.Error()}
	}
	tag := newTag()
	env := mergeEnv(os.Environ(), []string{"HOME=" + id.home, "USER=" + id.name, "LOGNAME=" + id.name, "HOSTNAME=" + hostname()}, s.Env, []string{tagVar + "=" + tag})
	path, err := lookPath(s.Argv[0], envValue(env, "PATH"))
	if err != nil {
		return nil, err
	}
	if err := checkWorkdir(s.Cwd); err != nil {
		return nil, err
	}
	cmd := &exec.Cmd{Path: path, Args: s.Argv, Env: env, Dir: s.Cwd, Stdin: stdin, Stdout: stdout, Stderr: stderr}
	// A change of uid away from 0 clears every capability by itself; staying root keeps them.
	if dropCaps && id.uid == 0 {
		cmd.Path = "/proc/self/exe"
		cmd.Args = append([]string{"sandboxd-agent", "drop-caps", path}, s.Argv...)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Setpgid:    true,
		Credential: &syscall.Credential{Uid: id.uid, Gid: id.gid, Groups: id.groups, NoSetGroups: false},
		Cloneflags: commandCloneflags,
	}
	if s.tty != nil {
		// Its stdin is the terminal: child fd 0. A new session is a new process group too.
		cmd.SysProcAttr.Setpgid = false
		cmd.SysProcAttr.Setsid = true
		cmd.SysProcAttr.Setctty = true
		cmd.Stdin = s.tty
	}
	pid, done, err := children.start(func() (int, error) {
		if err := cmd.Start(); err != nil {
			return 0, err
		}
		return cmd.Process.Pid, nil
	})
	if err != nil {
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ENOENT) {
			return nil, &startError{code: 127, msg: fmt.Sprintf("%s: %v", s.Argv[0], err)}
		}
		return nil, &startError{code: 126, msg: fmt.Sprintf("%s: %v", s.Argv[0], err)}
	}
	return &process{pid: pid, tag: tag, uid: id.uid, gid: id.gid, done: done}, nil
}

// killTree SIGKILLs the process group and every process carrying the tag. It forks nothing, so
// it works while a fork bomb holds the pids limit. The agent cannot read the environment of
// another user's processes as root (that needs CAP_SYS_PTRACE, which no profile grants), so for
// a command of another user the search runs again on a thread whose filesystem uid and gid are
// that user's: the kernel checks access to /proc/N/environ with those. Where the kernel does not
// honour them (a permission error remains), the search runs as that user in a child
// (`sandboxd-agent kill-tagged TAG`), retried while a fork bomb holds the pids limit.
func (p *process) killTree() {
	syscall.Kill(-p.pid, syscall.SIGKILL)
	killTagged(p.tag)
	if p.uid == 0 {
		return
	}
	if err := killTaggedAs(p.tag, p.uid, p.gid); err == nil {
		return
	}
	for attempt := 1; attempt <= 10; attempt++ {
		cmd := &exec.Cmd{Path: "/proc/self/exe", Args: []string{"sandboxd-agent", "kill-tagged", p.tag}}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: p.uid, Gid: p.gid}}
		if runInternal(cmd) == nil {
			return
		}
		time.Sleep(time.Duration(attempt) * 20 * time.Millisecond)
	}
}

// mayHaveSurvivors says whether a command that exited may have left processes behind, without
// the cost of killTree's search (a child, under gVisor): a survivor is in the command's process
// group, or descends from a process that was re-parented to the agent (PID 1) and that the
// agent did not start itself.
func (p *process) mayHaveSurvivors() bool {
	if err := syscall.Kill(-p.pid, 0); err != syscall.ESRCH {
		return true
	}
	entries, _ := os.ReadDir("/proc")
	for _, entry := range entries {
		pid, err := strconv.Atoi(entry.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", entry.Name(), "stat"))
		if err == nil && parentOf(stat) == os.Getpid() && !children.started(pid) {
			return true
		}
	}
	return false
}

// parentOf reads the parent pid from /proc/N/stat ("pid (comm) state ppid ..."; comm may hold
// spaces and parentheses, so the fields are counted from the last ')').
func parentOf(stat []byte) int {
	text := string(stat)
	end := strings.LastIndexByte(text, ')')
	if end < 0 {
		return 0
	}
	fields := strings.Fields(text[end+1:])
	if len(fields) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(fields[1])
	return ppid
}

// killTaggedAs is killTagged with uid and gid as the filesystem ids of the calling thread,
// which the kernel uses to decide who may read /proc/N/environ. It fails if the ids could not be
// set, or if a process of uid still refused its environment (a kernel that ignores them).
// setfsuid(2) and setfsgid(2) act on the calling thread alone, so the goroutine stays locked to
// it until both are back to 0; if they cannot be restored, the thread ends with the goroutine.
func killTaggedAs(tag string, uid, gid uint32) error {
	result := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := setFsIDs(uid, gid); err != nil {
			if setFsIDs(0, 0) == nil {
				runtime.UnlockOSThread()
			}
			result <- err
			return
		}
		denied := killTaggedDenied(tag, uid)
		if setFsIDs(0, 0) == nil {
			runtime.UnlockOSThread()
		}
		if denied {
			result <- errors.New("the kernel refused the environment of a process of the same uid")
		} else {
			result <- nil
		}
	}()
	return <-result
}

// setFsIDs sets the calling thread's filesystem gid, then uid, and checks that both took: both
// calls return the previous value rather than an error.
func setFsIDs(uid, gid uint32) error {
	syscall.RawSyscall(syscall.SYS_SETFSGID, uintptr(gid), 0, 0)
	syscall.RawSyscall(syscall.SYS_SETFSUID, uintptr(uid), 0, 0)
	// An id of -1 is invalid, so the call changes nothing and returns the current one.
	nowGid, _, _ := syscall.RawSyscall(syscall.SYS_SETFSGID, ^uintptr(0), 0, 0)
	nowUid, _, _ := syscall.RawSyscall(syscall.SYS_SETFSUID, ^uintptr(0), 0, 0)
	if uint32(nowUid) != uid || uint32(nowGid) != gid {
		return fmt.Errorf("filesystem ids are %d:%d, not %d:%d", uint32(nowUid), uint32(nowGid), uid, gid)
	}
	return nil
}

// killTaggedCommand is `sandboxd-agent kill-tagged TAG`: killTagged as the calling user.
func killTaggedCommand(args []string) int {
	if len(args) != 1 {
		fmt.Fprintln(os.Stderr, "usage: sandboxd-agent kill-tagged TAG")
		return 2
	}
	killTagged(args[0])
	return 0
}

// killTagged SIGKILLs every process (that this process may inspect) whose environment carries
// the tag, repeating until a pass finds none (children may fork while it runs).
func killTagged(tag string) {
	killTaggedDenied(tag, noUID)
}

// noUID is a uid no process has: killTaggedDenied reports no refusals for it.
const noUID = ^uint32(0)

// killTaggedDenied is killTagged; it also says whether reading the environment of a process
// owned by uid was refused.
func killTaggedDenied(tag string, uid uint32) (denied bool) {
	needle := []byte(tagVar + "=" + tag + "\x00")
	for round := 0; round < 50; round++ {
		found := false
		entries, _ := os.ReadDir("/proc")
		for _, entry := range entries {
			pid, err := strconv.Atoi(entry.Name())
			if err != nil || pid == os.Getpid() {
				continue
			}
			dir := filepath.Join("/proc", entry.Name())
			environ, err := os.ReadFile(filepath.Join(dir, "environ"))
			if err == nil && containsBytes(environ, needle) {
				syscall.Kill(pid, syscall.SIGKILL)
				found = true
			} else if errors.Is(err, os.ErrPermission) && uid != noUID && ownedBy(dir, uid) {
				denied = true
			}
		}
		if !found {
			return denied
		}
		time.Sleep(5 * time.Millisecond)
	}
	return denied
}

// ownedBy says whether /proc/N belongs to uid (the process's effective uid, when it is
// dumpable).
func ownedBy(procDir string, uid uint32) bool {
	var st syscall.Stat_t
	return syscall.Stat(procDir, &st) == nil && st.Uid == uid
}

// exitCode turns a wait status into a shell-style exit code (128+signal when killed).
func exitCode(status syscall.WaitStatus) int {
	if status.Signaled() {
		return 128 + int(status.Signal())
	}
	return status.ExitStatus()
}

// lookPath finds a command in the command's own PATH (not the agent's).
func lookPath(name, pathEnv string) (string, error) {
	if strings.Contains(name, "/") {
		return name, checkExecutable(name)
	}
	if pathEnv == "" {
		pathEnv = defaultPath
	}
	for _, dir := range filepath.SplitList(pathEnv) {
		candidate := filepath.Join(dir, name)
		if err := checkExecutable(candidate); err == nil {
			return candidate, nil
		}
	}
	return "", &startError{code: 127, msg: name + ": command not found"}
}

// checkWorkdir names a working directory that does not exist: the failed chdir in the child
// would be reported as "fork/exec PROGRAM: no such file or directory", as if the program were
// missing. Whether the user may enter it is left to the kernel.
func checkWorkdir(dir string) error {
	if dir == "" {
		return nil
	}
	info, err := os.Stat(dir)
	if err != nil {
		return &startError{code: 126, msg: "working directory " + dir + ": no such file or directory"}
	}
	if !info.IsDir() {
		return &startError{code: 126, msg: "working directory " + dir + ": not a directory"}
	}
	return nil
}

func checkExecutable(path string) error {
	info, err := os.Stat(path)
	if err != nil {
		return &startError{code: 127, msg: path + ": no such file or directory"}
	}
	if info.IsDir() || info.Mode()&0o111 == 0 {
		return &startError{code: 126, msg: path + ": permission denied"}
	}
	return nil
}

// mergeEnv applies layers of K=V entries in order; later layers win.
func mergeEnv(layers ...[]string) []string {
	index := map[string]int{}
	var out []string
	for _, layer := range layers {
		for _, kv := range layer {
			key, _, _ := strings.Cut(kv, "=")
			if key == "" || strings.HasPrefix(key, "SANDBOXD_AGENT_") {
				continue
			}
			if i, ok := index[key]; ok {
				out[i] = kv
				continue
			}
			index[key] = len(out)
			out = append(out, kv)
		}
	}
	return out
}

func envValue(env []string, key string) string {
	for _, kv := range env {
		if k, v, _ := strings.Cut(kv, "="); k == key {
			return v
		}
	}
	return ""
}

func newTag() string {
	var b [12]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func containsBytes(haystack, needle []byte) bool {
	return strings.Contains(string(haystack), string(needle))
}

// runInternal starts one of the agent's internal commands through the reaper (so that its exit
// is not taken by the reaping loop) and waits for it to end; an error means it did not start.
func runInternal(cmd *exec.Cmd) error {
	_, done, err := children.start(func() (int, error) {
		if err := cmd.Start(); err != nil {
			return 0, err
		}
		return cmd.Process.Pid, nil
	})
	if err != nil {
		return err
	}
	<-done
	return nil
}
