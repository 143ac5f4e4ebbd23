import type Docker from 'dockerode';
import { Readable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { ContainerListing } from '../../../../src/backends/docker/container-listing.js';

/** An engine whose event log holds `events` (times in ms) and whose listing is counted. */
function engine(events: number[], now: () => number = Date.now) {
  const asked: { since: number; until: number }[] = [];
  let listings = 0;
  const docker = {
    async getEvents(options: { since: number; until: number }) {
      asked.push(options);
      const inRange = events.filter((at) => at / 1000 >= options.since && at / 1000 <= options.until);
      return Readable.from(inRange.map((at) => `${JSON.stringify({ time: Math.floor(at / 1000), Action: 'die' })}\n`));
    },
  } as unknown as Docker;
  const listing = new ContainerListing(
    docker,
    async () => {
      listings++;
      return [{ Id: `c${listings}` } as Docker.ContainerInfo];
    },
    now,
  );
  return { listing, asked, listings: () => listings };
}

describe('the container listing', () => {
  it('answers again from the last listing while the engine records no event, asking for every event since a second before it began', async () => {
    const { listing, asked, listings } = engine([]);
    const before = Date.now();
    expect(await listing.list()).toEqual([{ Id: 'c1' }]);
    expect(await listing.list()).toEqual([{ Id: 'c1' }]);
    expect(await listing.list()).toEqual([{ Id: 'c1' }]);
    expect(listings()).toBe(1);
    expect(asked).toHaveLength(2);
    for (const { since, until } of asked) {
      expect(since * 1000).toBeGreaterThanOrEqual(before - 1_000);
      expect(since * 1000).toBeLessThanOrEqual(Date.now() - 1_000);
      expect(until * 1000).toBeGreaterThanOrEqual(since * 1000 + 1_000);
    }
  });

  it('lists again after any event since, and keeps listing while events come', async () => {
    const events: number[] = [];
    const { listing, listings } = engine(events);
    await listing.list();
    events.push(Date.now());
    expect(await listing.list()).toEqual([{ Id: 'c2' }]);
    // The event is less than a second before the new listing began: it is asked for again.
    expect(await listing.list()).toEqual([{ Id: 'c3' }]);
    expect(listings()).toBe(3);
  });

  it('lists again once the last listing is 5 s old, events or not (an engine that restarted has an empty log)', async () => {
    let now = Date.now();
    const { listing, listings } = engine([], () => now);
    await listing.list();
    now += 4_999;
    await listing.list();
    expect(listings()).toBe(1);
    now += 1;
    expect(await listing.list()).toEqual([{ Id: 'c2' }]);
  });

  it('fails as the engine does when its events cannot be read', async () => {
    const docker = { getEvents: async () => Promise.reject(new Error('connect ECONNREFUSED /var/run/docker.sock')) } as unknown as Docker;
    const listing = new ContainerListing(docker, async () => []);
    await listing.list();
    await expect(listing.list()).rejects.toThrow('ECONNREFUSED');
  });
});
