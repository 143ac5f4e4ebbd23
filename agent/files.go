package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// Exit codes of `sandboxd-agent file ...`, mapped to HTTP statuses by the server side.
const (
	fileOK       = 0
	fileNotFound = 2
	fileIsDir    = 3
	fileDenied   = 4
	fileNotDir   = 5
	fileFailed   = 6
)

var fileStatus = map[int]int{
	fileNotFound: http.StatusNotFound,
	fileIsDir:    http.StatusBadRequest,
	fileDenied:   http.StatusForbidden,
	fileNotDir:   http.StatusBadRequest,
	fileFailed:   http.StatusInternalServerError,
}

// handleFiles serves GET (read), PUT (write, parents created), DELETE (file or directory) and
// POST ?op=mkdir on ?path=, as ?user= (default: the sandbox's default user). Each operation runs
// in a child process with that user's credentials, so the kernel makes every permission check
// and new files belong to the user.
func (a *agent) handleFiles(w http.ResponseWriter, r *http.Request) {
	path := r.URL.Query().Get("path")
	if !filepath.IsAbs(path) || filepath.Clean(path) != path {
		writeError(w, http.StatusBadRequest, "path must be absolute and normalised")
		return
	}
	ops := map[string]string{http.MethodGet: "read", http.MethodPut: "write", http.MethodDelete: "delete"}
	op, ok := ops[r.Method]
	if r.Method == http.MethodPost && r.URL.Query().Get("op") == "mkdir" {
		op, ok = "mkdir", true
	}
	if !ok {
		writeError(w, http.StatusMethodNotAllowed, "use GET, PUT, DELETE or POST ?op=mkdir")
		return
	}
	// The content passes through pipes of 1 MiB in 256 KiB copies: with the default 64 KiB pipe
	// and 32 KiB copies, a 1 MiB file cost ~5 ms more in rounds between the child and the agent.
	var err error
	var stdin, stdinW *os.File
	if op == "write" {
		if stdin, stdinW, err = os.Pipe(); err != nil {
			writeError(w, http.StatusInternalServerError, err.Error())
			return
		}
		growPipe(stdinW)
	}
	stdout, stdoutW, err := os.Pipe()
	if err != nil {
		closeAll(stdin, stdinW)
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	growPipe(stdoutW)
	defer stdout.Close()
	var stderr bytes.Buffer
	stderrR, stderrW, err := os.Pipe()
	if err != nil {
		stdoutW.Close()
		closeAll(stdin, stdinW)
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	// /proc/self/exe is a magic link: the user can run the agent's own binary even when the
	// directory it lives in is closed to them.
	argv := []string{"/proc/self/exe", "file", op, path}
	var stdinReader io.Reader
	if stdin != nil {
		stdinReader = stdin
	}
	proc, err := startProcess(spec{Argv: argv, User: r.URL.Query().Get("user")}, a.defaultUser, a.dropCaps, stdinReader, stdoutW, stderrW)
	stdoutW.Close()
	stderrW.Close()
	// The child holds its own read end; without ours, the copy fails (EPIPE) once the child is gone.
	closeAll(stdin)
	if err != nil {
		closeAll(stdinW)
		stderrR.Close()
		status := http.StatusInternalServerError
		if strings.HasPrefix(err.Error(), "unknown ") {
			status = http.StatusBadRequest
		}
		writeError(w, status, err.Error())
		return
	}
	if stdinW != nil {
		body := http.MaxBytesReader(w, r.Body, maxRequestBytes)
		go func() {
			defer stdinW.Close()
			copyLarge(stdinW, body)
		}()
	}
	go io.Copy(&stderr, stderrR)
	// A read answers with one marker byte, then the content: the status must be known before
	// the first content byte is sent, without holding the whole file in memory.
	reader := bufio.NewReaderSize(stdout, copyBufferSize)
	marker, markerErr := reader.ReadByte()
	if op == "read" && markerErr == nil && marker == 0 {
		w.Header().Set("Content-Type", "application/octet-stream")
		w.WriteHeader(http.StatusOK)
		if _, err := copyLarge(w, reader); err != nil {
			proc.killTree()
		}
	}
	code := exitCode(<-proc.done)
	stderrR.Close()
	if op == "read" && marker == 0 && markerErr == nil {
		return
	}
	if code == fileOK {
		writeJSON(w, http.StatusOK, map[string]string{"path": path})
		return
	}
	status, known := fileStatus[code]
	if !known {
		status = http.StatusInternalServerError
	}
	writeError(w, status, strings.TrimSpace(stderr.String()))
}

// fileCommand performs one file operation as the calling process's user; see handleFiles.
func fileCommand(args []string) int {
	if len(args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: sandboxd-agent file read|write|delete|mkdir PATH")
		return fileFailed
	}
	op, path := args[0], args[1]
	var err error
	switch op {
	case "read":
		err = readFile(path)
	case "write":
		err = writeFile(path)
	case "delete":
		if _, statErr := os.Lstat(path); statErr != nil {
			err = statErr
		} else {
			err = os.RemoveAll(path)
		}
	case "mkdir":
		err = os.MkdirAll(path, 0o755)
	default:
		err = fmt.Errorf("unknown file operation %q", op)
	}
	if err == nil {
		return fileOK
	}
	fmt.Fprintf(os.Stderr, "%s\n", describe(err, path))
	return classify(err)
}

func readFile(path string) error {
	file, err := os.Open(path)
	if err != nil {
		return err
	}
	defer file.Close()
	info, err := file.Stat()
	if err != nil {
		return err
	}
	if info.IsDir() {
		return syscall.EISDIR
	}
	out := bufio.NewWriterSize(os.Stdout, 256<<10)
	out.WriteByte(0)
	if _, err := io.Copy(out, file); err != nil {
		return err
	}
	return out.Flush()
}

func writeFile(path string) error {
	if info, err := os.Stat(path); err == nil && info.IsDir() {
		io.Copy(io.Discard, os.Stdin)
		return syscall.EISDIR
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		io.Copy(io.Discard, os.Stdin)
		return err
	}
	file, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		io.Copy(io.Discard, os.Stdin)
		return err
	}
	if _, err := copyLarge(file, os.Stdin); err != nil {
		file.Close()
		return err
	}
	return file.Close()
}

// closeAll closes the files that are open (nil ones are skipped).
func closeAll(files ...*os.File) {
	for _, f := range files {
		if f != nil {
			f.Close()
		}
	}
}

// copyBufferSize is the unit in which file content is copied between pipes, files and the socket.
const copyBufferSize = 256 << 10

// copyLarge copies in copyBufferSize pieces. The wrappers hide ReaderFrom and WriterTo, through
// which io.Copy would otherwise fall back to 32 KiB copies (pipes, http responses, bufio).
func copyLarge(dst io.Writer, src io.Reader) (int64, error) {
	return io.CopyBuffer(struct{ io.Writer }{dst}, struct{ io.Reader }{src}, make([]byte, copyBufferSize))
}

// pipeSize is the capacity asked for a pipe that carries file content (the unprivileged limit,
// /proc/sys/fs/pipe-max-size, is 1 MiB by default); where the kernel refuses, the pipe keeps 64 KiB.
const pipeSize = 1 << 20

// fcntlSetPipeSize is F_SETPIPE_SZ, which package syscall does not name.
const fcntlSetPipeSize = 1031

// growPipe asks for a pipe of pipeSize, through the raw descriptor so that the file stays
// non-blocking (Fd would switch it to blocking mode).
func growPipe(f *os.File) {
	raw, err := f.SyscallConn()
	if err != nil {
		return
	}
	raw.Control(func(fd uintptr) {
		syscall.Syscall(syscall.SYS_FCNTL, fd, fcntlSetPipeSize, pipeSize)
	})
}

func classify(err error) int {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fileNotFound
	case errors.Is(err, syscall.EISDIR):
		return fileIsDir
	case errors.Is(err, fs.ErrPermission), errors.Is(err, syscall.EROFS):
		return fileDenied
	case errors.Is(err, syscall.ENOTDIR), errors.Is(err, syscall.EEXIST):
		return fileNotDir
	}
	return fileFailed
}

func describe(err error, path string) string {
	switch classify(err) {
	case fileNotFound:
		return fmt.Sprintf("file '%s' not found", path)
	case fileIsDir:
		return fmt.Sprintf("'%s' is a directory", path)
	case fileDenied:
		if errors.Is(err, syscall.EROFS) {
			return fmt.Sprintf("read-only file system: %s", path)
		}
		return fmt.Sprintf("permission denied: %s", path)
	case fileNotDir:
		return fmt.Sprintf("a parent of '%s' is not a directory", path)
	}
	return err.Error()
}
