import Sqlite from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { call } from '../helpers/docker-runtime.js';
import { startServer, type ServerProcess } from '../helpers/server-process.js';

/**
 * Schedules across real server processes on the fake backend (the claim lives in SQLite whatever
 * the backend; a /run target on the fake backend costs nothing, so the test is about firing).
 */
const dirs: string[] = [];
let server: ServerProcess | undefined;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const start = (dir: string) => startServer(dir, ['--backend', 'fake', '--gc-interval', '0', '--reconcile-interval', '0']);

afterAll(async () => {
  await server?.kill9();
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

function dataDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'sandboxd-sched-'));
  dirs.push(dir);
  return dir;
}

interface Run {
  id: string;
  scheduled_for: string;
  status: string;
  missed_count: number;
}

const runsOf = async (url: string, name: string) => (await call(url, 'GET', `/schedules/${name}/runs?limit=100`)).body.data as Run[];

describe('schedules across kill -9', () => {
  it('never fires one occurrence twice over 30 kill -9 restarts at random moments of a 1-second schedule', async () => {
    const dir = dataDir();
    server = await start(dir);
    const created = await call(server.url, 'POST', '/schedules', { name: 'every-second', cron: '* * * * * *', method: 'run', args: { command: ['true'] } });
    expect(created.status).toBe(201);
    // Every run seen, by id: a run seen running and later interrupted keeps its id.
    const seen = new Map<string, Run>();
    const collect = async (url: string) => {
      for (const run of await runsOf(url, 'every-second')) seen.set(run.id, run);
    };
    let interruptedAfterKill = 0;
    for (let i = 0; i < 30; i++) {
      await collect(server.url);
      // A random moment: soon after start (recovery, the first catch-up claim) or in the steady state.
      await sleep(Math.floor(Math.random() * 1500));
      await server.kill9();
      // Some outages are longer than the schedule's period, whatever a restart costs here.
      if (i % 10 === 5) await sleep(2500);
      server = await start(dir);
      const before = new Set([...seen.values()].filter((r) => r.status === 'running').map((r) => r.id));
      await collect(server.url);
      // Recovery ran before the new server answered: what was running at the kill is interrupted now (or ended before it).
      for (const id of before) {
        expect(seen.get(id)!.status).not.toBe('running');
        if (seen.get(id)!.status === 'interrupted') interruptedAfterKill++;
      }
    }
    await sleep(2000);
    await collect(server.url);
    const runs = [...seen.values()];
    const occurrences = runs.map((r) => r.scheduled_for);
    expect(new Set(occurrences).size).toBe(occurrences.length);
    expect(runs.filter((r) => r.status === 'succeeded').length).toBeGreaterThan(20);
    // The first firing after a long outage folds the seconds the server was down into missed_count.
    expect(runs.some((r) => r.missed_count > 0)).toBe(true);
    process.stdout.write(`schedule kill -9: ${runs.length} runs, ${interruptedAfterKill} interrupted by a kill, no occurrence twice\n`);
    await server.stop();
    server = undefined;
  }, 420_000);

  it('fires once with missed_count 2 after a server was down for 3 minutes under a 1-minute cron (fire_once)', async () => {
    // Leave room before the next minute: stop, edit and start must all happen before it comes.
    const intoMinute = Date.now() % 60_000;
    if (intoMinute > 40_000) await sleep(61_000 - intoMinute);
    const dir = dataDir();
    server = await start(dir);
    const created = (await call(server.url, 'POST', '/schedules', { name: 'minutely', cron: '* * * * *', method: 'run', args: { command: ['true'] } })).body
      .data as { next_fire_at: string };
    const next = Date.parse(created.next_fire_at);
    await server.stop();
    server = undefined;
    // The simulation of 3 minutes of downtime: every stored time of the schedule moves 3 minutes
    // back, so the data directory is what a server that stopped 3 minutes ago (its next firing
    // armed for 3 minutes before `next`) leaves. Restarted now, the occurrences next-3, next-2 and
    // next-1 minutes have all passed while it was down, and `next` has not come yet.
    const db = new Sqlite(join(dir, 'sandboxd.db'));
    const back = (column: string) => `${column} = strftime('%Y-%m-%dT%H:%M:%fZ', ${column}, '-3 minutes')`;
    db.prepare(`UPDATE schedules SET ${back('next_fire_at')}, ${back('created_at')}, ${back('updated_at')} WHERE name = 'minutely'`).run();
    expect(db.prepare("SELECT next_fire_at FROM schedules WHERE name = 'minutely'").get()).toEqual({ next_fire_at: new Date(next - 180_000).toISOString() });
    db.close();
    server = await start(dir);
    let runs: Run[] = [];
    for (let i = 0; i < 100 && runs.filter((r) => r.status !== 'running').length === 0; i++) {
      await sleep(100);
      runs = await runsOf(server.url, 'minutely');
    }
    expect(Date.now()).toBeLessThan(next);
    // fire_once: the latest missed occurrence (next - 1 minute) fires once; the two before it are folded.
    expect(runs).toEqual([expect.objectContaining({ status: 'succeeded', scheduled_for: new Date(next - 60_000).toISOString(), missed_count: 2 })]);
    expect((await call(server.url, 'GET', '/schedules/minutely')).body.data).toMatchObject({ next_fire_at: created.next_fire_at, fire_count: 1 });
    await server.stop();
    server = undefined;
  }, 180_000);
});
