import { execFile } from 'node:child_process';
import { readFile, writeFile } from 'node:fs/promises';
import { promisify } from 'node:util';
import type Docker from 'dockerode';
import { agentBinary } from './agent-sockets.js';

const run = promisify(execFile);

/** A sandbox's hostname: its name, cut to the 63 characters a hostname label may have. */
export function hostnameOf(name: string): string {
  return name.slice(0, 63);
}

/**
 * Renames the host of a running runc container (a warm-pool instance claimed as a sandbox).
 * No process of the sandbox may (it takes CAP_SYS_ADMIN, outside every profile's capabilities,
 * so not even a privileged Engine exec can), so the server enters the container's UTS namespace
 * from the host and runs the agent binary's `sethostname` there: it needs the server to run as
 * root beside the engine. A gVisor sandbox keeps its own UTS namespace inside its kernel, which
 * the host cannot enter: its agent sets the name instead (agent/hostname.go, the agent client's
 * `setHostname`). Resolves with whether it worked.
 */
export async function setHostname(info: Docker.ContainerInspectInfo, hostname: string): Promise<boolean> {
  if (info.HostConfig.Runtime === 'runsc' || !info.State.Pid) return false;
  try {
    await run('nsenter', [`--uts=/proc/${info.State.Pid}/ns/uts`, '--', agentBinary(), 'sethostname', hostname], { timeout: 5_000 });
    return true;
  } catch {
    return false;
  }
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
