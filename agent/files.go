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
	"sync"
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
	fileSpecial  = 7
	fileInUse    = 8
	fileInvalid  = 9
)

var fileStatus = map[int]int{
	fileNotFound: http.StatusNotFound,
	fileIsDir:    http.StatusBadRequest,
	fileDenied:   http.StatusForbidden,
	fileNotDir:   http.StatusBadRequest,
	fileSpecial:  http.StatusBadRequest,
	fileFailed:   http.StatusInternalServerError,
	fileInUse:    http.StatusConflict,
	fileInvalid:  http.StatusBadRequest,
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
	} else if view := r.URL.Query().Get("op"); r.Method == http.MethodGet && isView(view) {
		op = view
	}
	if !ok {
		writeError(w, http.StatusMethodNotAllowed, "use GET (?op=list|stat for views), PUT, DELETE or POST ?op=mkdir")
		return
	}
	user := r.URL.Query().Get("user")
	if id, err := resolveUser(user, a.defaultUser); err == nil && a.fileThreads && !(a.dropCaps && id.uid == 0) {
		// Root with --drop-caps must hold no capabilities, which a thread of the agent does not shed.
		a.fileOnThread(w, r, op, path, id)
		return
	}
	a.fileInChild(w, r, op, path, user)
}

// answersContent says whether an operation's success is the marker byte and content (the
// child's stdout) rather than the agent's {"path"}; contentType is that content's type.
func answersContent(op string) bool {
	return op == "read" || op == "pack" || op == "unpack" || isView(op)
}

func contentType(op string) string {
	switch op {
	case "read":
		return "application/octet-stream"
	case "pack":
		return "application/x-tar"
	}
	return "application/json"
}

// fileInChild performs a file operation in a child process with the user's credentials: the
// request's body is its stdin (write, unpack), its stdout the answer's content.
func (a *agent) fileInChild(w http.ResponseWriter, r *http.Request, op, path, user string) {
	// The content passes through pipes of 1 MiB in 256 KiB copies: with the default 64 KiB pipe
	// and 32 KiB copies, a 1 MiB file cost ~5 ms more in rounds between the child and the agent.
	var err error
	var stdin, stdinW *os.File
	if op == "write" || op == "unpack" {
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
	proc, err := startProcess(spec{Argv: argv, User: user}, a.defaultUser, a.dropCaps, stdinReader, stdoutW, stderrW)
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
	streamed := answersContent(op) && markerErr == nil && marker == 0
	if streamed {
		w.Header().Set("Content-Type", contentType(op))
		w.WriteHeader(http.StatusOK)
		if _, err := copyLarge(w, reader); err != nil {
			proc.killTree()
		}
	}
	code := exitCode(<-proc.done)
	runs.release(proc)
	stderrR.Close()
	if streamed {
		if code != fileOK {
			// The status is sent: cut the connection, so that the client does not take what it
			// received for the whole content.
			panic(http.ErrAbortHandler)
		}
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
		fmt.Fprintln(os.Stderr, "usage: sandboxd-agent file read|write|delete|mkdir|list|stat|pack|unpack PATH")
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
		err = deletePath(path)
	case "mkdir":
		err = os.MkdirAll(path, 0o755)
	case "list", "stat":
		err = printView(op, path)
	case "pack":
		err = packDirectory(path, os.Stdout)
	case "unpack":
		err = unpackInto(path, os.Stdin, os.Stdout)
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
	file, err := openToRead(path)
	if err != nil {
		return err
	}
	defer file.Close()
	out := bufio.NewWriterSize(os.Stdout, copyBufferSize)
	out.WriteByte(0)
	if _, err := io.Copy(out, file); err != nil {
		return err
	}
	return out.Flush()
}

func writeFile(path string) error {
	file, err := createToWrite(path)
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

// notRegularError refuses to read a file that is neither regular nor a directory: a FIFO, socket
// or device may never end (or block the open), and a read must end.
type notRegularError struct{ kind string }

func (e *notRegularError) Error() string { return "not a regular file: " + e.kind }

// fileKind names a file type for a message.
func fileKind(mode fs.FileMode) string {
	switch {
	case mode&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case mode&fs.ModeSocket != 0:
		return "a socket"
	case mode&fs.ModeCharDevice != 0:
		return "a character device"
	case mode&fs.ModeDevice != 0:
		return "a block device"
	}
	return "a special file"
}

// openToRead opens a regular file for reading; a directory is EISDIR, any other type a
// notRegularError. O_NONBLOCK keeps the open of a FIFO without a writer from waiting for one;
// a regular file reads the same with it.
func openToRead(path string) (*os.File, error) {
	file, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	info, err := file.Stat()
	if err == nil && info.IsDir() {
		err = syscall.EISDIR
	} else if err == nil && !info.Mode().IsRegular() {
		err = &notRegularError{kind: fileKind(info.Mode())}
	}
	if err != nil {
		file.Close()
		return nil, err
	}
	return file, nil
}

// createToWrite creates or truncates a file, and its parent directories; a directory is EISDIR.
func createToWrite(path string) (*os.File, error) {
	if info, err := os.Stat(path); err == nil && info.IsDir() {
		return nil, syscall.EISDIR
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	return os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
}

// deletePath removes a file, or a directory with everything in it; a missing path is an error.
func deletePath(path string) error {
	if _, err := os.Lstat(path); err != nil {
		return err
	}
	return os.RemoveAll(path)
}

// fileOnThread performs a file operation in the agent, on a thread with the user's credentials
// (thread_credentials.go). Only opening, creating and removing need them: the content of an
// opened file is copied from the handler's own goroutine.
func (a *agent) fileOnThread(w http.ResponseWriter, r *http.Request, op, path string, id identity) {
	var file *os.File
	var view []byte
	err := asUser(id, func() (err error) {
		switch op {
		case "list", "stat":
			view, err = viewOf(op, path)
		case "read":
			file, err = openToRead(path)
		case "write":
			file, err = createToWrite(path)
		case "delete":
			err = deletePath(path)
		case "mkdir":
			err = os.MkdirAll(path, 0o755)
		}
		return err
	})
	switch {
	case err != nil:
		if op == "write" {
			// Read the body to its end, so that the connection stays usable for the next request.
			io.Copy(io.Discard, r.Body)
		}
		writeFileError(w, path, err)
	case isView(op):
		w.Header().Set("Content-Type", "application/json")
		w.Write(view)
	case op == "read":
		defer file.Close()
		w.Header().Set("Content-Type", "application/octet-stream")
		w.WriteHeader(http.StatusOK)
		copyLarge(w, file)
	case op == "write":
		_, err = copyLarge(file, http.MaxBytesReader(w, r.Body, maxRequestBytes))
		if closeErr := file.Close(); err == nil {
			err = closeErr
		}
		if err != nil {
			writeFileError(w, path, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"path": path})
	default:
		writeJSON(w, http.StatusOK, map[string]string{"path": path})
	}
}

// writeFileError answers a failed file operation as the child's exit code and message would.
func writeFileError(w http.ResponseWriter, path string, err error) {
	status, known := fileStatus[classify(err)]
	if !known || errors.Is(err, errCredentials) {
		status = http.StatusInternalServerError
	}
	writeError(w, status, describe(err, path))
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

// copyBuffers are reused: the agent is PID 1 of a sandbox with a memory limit.
var copyBuffers = sync.Pool{New: func() interface{} { b := make([]byte, copyBufferSize); return &b }}

// copyLarge copies in copyBufferSize pieces. The wrappers hide ReaderFrom and WriterTo, through
// which io.Copy would otherwise fall back to 32 KiB copies (pipes, http responses, bufio).
func copyLarge(dst io.Writer, src io.Reader) (int64, error) {
	buffer := copyBuffers.Get().(*[]byte)
	defer copyBuffers.Put(buffer)
	return io.CopyBuffer(struct{ io.Writer }{dst}, struct{ io.Reader }{src}, *buffer)
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
	var special *notRegularError
	var archive *archiveError
	switch {
	case errors.As(err, &archive):
		return fileInvalid
	case errors.As(err, &notDirectoryError{}):
		return fileNotDir
	case errors.As(err, &special):
		return fileSpecial
	case errors.Is(err, fs.ErrNotExist):
		return fileNotFound
	case errors.Is(err, syscall.EISDIR):
		return fileIsDir
	case errors.Is(err, fs.ErrPermission), errors.Is(err, syscall.EROFS):
		return fileDenied
	case errors.Is(err, syscall.ENOTDIR), errors.Is(err, syscall.EEXIST):
		return fileNotDir
	case errors.Is(err, syscall.EBUSY), errors.Is(err, syscall.ENOTEMPTY), errors.Is(err, syscall.ETXTBSY):
		return fileInUse
	case errors.Is(err, syscall.EINVAL), errors.Is(err, syscall.ELOOP), errors.Is(err, syscall.ENAMETOOLONG), errors.Is(err, syscall.EXDEV):
		return fileInvalid
	}
	return fileFailed
}

// syscallMessage is the system's words for the error, without the operation and path that
// os wraps around them.
func syscallMessage(err error) string {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno.Error()
	}
	return err.Error()
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
		if errors.As(err, &notDirectoryError{}) {
			return fmt.Sprintf("'%s' is not a directory: only a directory can be listed", path)
		}
		return fmt.Sprintf("a parent of '%s' is not a directory", path)
	case fileSpecial:
		var special *notRegularError
		errors.As(err, &special)
		return fmt.Sprintf("'%s' is %s, not a regular file: only regular files can be read", path, special.kind)
	case fileInUse:
		if errors.Is(err, syscall.EBUSY) {
			return fmt.Sprintf("'%s' is in use (a mount point, or a file the system holds): it cannot be removed", path)
		}
		return fmt.Sprintf("'%s' is in use: %s", path, syscallMessage(err))
	case fileInvalid:
		var archive *archiveError
		if errors.As(err, &archive) {
			return archive.msg
		}
		return fmt.Sprintf("'%s': %s", path, syscallMessage(err))
	}
	return err.Error()
}
