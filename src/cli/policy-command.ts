import { Command } from 'commander';
import { PERMISSION_KIND_NAMES } from '../domain/principals.js';
import { apiPath } from '../client/api-client.js';
import { grant as grantSchema, policyAuditEntry, policyDecision, policyReload, policyStatus } from '../schemas/policy-schemas.js';
import type { z } from 'zod';
import { action, type ClientContext } from './client/client-context.js';
import { printRecord } from './client/fields.js';
import { jsonObject, limitQuery, oneOf } from './client/inputs.js';
import { printJson, printList, relative } from './client/output.js';
import { removeCommand } from './client/remove-command.js';

type Grant = z.infer<typeof grantSchema>;
type AuditEntry = z.infer<typeof policyAuditEntry>;

/** An action (`sandbox.exec`) or an agentkernel permission kind (`sudo_exec`), as the body field that names it. */
const actionOrKind = (value: string) => ((PERMISSION_KIND_NAMES as readonly string[]).includes(value) ? { kind: value } : { action: value });

/** `sandboxd policy status|check|reload|audit`: the rules in force and their decisions. */
export function policyCommand(ctx: ClientContext): Command {
  const policy = new Command('policy').description('the policy in force: its status, a dry-run check, a reload of the rule file, recent decisions');
  const api = () => ctx.connection().api;

  policy
    .command('status')
    .alias('get')
    .description('the policy in force: whether a rule file is loaded, mode, default, rules (admin keys)')
    .action(action(async () => printRecord(policyStatus, await api().request<z.infer<typeof policyStatus>>({ method: 'GET', path: '/policy/status' }), {}, ctx.flags.json)));

  policy
    .command('check')
    .description('the decision a request would get (a dry run: no grant is spent, nothing is recorded)')
    .argument('<action>', 'the action, e.g. sandbox.exec')
    .argument('[resource]', 'the resource, e.g. sandbox:build-1 (default *)')
    .option('--principal <name>', 'ask for another principal (admin keys)')
    .option('--context <json>', 'what the rules see of the request: {"sudo": true, "profile": ..., "image": ..., "command0": ..., "labels": {...}}')
    .action(
      action(async (act: string, resource: string | undefined, opts: { principal?: string; context?: string }) => {
        const body = {
          action: act,
          ...(resource ? { resource } : {}),
          ...(opts.principal ? { principal: opts.principal } : {}),
          ...(opts.context ? { context: await jsonObject(opts.context, '--context') } : {}),
        };
        printRecord(policyDecision, await api().request<z.infer<typeof policyDecision>>({ method: 'POST', path: '/policy/check', body }), { first: ['decision', 'reason', 'via', 'matched_rules'] }, ctx.flags.json);
      }),
    );

  policy
    .command('reload')
    .description('read the rule file again (admin keys); an invalid file keeps the previous policy')
    .action(action(async () => printRecord(policyReload, await api().request<z.infer<typeof policyReload>>({ method: 'POST', path: '/policy/reload' }), {}, ctx.flags.json)));

  policy
    .command('audit')
    .description('recent decisions, newest first (admin keys): denials, and allows when [policy].audit_allows is on')
    .option('--decision <decision>', 'only allow or deny')
    .option('--principal <name>', 'only decisions for this principal')
    .option('--limit <n>', 'at most this many (default 100)')
    .action(
      action(async (opts: { decision?: string; principal?: string; limit?: string }) => {
        const query = {
          ...(opts.decision ? { decision: oneOf(opts.decision, ['allow', 'deny'] as const, '--decision') } : {}),
          ...(opts.principal ? { principal: opts.principal } : {}),
          ...limitQuery(opts.limit),
        };
        const entries = await api().request<AuditEntry[]>({ method: 'GET', path: '/policy/audit', query });
        printList(entries, ctx.flags.json, ['TIME', 'PRINCIPAL', 'ACTION', 'RESOURCE', 'DECISION', 'RULE', 'REASON'], (e) => [e.timestamp, e.principal, e.action, e.resource, e.decision, e.rule ?? '-', e.reason]);
      }),
    );
  return policy;
}

/** `sandboxd permission list|grant|revoke|check`: grants an admin gives where no rule allows. */
export function permissionCommand(ctx: ClientContext): Command {
  const permission = new Command('permission').alias('permissions').description('grant, list, check and revoke permissions (admin keys grant and revoke)');
  const api = () => ctx.connection().api;

  permission
    .command('list')
    .alias('ls')
    .description("live grants, oldest first (an admin key sees every grant, another key its own)")
    .action(
      action(async () => {
        const grants = await api().request<Grant[]>({ method: 'GET', path: '/permissions' });
        printList(grants, ctx.flags.json, ['ID', 'PRINCIPAL', 'ACTION', 'RESOURCE', 'SCOPE', 'USES', 'EXPIRES'], (g) => [g.id, g.principal, g.action, g.resource, g.scope, String(g.uses), relative(g.expires_at)]);
      }),
    );

  permission
    .command('grant')
    .description('let a principal take an action on resources no rule allows it (never against a deny rule); prints the grant')
    .argument('<principal>', 'a key name, e.g. ci')
    .argument('<action>', `an action or a glob of them (sandbox.exec, sandbox.*), or a kind: ${PERMISSION_KIND_NAMES.join(', ')}`)
    .option('--resource <glob>', 'the resources, e.g. sandbox:build-* (default *)')
    .option('--scope <scope>', 'once (the first request it lets through spends it; default), session (until the server stops) or always')
    .option('--expires-in <duration>', 'it lapses after this long, e.g. 1h')
    .action(
      action(async (principal: string, act: string, opts: { resource?: string; scope?: string; expiresIn?: string }) => {
        const body = {
          principal,
          ...actionOrKind(act),
          ...(opts.resource ? { resource: opts.resource } : {}),
          ...(opts.scope ? { scope: oneOf(opts.scope, ['once', 'session', 'always'] as const, '--scope') } : {}),
          ...(opts.expiresIn ? { expires_in: opts.expiresIn } : {}),
        };
        printRecord(grantSchema, await api().request<Grant>({ method: 'POST', path: '/permissions/grant', body }), { first: ['id', 'principal', 'action', 'resource', 'scope'] }, ctx.flags.json);
      }),
    );

  permission
    .command('check')
    .description('whether a principal may take an action on a resource, and by what (a dry run)')
    .argument('<action>', 'an action or a kind')
    .argument('[resource]', 'the resource, e.g. sandbox:build-1')
    .option('--principal <name>', 'ask for another principal (admin keys)')
    .action(
      action(async (act: string, resource: string | undefined, opts: { principal?: string }) => {
        const body = { ...actionOrKind(act), ...(resource ? { resource } : {}), ...(opts.principal ? { principal: opts.principal } : {}) };
        const answer = await api().request<{ permitted: boolean; via: string }>({ method: 'POST', path: '/permissions/check', body });
        if (ctx.flags.json) return printJson(answer);
        process.stdout.write(`${answer.permitted ? 'permitted' : 'not permitted'} (${answer.via})\n`);
      }),
    );

  removeCommand(permission, ctx, { description: 'revoke grants (admin keys)', names: 'grant ids (permission list shows them)', argument: 'id', route: (id) => apiPath('permissions', id), verb: ['revoke', 'rm'] });
  return permission;
}
