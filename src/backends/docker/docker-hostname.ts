import { execFile } from 'node:child_process';
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
