/**
 * A Python script run inside a sandbox: connects to each `host:port` of its JSON argument with
 * proxy variables dropped, sends a GET, and prints `{target: "open <first bytes>" | "closed <error>"}`.
 */
export const TCP_PROBE = `
import json, os, socket, sys
for name in list(os.environ):
    if name.lower().endswith('_proxy'): del os.environ[name]
out = {}
for target in json.loads(sys.argv[1]):
    host, port = target.rsplit(':', 1)
    s = socket.socket(); s.settimeout(2)
    try:
        s.connect((host, int(port))); s.sendall(b'GET / HTTP/1.0\\r\\nHost: x\\r\\n\\r\\n'); out[target] = 'open ' + s.recv(200).decode(errors='replace')
    except Exception as e:
        out[target] = 'closed ' + type(e).__name__
    finally:
        s.close()
print(json.dumps(out))
`;
