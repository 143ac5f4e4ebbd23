import { cpus, totalmem } from 'node:os';

/** What the host can give one sandbox: vcpus and memory_mb are checked against it. */
export interface HostLimits {
  cpus: number;
  memoryMb: number;
}

/** This host's limits. */
export const hostLimits = (): HostLimits => ({ cpus: cpus().length, memoryMb: Math.floor(totalmem() / 1024 / 1024) });
