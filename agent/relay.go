package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// relayDialTimeout bounds the dial of a port on the sandbox's loopback (a local connect
// answers at once, or is refused).
const relayDialTimeout = 5 * time.Second

// relayProtocol is the Upgrade token of a port relay: after the 101 the connection carries the
// TCP stream of the dialled port, bytes as they are, both ways.
const relayProtocol = "tcp"

// handlePortRelay serves `GET /v1/ports/{port}` with `Connection: Upgrade` and `Upgrade: tcp`:
// it dials the port on the sandbox's own loopback (127.0.0.1, else ::1) and, once connected,
// answers 101 and relays the bytes between the host's connection and the port until either
// side closes. It reaches what a program binds to 127.0.0.1 only, and sandboxes without a
// network (the restrictive profile), where the host has no address to connect to.
// 400 for a port outside 1-65535 or a request that is not an upgrade; 502 `{error}` when
// nothing listens on the port.
func (a *agent) handlePortRelay(w http.ResponseWriter, r *http.Request) {
	port, err := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/v1/ports/"))
	if err != nil || port < 1 || port > 65535 {
		writeError(w, http.StatusBadRequest, "the port must be a number from 1 to 65535")
		return
	}
	if r.Method != http.MethodGet || !strings.EqualFold(r.Header.Get("Upgrade"), relayProtocol) {
		writeError(w, http.StatusBadRequest, "a port relay is a GET with Connection: Upgrade and Upgrade: tcp")
		return
	}
	upstream, err := dialLoopback(port)
	if err != nil {
		writeError(w, http.StatusBadGateway, fmt.Sprintf("nothing listens on port %d in the sandbox: %v", port, err))
		return
	}
	hijacker, ok := w.(http.Hijacker)
	if !ok {
		upstream.Close()
		writeError(w, http.StatusInternalServerError, "the connection cannot be taken over")
		return
	}
	client, buffered, err := hijacker.Hijack()
	if err != nil {
		upstream.Close()
		return
	}
	if _, err := io.WriteString(client, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n\r\n"); err != nil {
		client.Close()
		upstream.Close()
		return
	}
	relay(client, buffered.Reader, upstream)
}

// dialLoopback connects to port on the IPv4 loopback, else on the IPv6 one (a server bound to
// ::1 only); the error is the IPv4 one when neither answers.
func dialLoopback(port int) (net.Conn, error) {
	conn, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), relayDialTimeout)
	if err == nil {
		return conn, nil
	}
	if conn6, err6 := net.DialTimeout("tcp", net.JoinHostPort("::1", strconv.Itoa(port)), relayDialTimeout); err6 == nil {
		return conn6, nil
	}
	return nil, err
}

// closeWriter is a connection whose sending half closes alone (TCP and Unix sockets).
type closeWriter interface {
	CloseWrite() error
}

// relay copies both ways until both directions have ended: the end of one direction is passed
// on as a half close, so a request body's end reaches the port while its answer still flows.
// `pending` reads the host's side: what the HTTP server had read past the upgrade request, then
// the connection itself.
func relay(client net.Conn, pending io.Reader, upstream net.Conn) {
	var done sync.WaitGroup
	done.Add(2)
	pass := func(to net.Conn, from io.Reader) {
		defer done.Done()
		io.Copy(to, from)
		if half, ok := to.(closeWriter); ok {
			half.CloseWrite()
		} else {
			to.Close()
		}
	}
	go pass(upstream, pending)
	go pass(client, upstream)
	done.Wait()
	client.Close()
	upstream.Close()
}
