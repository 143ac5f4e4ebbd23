/** Summary figures of a series of timings in milliseconds. */
export interface Summary {
  n: number;
  p50: number;
  p95: number;
  mean: number;
}

export function summarize(samples: number[]): Summary {
  const sorted = [...samples].sort((a, b) => a - b);
  const pick = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? NaN;
  return { n: samples.length, p50: pick(0.5), p95: pick(0.95), mean: samples.reduce((a, b) => a + b, 0) / samples.length };
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
 */
export async function timePaired(
  n: number,
  ours: (i: number) => Promise<unknown>,
  plain: (i: number) => Promise<unknown>,
  warmup = 2,
): Promise<{ ours: Summary; plain: Summary }> {
  for (let i = 0; i < warmup; i++) {
    await ours(-1 - i);
    await plain(-1 - i);
  }
  const a: number[] = [];
  const b: number[] = [];
  for (let i = 0; i < n; i++) {
    if (i % 2 === 0) {
      a.push(await timed(() => ours(i)));
      b.push(await timed(() => plain(i)));
    } else {
      b.push(await timed(() => plain(i)));
      a.push(await timed(() => ours(i)));
    }
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
