import { afterEach, describe, expect, it } from 'vitest';
import { imageReferenceProblem, isImageReference } from '../../../src/domain/image-reference.js';
import { fakeHarness, type FakeHarness } from '../../helpers/fake-app.js';

let h: FakeHarness;
afterEach(async () => h?.close());

const VALID = [
  'alpine',
  'sandboxd/base:bookworm',
  'library/debian:12.5-slim',
  'registry.example.com:5000/team/app:1.2',
  'localhost/x',
  'LOCALHOST:5000/a_b__c---d.e',
  '[::1]:5000/img',
  `ubuntu@sha256:${'a'.repeat(64)}`,
  `ubuntu:22.04@sha256:${'b'.repeat(64)}`,
  `x:${'t'.repeat(128)}`,
];

const INVALID = [
  '../127.0.0.1:1/x',
  '../../etc',
  'http://evil/x',
  '/absolute/path',
  '..%2F127.0.0.1:1%2Fx',
  'nonexistent/Image:nope',
  'has space',
  'nul\0byte',
  'lone\ud800surrogate',
  'rtl\u202emark',
  '"quoted"',
  "it's",
  'x:',
  ':tag',
  'a//b',
  '-leading',
  'trailing-',
  `x:${'t'.repeat(129)}`,
  `${'a'.repeat(256)}`,
  'sha256:abc@x',
  `ubuntu@sha256:${'a'.repeat(31)}`,
];

describe('image references', () => {
  it('accepts what the engine accepts and refuses the rest', () => {
    for (const image of VALID) expect(imageReferenceProblem(image), image).toBeUndefined();
    for (const image of INVALID) expect(isImageReference(image), JSON.stringify(image)).toBe(false);
  });

  const routes = [
    { url: '/sandboxes', body: (image: unknown) => ({ name: 'boom', image }) },
    { url: '/run', body: (image: unknown) => ({ command: ['true'], image }) },
    { url: '/run/stream', body: (image: unknown) => ({ command: ['true'], image }) },
    { url: '/batch/run', body: (image: unknown) => ({ commands: [{ command: ['true'] }, { command: ['true'], image }] }) },
  ];

  it('answers 400 naming image on every route that takes one, before the backend sees it', async () => {
    h = await fakeHarness();
    const created = h.backend.calls.length;
    for (const { url, body } of routes) {
      for (const image of [...INVALID, ['an', 'array'], 42]) {
        const res = await h.app.inject({ method: 'POST', url, payload: body(image) });
        expect(res.statusCode, `${url} ${JSON.stringify(image)}`).toBe(400);
        expect(res.json().error, `${url} ${JSON.stringify(image)}`).toMatch(/image: /);
      }
    }
    expect(h.backend.calls.length).toBe(created);
  });
});
