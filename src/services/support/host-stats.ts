import { cpus, freemem, totalmem } from 'node:os';
import { readFileSync, statfsSync } from 'node:fs';

export interface HostUsage {
  cpu_percent: number;
  memory_used_mb: number;
  memory_total_mb: number;
  disk_used_mb: number;
  disk_total_mb: number;
}

interface CpuSample {
  idle: number;
  total: number;
}

const MB = 1024 * 1024;

function sampleCpu(): CpuSample {
  let idle = 0;
  let total = 0;
  for (const cpu of cpus()) {
    const t = cpu.times;
    idle += t.idle;
    total += t.user + t.nice + t.sys + t.idle + t.irq;
  }
  return { idle, total };
}

/** Memory in use as the kernel sees it: total less MemAvailable (falls back to free). */
function memoryUsedBytes(): number {
  try {
    const match = /^MemAvailable:\s+(\d+) kB/m.exec(readFileSync('/proc/meminfo', 'utf8'));
    if (match) return totalmem() - Number(match[1]) * 1024;
  } catch {
    // not Linux: fall through
  }
  return totalmem() - freemem();
}

/**
 * Host-level resource figures. CPU load is the share of non-idle time between two calls
 * (or since boot on the first call), so a reading costs no waiting.
 */
export class HostStats {
  private last: CpuSample = { idle: 0, total: 0 };

  constructor(private readonly diskPath: string) {}

  usage(): HostUsage {
    const now = sampleCpu();
    const total = now.total - this.last.total;
    const busy = total - (now.idle - this.last.idle);
    this.last = now;
    const disk = statfsSync(this.diskPath);
    return {
      cpu_percent: total > 0 ? Math.round((busy / total) * 1000) / 10 : 0,
      memory_used_mb: Math.round(memoryUsedBytes() / MB),
      memory_total_mb: Math.round(totalmem() / MB),
      disk_used_mb: Math.round(((disk.blocks - disk.bfree) * disk.bsize) / MB),
      disk_total_mb: Math.round((disk.blocks * disk.bsize) / MB),
    };
  }
}
