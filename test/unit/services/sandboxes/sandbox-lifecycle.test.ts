import { afterEach, describe, expect, it } from 'vitest';
import { isServiceError } from '../../../../src/errors.js';
import {
  IllegalTransition,
  nextStatus,
  STATUS_TRANSITIONS,
  transition,
  TRANSITIONS,
  type SandboxEvent,
} from '../../../../src/services/sandboxes/lifecycle.js';
import { SandboxRepository, type SandboxStatus, type TransitionedStatus } from '../../../../src/state/sandbox-repository.js';
import { fakeHarness, type FakeHarness } from '../../../helpers/fake-app.js';

const STATUSES = ['creating', 'running', 'stopped', 'lost', 'archiving', 'archived', 'removing'] as const;
// The compiler refuses this line when a status is added to SandboxStatus and not to STATUSES.
const everyStatus: Exclude<SandboxStatus, (typeof STATUSES)[number]> extends never ? true : false = true;
const EVENTS = Object.keys(STATUS_TRANSITIONS) as SandboxEvent[];

/** The targets the table gives `on`, as a list. */
const targetsOf = (on: SandboxEvent): readonly SandboxStatus[] => {
  const to = STATUS_TRANSITIONS[on].to;
  return typeof to === 'string' ? [to] : to;
};

/** `transition` with the target named or not, whatever the event's kind (the overloads split them). */
const move = (from: SandboxStatus, on: SandboxEvent, to?: SandboxStatus) =>
  (transition as (record: { name: string; status: SandboxStatus }, on: SandboxEvent, to?: SandboxStatus) => SandboxStatus)({ name: 'box', status: from }, on, to);

let h: FakeHarness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

describe('sandbox status transitions', () => {
  it('answer every status x event as the table says, and refuse the rest with IllegalTransition', () => {
    expect(everyStatus).toBe(true);
    expect(EVENTS.sort()).toEqual(['archive', 'archive_failed', 'archived', 'created', 'lost', 'observed', 'recover', 'remove', 'start', 'stop']);
    let allowed = 0;
    for (const from of STATUSES) {
      for (const on of EVENTS) {
        const rule = STATUS_TRANSITIONS[on];
        for (const to of STATUSES) {
          const legal = rule.from.includes(from) && targetsOf(on).includes(to);
          expect(nextStatus(from, on, to), `${from} --${on}--> ${to}`).toBe(legal ? to : undefined);
          if (legal) {
            expect(move(from, on, to)).toBe(to);
            allowed++;
          } else {
            expect(() => move(from, on, to)).toThrow(IllegalTransition);
          }
        }
        // Without a named target: the event's one target, if it has one and `from` may take it.
        const single = typeof rule.to === 'string' ? rule.to : undefined;
        expect(nextStatus(from, on)).toBe(rule.from.includes(from) ? single : undefined);
      }
    }
    expect(allowed).toBe(EVENTS.reduce((n, on) => n + STATUS_TRANSITIONS[on].from.length * targetsOf(on).length, 0));
  });

  it('reach every status, and let every in-flight status out but `removing` (whose row is deleted)', () => {
    const initial: SandboxStatus[] = ['creating', 'running'];
    for (const status of STATUSES) {
      expect(initial.includes(status) || EVENTS.some((on) => targetsOf(on).includes(status)), `${status} reachable`).toBe(true);
    }
    for (const status of ['creating', 'archiving'] as const) {
      expect(EVENTS.some((on) => STATUS_TRANSITIONS[on].from.includes(status)), `${status} left`).toBe(true);
    }
    expect(EVENTS.filter((on) => STATUS_TRANSITIONS[on].from.includes('removing'))).toEqual([]);
  });

  it("agree with the operations' rules: each status an operation acts from moves to its in-flight or final status", () => {
    const moves: Array<[keyof typeof TRANSITIONS, SandboxEvent]> = [
      ['start', 'start'],
      ['archive', 'archive'],
      ['recover', 'recover'],
      ['remove', 'remove'],
    ];
    for (const [operation, on] of moves) {
      const rule = TRANSITIONS[operation];
      for (const from of rule.from) expect(nextStatus(from, on), `${operation} from ${from}`).toBe(rule.via ?? rule.to);
    }
    // Stopping an archived or lost sandbox is allowed and changes nothing: no move from those.
    for (const from of TRANSITIONS.stop.from) expect(nextStatus(from, 'stop')).toBe(from === 'archived' || from === 'lost' ? undefined : 'stopped');
    expect(nextStatus('archiving', 'archived')).toBe(TRANSITIONS.archive.to);
  });

  it('refuse an illegal transition with a typed CONFLICT naming the sandbox, the status and the event', () => {
    const refused = (() => {
      try {
        transition({ name: 'box', status: 'archived' }, 'start');
      } catch (err) {
        return err;
      }
      return undefined;
    })();
    expect(refused).toBeInstanceOf(IllegalTransition);
    expect(isServiceError(refused) && refused.code).toBe('CONFLICT');
    expect(refused).toMatchObject({ sandbox: 'box', from: 'archived', on: 'start', message: "sandbox 'box' is archived: its lifecycle has no move on 'start' from there" });
    expect(() => transition({ name: 'box', status: 'archiving' }, 'archive_failed', 'lost')).toThrow("sandbox 'box' is archiving: its lifecycle has no move on 'archive_failed' to lost from there");
    expect(() => transition({ name: 'box', status: 'running' }, 'observed', 'lost')).toThrow(IllegalTransition);
    expect(() => transition({ name: 'box', status: 'removing' }, 'remove')).toThrow(IllegalTransition);
  });

  it('make remove go through the table: a sandbox being archived is not removed', async () => {
    h = await fakeHarness();
    const created = await h.services.sandboxes.create({ name: 'busy' });
    const repo = new SandboxRepository(h.store.db, h.store.sql);
    // An archive in flight, as a failed rollback or a crash before recovery leaves it.
    await repo.update(created.uuid, { status: 'archiving' as TransitionedStatus });
    await expect(h.services.sandboxes.remove('busy')).rejects.toMatchObject({ code: 'CONFLICT', message: "sandbox 'busy' is archiving: try again when that has finished" });
    expect((await repo.byName('busy'))?.status).toBe('archiving');
    expect(h.backend.instances.size).toBe(1);
  });
});
