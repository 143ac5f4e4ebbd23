import { z } from 'zod';
import type { Principal } from '../../domain/principals.js';

/**
 * Policy rules: the rule file's shape, its compilation to regular expressions (once, at load)
 * and the pure evaluation of one request against them. No I/O here: the policy service reads
 * files, keeps the audit ring and consults grants.
 */

const RULE_ID = /^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$/;
/** Context keys a `when` may test; `labels.*` are the resource's labels. */
const WHEN_KEY = /^(?:sudo|profile|image|command0|principal\.name|principal\.admin|(?:principal\.)?labels\.[A-Za-z0-9_./-]{1,63})$/;
const WHEN_KEYS_TEXT = 'sudo, profile, image, command0, labels.<key>, principal.name, principal.admin or principal.labels.<key>';
/** A reference to another context value: `$resource.labels.team`, `$principal.labels.team`. */
const REFERENCE = /^\$(?:resource\.)?((?:principal\.)?labels\.[A-Za-z0-9_./-]{1,63}|principal\.name|profile|image)$/;

const glob = z.string({ error: 'must be a string' }).min(1, 'must not be empty').max(256, 'must be at most 256 characters');
const globs = z.array(glob, { error: 'must be an array of globs' }).min(1, 'must hold at least one glob');
const scalar = z.union([z.string().max(256), z.number(), z.boolean()], { error: 'must be a string, a number or a boolean' });
const whenValue = z.union([scalar, z.array(scalar).min(1, 'must hold at least one value')], {
  error: 'must be a string (a glob, or a $reference), a number, a boolean, or an array of them',
});

const ruleSchema = z
  .object({
    id: z.string({ error: 'must be a string' }).regex(RULE_ID, 'must match ^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$'),
    effect: z.enum(['allow', 'deny'], { error: 'must be allow or deny' }),
    principals: globs.optional(),
    actions: globs.optional(),
    resources: globs.optional(),
    when: z
      .record(z.string().regex(WHEN_KEY), whenValue, {
        // Zod reports a bad key as `invalid_key` with the key's own message nested: say it here.
        error: (issue) =>
          issue.code === 'invalid_type' ? 'must be a table of conditions' : issue.code === 'invalid_key' ? `must be one of ${WHEN_KEYS_TEXT}` : undefined,
      })
      .optional(),
    reason: z.string({ error: 'must be a string' }).max(500, 'must be at most 500 characters').optional(),
  })
  .strict();

export type Effect = 'allow' | 'deny';
export type PolicyMode = 'enforce' | 'audit';

/** A rule file: `{default?, mode?, rules}`. */
const policyDocumentSchema = z
  .object({
    default: z.enum(['allow', 'deny'], { error: 'must be allow or deny' }).optional(),
    mode: z.enum(['enforce', 'audit'], { error: 'must be enforce or audit' }).optional(),
    rules: z.array(z.unknown(), { error: 'must be an array of rules' }).default([]),
  })
  .strict();

/** One fact of a request: what `when` conditions test. Flat keys (`labels.team`, `principal.name`). */
export type Facts = Readonly<Record<string, string | number | boolean | undefined>>;

/** What a request's route gives about it; `labels` are the resource's. */
export interface RequestContext {
  sudo?: boolean;
  profile?: string;
  image?: string;
  command0?: string;
  labels?: Record<string, string>;
}

/** The facts of a request: its context, flattened, and its principal's name, admin flag and labels. */
export function factsOf(context: RequestContext, principal: Principal): Facts {
  const facts: Record<string, string | number | boolean | undefined> = {
    sudo: context.sudo,
    profile: context.profile,
    image: context.image,
    command0: context.command0,
    'principal.name': principal.name,
    'principal.admin': principal.admin,
  };
  for (const [key, value] of Object.entries(context.labels ?? {})) facts[`labels.${key}`] = value;
  for (const [key, value] of Object.entries(principal.labels)) facts[`principal.labels.${key}`] = value;
  return facts;
}

type Condition = (facts: Facts) => boolean;

interface CompiledRule {
  id: string;
  effect: Effect;
  reason: string | undefined;
  principals: RegExp | undefined;
  actions: RegExp | undefined;
  resources: RegExp | undefined;
  when: Condition[];
}

export interface CompiledPolicy {
  default: Effect;
  mode: PolicyMode | undefined;
  rules: CompiledRule[];
  /** Whether some rule tests the resource's labels, image or profile (the route then looks them up). */
  needsResourceFacts: boolean;
}

/** A rule file that cannot be used; the message names the rule and the field. */
export class PolicyFileError extends Error {
  override readonly name = 'PolicyFileError';
}

const escape = (text: string) => text.replace(/[.+^${}()|[\]\\]/g, '\\$&');

/** `*` is any run of characters (dots and colons too), `?` one character; anything else is literal. */
export function globSource(pattern: string): string {
  return escape(pattern).replaceAll('*', '.*').replaceAll('?', '.');
}

/** One anchored regular expression for a list of globs (any of them). */
export function compileGlobs(patterns: readonly string[]): RegExp {
  return new RegExp(`^(?:${patterns.map(globSource).join('|')})$`, 's');
}

function compileCondition(key: string, expected: z.infer<typeof whenValue>, ruleName: string): Condition {
  if (typeof expected === 'string' && expected.startsWith('$')) {
    const other = REFERENCE.exec(expected)?.[1];
    if (other === undefined) {
      throw new PolicyFileError(`${ruleName}.when.${key}: '${expected}' must reference $resource.labels.<key>, $principal.labels.<key>, $principal.name, $profile or $image`);
    }
    return (facts) => facts[key] !== undefined && facts[key] === facts[other];
  }
  if (Array.isArray(expected) && expected.some((value) => typeof value === 'string' && value.startsWith('$'))) {
    throw new PolicyFileError(`${ruleName}.when.${key}: a $reference must stand alone, not in a list`);
  }
  const tests = [expected].flat().map((value): ((actual: string | number | boolean) => boolean) => {
    if (typeof value !== 'string') return (actual) => actual === value;
    const pattern = compileGlobs([value]);
    return (actual) => pattern.test(String(actual));
  });
  return (facts) => {
    const actual = facts[key];
    return actual !== undefined && tests.some((test) => test(actual));
  };
}

const RESOURCE_FACT = /^(?:labels\.|image$|profile$)/;

/**
 * Checks and compiles a parsed rule file. Throws PolicyFileError naming the rule (its id and
 * its index) and the field; rule ids are unique.
 */
export function compilePolicy(document: unknown): CompiledPolicy {
  const top = policyDocumentSchema.safeParse(document);
  if (!top.success) {
    const issue = top.error.issues[0];
    throw new PolicyFileError(`${issue?.path.join('.') || 'policy'}: ${issue?.message ?? 'is not a policy document'}`);
  }
  const seen = new Set<string>();
  let needsResourceFacts = false;
  const rules = top.data.rules.map((raw, index): CompiledRule => {
    const rawId = (raw as { id?: unknown } | null)?.id;
    const ruleName = typeof rawId === 'string' ? `rule '${rawId}' (rules[${index}])` : `rules[${index}]`;
    const parsed = ruleSchema.safeParse(raw);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      throw new PolicyFileError(`${ruleName}${issue?.path.length ? `.${issue.path.join('.')}` : ''}: ${issue?.message ?? 'is not a rule'}`);
    }
    const rule = parsed.data;
    if (seen.has(rule.id)) throw new PolicyFileError(`${ruleName}.id: '${rule.id}' is the id of an earlier rule`);
    seen.add(rule.id);
    const when = Object.entries(rule.when ?? {}).map(([key, value]) => {
      const refersTo = typeof value === 'string' && value.startsWith('$') ? REFERENCE.exec(value)?.[1] : undefined;
      if (RESOURCE_FACT.test(key) || (refersTo && RESOURCE_FACT.test(refersTo))) needsResourceFacts = true;
      return compileCondition(key, value, ruleName);
    });
    return {
      id: rule.id,
      effect: rule.effect,
      reason: rule.reason,
      principals: rule.principals && compileGlobs(rule.principals),
      actions: rule.actions && compileGlobs(rule.actions),
      resources: rule.resources && compileGlobs(rule.resources),
      when,
    };
  });
  return { default: top.data.default ?? 'allow', mode: top.data.mode, rules, needsResourceFacts };
}

/** The policy in force without a rule file: everything allowed. */
export const OPEN_POLICY: CompiledPolicy = { default: 'allow', mode: undefined, rules: [], needsResourceFacts: false };

/** One request as the rules see it. */
export interface PolicyRequest {
  principal: string;
  action: string;
  resource: string;
  facts: Facts;
}

interface RuleVerdict {
  /** The first matching deny rule; it decides. */
  deny: CompiledRule | undefined;
  /** The first matching allow rule. */
  allow: CompiledRule | undefined;
  /** Ids of every rule that matched, in file order. */
  matched: string[];
}

const matches = (rule: CompiledRule, request: PolicyRequest): boolean =>
  (!rule.principals || rule.principals.test(request.principal)) &&
  (!rule.actions || rule.actions.test(request.action)) &&
  (!rule.resources || rule.resources.test(request.resource)) &&
  rule.when.every((condition) => condition(request.facts));

/** The rules that match a request: one pass over precompiled regular expressions. */
export function matchRules(policy: CompiledPolicy, request: PolicyRequest): RuleVerdict {
  let deny: CompiledRule | undefined;
  let allow: CompiledRule | undefined;
  const matched: string[] = [];
  for (const rule of policy.rules) {
    if (!matches(rule, request)) continue;
    matched.push(rule.id);
    if (rule.effect === 'deny') deny ??= rule;
    else allow ??= rule;
  }
  return { deny, allow, matched };
}
