import type { Principal } from '../src/domain/principals.js';
import { compilePolicy, factsOf, matchRules } from '../src/services/governance/index.js';
import { summarize, type Summary } from './stats.js';

/** Decisions per timed batch: one decision is well under the timer's resolution. */
const BATCH = 1000;

/** 100 rules of the kinds a real file holds: principal, action and resource globs, `when` tests, a $reference. */
function hundredRules(): unknown {
  const rules = [];
  for (let i = 0; i < 100; i++) {
    const kind = i % 4;
    if (kind === 0) rules.push({ id: `team-${i}`, effect: 'allow', principals: [`team-${i}-*`], actions: ['sandbox.*'], resources: [`sandbox:t${i}-*`] });
    else if (kind === 1) rules.push({ id: `no-sudo-${i}`, effect: 'deny', principals: [`ci-${i}`], actions: ['sandbox.exec'], when: { sudo: true } });
    else if (kind === 2) rules.push({ id: `images-${i}`, effect: 'deny', actions: ['run', 'sandbox.create'], when: { image: [`evil-${i}/*`], profile: ['permissive'] } });
    else rules.push({ id: `same-team-${i}`, effect: 'allow', actions: [`store.${i}.*`], when: { 'principal.labels.team': '$resource.labels.team' } });
  }
  return { default: 'deny', rules };
}

/** Microseconds per call of `work`, from batches of BATCH calls. */
function perCall(batches: number, work: (i: number) => unknown): Summary {
  const samples: number[] = [];
  for (let b = 0; b < batches; b++) {
    const started = process.hrtime.bigint();
    for (let i = 0; i < BATCH; i++) work(i);
    samples.push(Number(process.hrtime.bigint() - started) / 1000 / BATCH);
  }
  return summarize(samples);
}

const fmt = (us: number) => `${us.toFixed(2)} us`;

/**
 * BENCH_ONLY=policy: the time of one policy decision over 100 rules (facts built, every rule
 * tried, as on a request the rules do not decide early), beside a plain loop of 100 regular
 * expressions over one string. The target is < 50 us per decision; no server is needed.
 */
export function benchPolicy(batches: number): void {
  const policy = compilePolicy(hundredRules());
  const principal: Principal = { name: 'agent-7', admin: false, labels: { team: 'a' } };
  const context = { sudo: true, command0: 'id', labels: { team: 'a', env: 'dev' } };
  const decide = (i: number) =>
    matchRules(policy, { principal: principal.name, action: i % 2 ? 'sandbox.exec' : 'store.query', resource: `sandbox:build-${i % 10}`, facts: factsOf(context, principal) });
  const plainPatterns = Array.from({ length: 100 }, (_, i) => new RegExp(`^team-${i}-.* sandbox\\..* sandbox:t${i}-.*$`, 's'));
  const plain = (i: number) => {
    const subject = `agent-7 ${i % 2 ? 'sandbox.exec' : 'store.query'} sandbox:build-${i % 10}`;
    return plainPatterns.some((p) => p.test(subject));
  };
  // Warm both up (JIT) before timing; then interleave so both see the same conditions.
  perCall(20, decide);
  perCall(20, plain);
  const ours: number[] = [];
  const base: number[] = [];
  for (let r = 0; r < batches; r++) {
    ours.push(perCall(1, decide).p50);
    base.push(perCall(1, plain).p50);
  }
  const o = summarize(ours);
  const p = summarize(base);
  process.stdout.write(
    `${'policy decision, 100 rules'.padEnd(40)} p50 ${fmt(o.p50).padStart(10)}  p95 ${fmt(o.p95).padStart(10)}  | ${'100-regex loop'.padEnd(26)} p50 ${fmt(p.p50).padStart(10)}  p95 ${fmt(p.p95).padStart(10)}  | target < 50 us: ${o.p95 < 50 ? 'met' : 'MISSED'}\n`,
  );
}
