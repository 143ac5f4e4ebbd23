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

/** Times `work` `n` times (after `warmup` untimed runs), one at a time. */
export async function time(n: number, work: (i: number) => Promise<unknown>, warmup = 2): Promise<number[]> {
  for (let i = 0; i < warmup; i++) await work(-1 - i);
  const samples: number[] = [];
  for (let i = 0; i < n; i++) {
    const started = performance.now();
    await work(i);
    samples.push(performance.now() - started);
  }
  return samples;
}

const fmt = (ms: number) => `${ms.toFixed(1)} ms`;

/** One line: a figure of ours against the plain alternative measured in the same run. */
export function report(label: string, ours: Summary, plain: Summary, plainLabel: string): void {
  const ratio = ours.p50 / plain.p50;
  process.stdout.write(
    `${label.padEnd(34)} p50 ${fmt(ours.p50).padStart(9)}  p95 ${fmt(ours.p95).padStart(9)}  | ${plainLabel.padEnd(26)} p50 ${fmt(plain.p50).padStart(9)}  p95 ${fmt(plain.p95).padStart(9)}  | ratio ${ratio.toFixed(2)}x  overhead ${fmt(ours.p50 - plain.p50)}\n`,
  );
}
