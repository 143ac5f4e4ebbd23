import { loadavg } from 'node:os';

/** Summary figures of a series of timings in milliseconds. */
export interface Summary {
  n: number;
  p50: number;
  p95: number;
  p99: number;
  mean: number;
}

export function summarize(samples: number[]): Summary {
  const sorted = [...samples].sort((a, b) => a - b);
  const pick = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? NaN;
  return { n: samples.length, p50: pick(0.5), p95: pick(0.95), p99: pick(0.99), mean: samples.reduce((a, b) => a + b, 0) / samples.length };
}

/** Milliseconds `work` takes. */
export async function timed(work: () => Promise<unknown>): Promise<number> {
  const started = performance.now();
  await work();
  return performance.now() - started;
}

/**
 * Times two alternatives `n` times each, interleaved and alternating which goes first, so
 * that both see the same engine, cache and load conditions (after `warmup` untimed rounds).
 * With `block` > 1 they alternate in blocks of that many calls, each block after one untimed
 * call: for alternatives that leave work behind in the engine (an Engine API exec does) which
 * would otherwise land on the other's next call.
 */
export async function timePaired(
  n: number,
  ours: (i: number) => Promise<unknown>,
  plain: (i: number) => Promise<unknown>,
  warmup = 2,
  block = 1,
): Promise<{ ours: Summary; plain: Summary }> {
  for (let i = 0; i < warmup; i++) {
    await ours(-1 - i);
    await plain(-1 - i);
  }
  const a: number[] = [];
  const b: number[] = [];
  const run = async (side: 'ours' | 'plain', from: number) => {
    const [work, samples] = side === 'ours' ? [ours, a] : [plain, b];
    if (block > 1) await work(-1);
    for (let i = from; i < Math.min(n, from + block); i++) samples.push(await timed(() => work(i)));
  };
  for (let from = 0, round = 0; from < n; from += block, round++) {
    const [first, second] = round % 2 === 0 ? (['ours', 'plain'] as const) : (['plain', 'ours'] as const);
    await run(first, from);
    await run(second, from);
  }
  return { ours: summarize(a), plain: summarize(b) };
}

const fmt = (ms: number) => `${ms.toFixed(1)} ms`;

/** One line: a figure of ours against the plain alternative measured in the same run. */
export function report(label: string, ours: Summary, plain: Summary, plainLabel: string): void {
  const ratio = ours.p50 / plain.p50;
  process.stdout.write(
    `${label.padEnd(40)} p50 ${fmt(ours.p50).padStart(9)}  p95 ${fmt(ours.p95).padStart(9)}  | ${plainLabel.padEnd(26)} p50 ${fmt(plain.p50).padStart(9)}  p95 ${fmt(plain.p95).padStart(9)}  | ratio ${ratio.toFixed(2)}x  overhead ${fmt(ours.p50 - plain.p50)}\n`,
  );
}

/** One labelled line of figures. */
export const line = (label: string, value: string) => process.stdout.write(`${label.padEnd(40)} ${value}\n`);

/** The host's load average over the last minute, printed beside the figures it may skew. */
export const load = () => `load ${loadavg()[0]!.toFixed(2)}`;

/** A figure's verdict against its target: `ok` or `MISSED`, so that a run's misses stand out. */
export const verdict = (ok: boolean, target: string) => `${ok ? 'ok' : 'MISSED'} (target ${target})`;
