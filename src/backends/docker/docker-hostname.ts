import { spawn, type ChildProcessByStdio } from 'node:child_process';
import { readFile, writeFile } from 'node:fs/promises';
import type { Socket } from 'node:net';
import type { Readable, Writable } from 'node:stream';
import type Docker from 'dockerode';
import { agentBinary } from './agent-sockets.js';

type Helper = ChildProcessByStdio<Writable, Readable, null>;

/** How long one naming may take before the hostnamer is taken for stuck and ended. */
const HOSTNAMER_TIMEOUT_MS = 5_000;

/** A sandbox's hostname: its name, cut to the 63 characters a hostname label may have. */
export function hostnameOf(name: string): string {
  return name.slice(0, 63);
}

/**
 * The host side of naming claimed runc containers: one resident `sandboxd-agent hostnamer`
 * process (agent/hostnamer.go), started at the first claim and again after it ends, which enters
 * a container's UTS namespace from the host and sets its hostname. No process of the sandbox may
 * (it takes CAP_SYS_ADMIN, outside every profile's capabilities, so not even a privileged Engine
 * exec can), so it needs the server to run as root beside the engine. Requests are answered in
 * order, one line each. Before it, each claim started `nsenter` and the agent binary: 3-6 ms on
 * a quiet host, tens of milliseconds on a busy one.
 */
class Hostnamer {
  private current?: { child: Helper; waiting: ((answer: string) => void)[] };

  /** Sets the hostname of the UTS namespace of host process `pid`; resolves with whether it worked. */
  set(pid: number, hostname: string): Promise<boolean> {
    const { child, waiting } = this.current ?? this.start();
    return new Promise((resolve) => {
      const timer = setTimeout(() => this.end(child), HOSTNAMER_TIMEOUT_MS).unref();
      waiting.push((answer) => {
        clearTimeout(timer);
        resolve(answer === 'ok');
      });
      child.stdin.write(`${pid} ${hostname}\n`);
    });
  }

  private start(): NonNullable<Hostnamer['current']> {
    const child = spawn(agentBinary(), ['hostnamer'], { stdio: ['pipe', 'pipe', 'ignore'] });
    const current = { child, waiting: [] as ((answer: string) => void)[] };
    let partial = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      const lines = (partial + chunk).split('\n');
      partial = lines.pop() ?? '';
      for (const line of lines) current.waiting.shift()?.(line);
    });
    child.stdin.on('error', () => this.end(child));
    child.on('error', () => this.end(child));
    child.on('exit', () => this.end(child));
    // It must not keep the server's process alive: it ends when its input closes.
    child.unref();
    for (const pipe of [child.stdin, child.stdout]) (pipe as unknown as Socket).unref();
    this.current = current;
    return current;
  }

  /** Ends a hostnamer that failed, failing what it had yet to answer; the next request starts another. */
  private end(child: Helper): void {
    if (this.current?.child !== child) return;
    const { waiting } = this.current;
    this.current = undefined;
    child.kill('SIGKILL');
    for (const answer of waiting.splice(0)) answer('error: the hostnamer ended');
  }
}

const hostnamer = new Hostnamer();

/**
 * Renames the host of a running runc container (a warm-pool instance claimed as a sandbox), from
 * the host (Hostnamer). A gVisor sandbox keeps its own UTS namespace inside its kernel, which the
 * host cannot enter: its agent sets the name instead (agent/hostname.go, the agent client's
 * `setHostname`). Resolves with whether it worked.
 */
export async function setHostname(info: Docker.ContainerInspectInfo, hostname: string): Promise<boolean> {
  if (info.HostConfig.Runtime === 'runsc' || !info.State.Pid) return false;
  return hostnamer.set(info.State.Pid, hostname);
}

/**
 * Rewrites the engine's /etc/hostname and /etc/hosts of a container (files on the host that it
 * bind-mounts read-only) to name `hostname`: the content changes in place, so the mounts inside
 * see it. The engine wrote them with the hostname the container was made with.
 */
export async function rewriteHostFiles(info: Docker.ContainerInspectInfo, hostname: string): Promise<void> {
  const old = info.Config.Hostname;
  if (info.HostnamePath) await writeFile(info.HostnamePath, `${hostname}\n`);
  if (info.HostsPath && old && old !== hostname) {
    const hosts = await readFile(info.HostsPath, 'utf8');
    const word = new RegExp(`(?<=\\s)${old.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}(?=\\s|$)`, 'gm');
    await writeFile(info.HostsPath, hosts.replace(word, hostname));
  }
}

/**
 * Makes the sandbox's name its hostname everywhere a program looks: the UTS name (`hostname`;
 * set from the host under runc, by the agent under gVisor, `setInGvisor`), the engine's
 * /etc/hostname and /etc/hosts (files on the host that the container mounts; the engine writes
 * them anew at each start), and with them $HOSTNAME, which the agent sets for each command from
 * the UTS name. The two run at once. Resolves with what did not take, if anything.
 */
export async function nameHost(info: Docker.ContainerInspectInfo, name: string, setInGvisor: (hostname: string) => Promise<unknown>): Promise<{ uts: boolean; files: boolean }> {
  const hostname = hostnameOf(name);
  const [uts, files] = await Promise.all([
    info.HostConfig.Runtime === 'runsc' ? setInGvisor(hostname).then(() => true, () => false) : setHostname(info, hostname),
    rewriteHostFiles(info, hostname).then(() => true, () => false),
  ]);
  return { uts, files };
}
