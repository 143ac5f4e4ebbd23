package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
)

// dialRelay connects to an agent's socket and asks it to relay port; the connection and the
// first line of the answer.
func dialRelay(t *testing.T, socket string, port int) (net.Conn, *bufio.Reader, string) {
	t.Helper()
	conn, err := net.Dial("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	fmt.Fprintf(conn, "GET /v1/ports/%d HTTP/1.1\r\nHost: agent\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n\r\n", port)
	reader := bufio.NewReader(conn)
	status, err := reader.ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	for {
		line, err := reader.ReadString('\n')
		if err != nil || line == "\r\n" {
			break
		}
	}
	return conn, reader, strings.TrimSpace(status)
}

func TestPortRelayCarriesBytesBothWaysAndHalfCloses(t *testing.T) {
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer listener.Close()
	go func() {
		conn, err := listener.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		// Echo everything, upper-cased, then answer "bye" once the client has finished sending.
		data, _ := io.ReadAll(conn)
		conn.Write([]byte(strings.ToUpper(string(data)) + "bye"))
	}()
	port := listener.Addr().(*net.TCPAddr).Port
	conn, reader, status := dialRelay(t, serveAgentSocket(t), port)
	if !strings.Contains(status, "101") {
		t.Fatalf("status %q, want 101", status)
	}
	conn.Write([]byte("hello "))
	conn.Write([]byte("world"))
	conn.(*net.UnixConn).CloseWrite()
	answer, _ := io.ReadAll(reader)
	if string(answer) != "HELLO WORLDbye" {
		t.Fatalf("answer %q", answer)
	}
}

func TestPortRelayRefusesAClosedPortAndABadOne(t *testing.T) {
	listener, _ := net.Listen("tcp", "127.0.0.1:0")
	port := listener.Addr().(*net.TCPAddr).Port
	listener.Close()
	socket := serveAgentSocket(t)
	if _, _, status := dialRelay(t, socket, port); !strings.Contains(status, "502") {
		t.Fatalf("closed port: status %q, want 502", status)
	}
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", socket)
	}}}
	for _, path := range []string{"/v1/ports/0", "/v1/ports/70000", "/v1/ports/x", fmt.Sprintf("/v1/ports/%d", port)} {
		response, err := client.Get("http://agent" + path)
		if err != nil {
			t.Fatal(err)
		}
		response.Body.Close()
		if response.StatusCode != http.StatusBadRequest {
			t.Fatalf("%s without an upgrade: status %d, want 400", path, response.StatusCode)
		}
	}
}
