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
	"strings"
	"syscall"
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

// startProcess starts argv as the requested user in a session of its own (registered as a live
// run until released: tree.go), with stdin, stdout
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
	// A session of its own (and so a process group): what leaves the group (job control) stays in
	// the session, and what leaves the session too is still found by ancestry (tree.go).
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Setsid:     true,
		Credential: &syscall.Credential{Uid: id.uid, Gid: id.gid, Groups: id.groups, NoSetGroups: false},
		Cloneflags: commandCloneflags,
	}
	if s.tty != nil {
		// Its stdin is the terminal (child fd 0), which becomes the session's controlling one.
		cmd.SysProcAttr.Setctty = true
		cmd.Stdin = s.tty
	}
	pid, done, err := startCmd(cmd)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ENOENT) {
			return nil, &startError{code: 127, msg: fmt.Sprintf("%s: %v", s.Argv[0], err)}
		}
		return nil, &startError{code: 126, msg: fmt.Sprintf("%s: %v", s.Argv[0], err)}
	}
	proc := &process{pid: pid, tag: tag, uid: id.uid, gid: id.gid, done: done}
	runs.add(proc)
	return proc, nil
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

// runInternal starts one of the agent's internal commands through the reaper (so that its exit
// is not taken by the reaping loop) and waits for it to end; an error means it did not start.
func runInternal(cmd *exec.Cmd) error {
	_, done, err := startCmd(cmd)
	if err != nil {
		return err
	}
	<-done
	return nil
}
