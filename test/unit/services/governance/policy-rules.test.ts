import { describe, expect, it } from 'vitest';
import type { Principal } from '../../../../src/domain/principals.js';
import { compilePolicy, factsOf, matchRules, PolicyFileError } from '../../../../src/services/governance/index.js';
import { globSource } from '../../../../src/services/governance/policy-rules.js';

const ops: Principal = { name: 'ops', admin: true, labels: {} };
const ci: Principal = { name: 'ci', admin: false, labels: { team: 'a' } };
const agent: Principal = { name: 'agent-7', admin: false, labels: { team: 'b' } };

/** The effect the rules alone give (deny overrides allow, then the default). */
function verdict(document: unknown, principal: Principal, action: string, resource: string, context = {}) {
  const policy = compilePolicy(document);
  const { deny, allow } = matchRules(policy, { principal: principal.name, action, resource, facts: factsOf(context, principal) });
  return deny ? `deny:${deny.id}` : allow ? `allow:${allow.id}` : `default:${policy.default}`;
}

describe('policy rules', () => {
  const RULES = {
    default: 'deny',
    rules: [
      { id: 'ops-all', effect: 'allow', principals: ['ops'] },
      { id: 'agents-sandboxes', effect: 'allow', principals: ['agent-*', 'ci'], actions: ['sandbox.*', 'run'] },
      { id: 'no-sudo-for-ci', effect: 'deny', principals: ['ci'], actions: ['sandbox.exec'], when: { sudo: true }, reason: 'CI keys may not sudo' },
      { id: 'no-prod-delete', effect: 'deny', actions: ['sandbox.delete'], resources: ['sandbox:prod-*'] },
      { id: 'permissive-only-ops', effect: 'deny', principals: ['agent-*', 'ci'], actions: ['sandbox.create', 'run'], when: { profile: ['permissive'] } },
      { id: 'ci-stores', effect: 'allow', principals: ['ci'], actions: ['store.query'], resources: ['store:ci-?'] },
    ],
  };

  // principal x action x resource x context -> what decides
  const MATRIX: [Principal, string, string, object, string][] = [
    [ops, 'sandbox.exec', 'sandbox:build-1', { sudo: true }, 'allow:ops-all'],
    [ops, 'policy.reload', 'policy:*', {}, 'allow:ops-all'],
    [ops, 'sandbox.delete', 'sandbox:prod-db', {}, 'deny:no-prod-delete'],
    [ops, 'sandbox.create', 'sandbox:x', { profile: 'permissive' }, 'allow:ops-all'],
    [ci, 'sandbox.exec', 'sandbox:build-1', { sudo: true }, 'deny:no-sudo-for-ci'],
    [ci, 'sandbox.exec', 'sandbox:build-1', { sudo: false }, 'allow:agents-sandboxes'],
    [ci, 'sandbox.delete', 'sandbox:build-1', {}, 'allow:agents-sandboxes'],
    [ci, 'sandbox.delete', 'sandbox:prod-web', {}, 'deny:no-prod-delete'],
    [ci, 'sandbox.create', 'sandbox:x', { profile: 'permissive' }, 'deny:permissive-only-ops'],
    [ci, 'sandbox.create', 'sandbox:x', { profile: 'moderate' }, 'allow:agents-sandboxes'],
    [ci, 'store.query', 'store:ci-1', {}, 'allow:ci-stores'],
    [ci, 'store.query', 'store:ci-12', {}, 'default:deny'],
    [ci, 'store.execute', 'store:ci-1', {}, 'default:deny'],
    [agent, 'sandbox.exec', 'sandbox:build-1', { sudo: true }, 'allow:agents-sandboxes'],
    [agent, 'run', 'run:*', { profile: 'permissive' }, 'deny:permissive-only-ops'],
    [agent, 'run', 'run:*', { profile: 'restrictive' }, 'allow:agents-sandboxes'],
    [agent, 'schedule.create', 'schedule:nightly', {}, 'default:deny'],
    [agent, 'snapshot.create', 'snapshot:s', {}, 'default:deny'],
    [{ name: 'agent', admin: false, labels: {} }, 'sandbox.exec', 'sandbox:x', {}, 'default:deny'],
  ];
  it.each(MATRIX)('%o %s on %s %o -> %s', (principal, action, resource, context, expected) => {
    expect(verdict(RULES, principal, action, resource, context)).toBe(expected);
  });

  it('lists every matching rule in file order', () => {
    const policy = compilePolicy(RULES);
    const { matched } = matchRules(policy, { principal: 'ci', action: 'sandbox.exec', resource: 'sandbox:b', facts: factsOf({ sudo: true }, ci) });
    expect(matched).toEqual(['agents-sandboxes', 'no-sudo-for-ci']);
  });

  it('treats * as any run (dots and colons too), ? as one character and everything else literally', () => {
    const pattern = new RegExp(`^${globSource('sandbox:a.b*+(x)?')}$`);
    expect(pattern.test('sandbox:a.b-anything:here+(x)1')).toBe(true);
    expect(pattern.test('sandbox:aXb+(x)1')).toBe(false);
    expect(pattern.test('sandbox:a.b+(x)')).toBe(false);
  });

  it('tests when conditions: booleans exactly, globs on strings, arrays as any of, absent facts never match', () => {
    const doc = (when: object) => ({ rules: [{ id: 'r', effect: 'deny', when }] });
    expect(verdict(doc({ image: 'sandboxd/*' }), ci, 'run', 'run:*', { image: 'sandboxd/python:3' })).toBe('deny:r');
    expect(verdict(doc({ image: 'sandboxd/*' }), ci, 'run', 'run:*', { image: 'evil/python' })).toBe('default:allow');
    expect(verdict(doc({ image: 'sandboxd/*' }), ci, 'run', 'run:*', {})).toBe('default:allow');
    expect(verdict(doc({ sudo: true }), ci, 'run', 'run:*', { sudo: false })).toBe('default:allow');
    expect(verdict(doc({ command0: ['curl', 'wget'] }), ci, 'run', 'run:*', { command0: 'wget' })).toBe('deny:r');
    expect(verdict(doc({ 'labels.env': 'prod' }), ci, 'sandbox.exec', 'sandbox:x', { labels: { env: 'prod' } })).toBe('deny:r');
    expect(verdict(doc({ 'principal.labels.team': 'a' }), ci, 'run', 'run:*')).toBe('deny:r');
    expect(verdict(doc({ 'principal.admin': false }), ops, 'run', 'run:*')).toBe('default:allow');
  });

  it('compares a $reference with another fact, and never matches when either side is absent', () => {
    const doc = { rules: [{ id: 'same-team', effect: 'allow', when: { 'principal.labels.team': '$resource.labels.team' } }], default: 'deny' };
    expect(verdict(doc, ci, 'sandbox.exec', 'sandbox:x', { labels: { team: 'a' } })).toBe('allow:same-team');
    expect(verdict(doc, ci, 'sandbox.exec', 'sandbox:x', { labels: { team: 'b' } })).toBe('default:deny');
    expect(verdict(doc, ci, 'sandbox.exec', 'sandbox:x', {})).toBe('default:deny');
    expect(verdict(doc, ops, 'sandbox.exec', 'sandbox:x', { labels: { team: 'a' } })).toBe('default:deny');
    expect(compilePolicy(doc).needsResourceFacts).toBe(true);
    expect(compilePolicy({ rules: [{ id: 'r', effect: 'deny', when: { sudo: true } }] }).needsResourceFacts).toBe(false);
  });

  const INVALID: [string, unknown, string][] = [
    ['an unknown top-level key', { rule: [] }, "policy: Unrecognized key: \"rule\""],
    ['a bad default', { default: 'maybe' }, 'default: must be allow or deny'],
    ['a bad mode', { mode: 'loud' }, 'mode: must be enforce or audit'],
    ['rules that are not an array', { rules: {} }, 'rules: must be an array of rules'],
    ['a rule without an id', { rules: [{ effect: 'deny' }] }, 'rules[0].id: must be a string'],
    ['a bad effect, named by the id', { rules: [{ id: 'x', effect: 'block' }] }, "rule 'x' (rules[0]).effect: must be allow or deny"],
    ['a duplicate id', { rules: [{ id: 'x', effect: 'deny' }, { id: 'x', effect: 'allow' }] }, "rule 'x' (rules[1]).id: 'x' is the id of an earlier rule"],
    ['an unknown rule key', { rules: [{ id: 'x', effect: 'deny', actor: ['ci'] }] }, "rule 'x' (rules[0]): Unrecognized key: \"actor\""],
    ['an empty glob list', { rules: [{ id: 'x', effect: 'deny', actions: [] }] }, "rule 'x' (rules[0]).actions: must hold at least one glob"],
    ['an unknown when key', { rules: [{ id: 'x', effect: 'deny', when: { user: 'root' } }] }, "rule 'x' (rules[0]).when.user: must be one of sudo, profile"],
    ['a bad reference', { rules: [{ id: 'x', effect: 'deny', when: { 'labels.team': '$secret' } }] }, "rule 'x' (rules[0]).when.labels.team: '$secret' must reference"],
    ['a reference in a list', { rules: [{ id: 'x', effect: 'deny', when: { image: ['a/*', '$image'] } }] }, "rule 'x' (rules[0]).when.image: a $reference must stand alone"],
    ['a when value of the wrong type', { rules: [{ id: 'x', effect: 'deny', when: { sudo: { yes: 1 } } }] }, "rule 'x' (rules[0]).when.sudo: must be a string"],
  ];
  it.each(INVALID)('refuses %s, naming the rule and field', (_what, document, message) => {
    expect(() => compilePolicy(document)).toThrow(PolicyFileError);
    expect(() => compilePolicy(document)).toThrow(message);
  });
});
