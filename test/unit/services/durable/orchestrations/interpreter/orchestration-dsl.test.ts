import { describe, expect, it } from 'vitest';
import { definitionProblems, validateDefinition } from '../../../../../../src/services/durable/orchestrations/interpreter/index.js';
import { isServiceError } from '../../../../../../src/errors.js';

const a = (id: string, extra: object = {}) => ({ id, type: 'activity', run: { command: ['echo'] }, ...extra });
const steps = (...list: object[]) => ({ name: 'x', steps: list });

/** Each invalid definition and every problem it must be refused with, word for word. */
const INVALID: [string, unknown, string[]][] = [
  ['unknown step type', steps({ id: 'a', type: 'loop' }), ["steps[0].type: unknown step type 'loop' (one of activity, timer, wait_for_event, parallel, map, set)"]],
  ['missing type', steps({ id: 'a' }), ['steps[0].type: is required (one of activity, timer, wait_for_event, parallel, map, set)']],
  ['duplicate ids', steps(a('a'), a('b'), a('a')), ["steps[2].id: duplicate id 'a' (also steps[0].id)"]],
  [
    'duplicate ids in a branch (per list: other branches may reuse an id)',
    steps({ id: 'p', type: 'parallel', branches: { one: [a('a'), a('a')], two: [a('a')] } }),
    ["steps[0].branches.one[1].id: duplicate id 'a' (also steps[0].branches.one[0].id)"],
  ],
  ['id format', steps(a('Bad-Id')), ['steps[0].id: must match ^[a-z][a-z0-9_]{0,62}$']],
  ['missing id', steps({ type: 'set', value: 1 }), ['steps[0].id: is required']],
  [
    'a condition on a later step',
    steps(a('a'), a('b'), a('c'), a('d', { when: { path: 'steps.x.output', op: 'truthy' } }), a('x')),
    ["steps[3].when.path: refers to step 'x' which is not before this step"],
  ],
  ['an unknown step', steps(a('a', { run: { command: ['echo', '${steps.nope.output}'] } })), ["steps[0].run.command[1]: refers to unknown step 'nope'"]],
  ['a step referring to itself', steps(a('a', { run: { command: ['echo', '${steps.a.output}'] } })), ["steps[0].run.command[1]: refers to step 'a' which is not before this step"]],
  [
    'a step of another branch',
    steps({ id: 'p', type: 'parallel', branches: { one: [a('a')], two: [a('b', { run: { command: ['${steps.a.output}'] } })] } }),
    ["steps[0].branches.two[0].run.command[0]: refers to step 'a' which is not before this step"],
  ],
  [
    'a step inside a parallel, from after it',
    steps({ id: 'p', type: 'parallel', branches: { one: [a('a')] } }, { id: 's', type: 'set', value: '${steps.a.output}' }),
    ["steps[1].value: refers to step 'a' which is not before this step"],
  ],
  ['item outside a map', steps({ id: 's', type: 'set', value: '${item}' }), ["steps[0].value: 'item': item exists only inside a map's step"]],
  ['a field of index', steps({ id: 'm', type: 'map', items: '${input.x}', step: { type: 'set', value: '${index.x}' } }), ["steps[0].step.value: 'index.x': index is a number, it has no fields"]],
  ['an unknown root', steps({ id: 's', type: 'set', value: '${env.HOME}' }), ["steps[0].value: 'env.HOME': unknown root 'env' (input, steps, item, index, orchestration)"]],
  ['an unknown orchestration field', steps({ id: 's', type: 'set', value: '${orchestration.version}' }), ["steps[0].value: 'orchestration.version': orchestration offers only id and name"]],
  ['an unknown step field', steps(a('a'), { id: 's', type: 'set', value: '${steps.a.result}' }), ["steps[1].value: 'steps.a.result': a step offers output, exit_code, stderr, status"]],
  [
    'exit_code of a timer',
    steps({ id: 't', type: 'timer', duration: '1s' }, { id: 's', type: 'set', value: '${steps.t.exit_code}' }),
    ["steps[1].value: 'steps.t.exit_code': step 't' is a timer; only activities have exit_code"],
  ],
  ['an unclosed expression', steps({ id: 's', type: 'set', value: 'a ${input.x' }), ["steps[0].value: 'a ${input.x' has a '${' without its '}'"]],
  ['a malformed path', steps({ id: 's', type: 'set', value: '${input..x}' }), ["steps[0].value: 'input..x' is not a valid path: names are letters, digits, '_' and '-'"]],
  ['a bad duration', steps({ id: 't', type: 'timer', duration: '10 minutes' }), ['steps[0].duration: must be a duration like 30s, 10m, 2h or 1d']],
  ['a duration over a year', steps({ id: 't', type: 'timer', duration: '400d' }), ['steps[0].duration: must be at most 365d']],
  ['duration and until', steps({ id: 't', type: 'timer', duration: '1s', until: '2026-01-01T00:00:00Z' }), ['steps[0]: a timer takes exactly one of duration, until']],
  ['until that is no timestamp', steps({ id: 't', type: 'timer', until: 'tomorrow' }), ['steps[0].until: must be an RFC 3339 timestamp (2026-01-31T09:00:00Z) or an expression']],
  [
    'a bad wait timeout and on_timeout',
    steps({ id: 'w', type: 'wait_for_event', event: 'go', timeout: '5', on_timeout: 'retry' }),
    ['steps[0].timeout: must be a duration like 30s, 10m, 2h or 1d', 'steps[0].on_timeout: must be one of fail, continue'],
  ],
  ['on_timeout without a timeout', steps({ id: 'w', type: 'wait_for_event', event: 'go', on_timeout: 'continue' }), ['steps[0].on_timeout: needs a timeout']],
  [
    'output on a call',
    steps({ id: 'a', type: 'activity', output: 'json', call: { class: 'c', object_id: 'o', method: 'm' } }),
    ["steps[0].output: a call's output is the method's return value; output is for run and exec"],
  ],
  ['a bad event name', steps({ id: 'w', type: 'wait_for_event', event: '-go' }), ['steps[0].event: must match ^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$']],
  ['max_attempts 0', steps(a('a', { retry_policy: { max_attempts: 0 } })), ['steps[0].retry_policy.max_attempts: must be between 1 and 100']],
  [
    'every retry bound',
    steps(a('a', { retry_policy: { max_attempts: 101, backoff_coefficient: 0.5, initial_interval_ms: -1, max_interval_ms: 1.5, non_retryable_errors: [''], jitter: 1 } })),
    [
      "steps[0].retry_policy: unknown field 'jitter'",
      'steps[0].retry_policy.max_attempts: must be between 1 and 100',
      'steps[0].retry_policy.initial_interval_ms: must be between 0 and 86400000',
      'steps[0].retry_policy.backoff_coefficient: must be a number between 1 and 10',
      'steps[0].retry_policy.max_interval_ms: must be an integer',
      'steps[0].retry_policy.non_retryable_errors: must be an array of at most 50 non-empty strings',
    ],
  ],
  [
    'bad defaults',
    { name: 'x', defaults: { retry_policy: { max_attempts: 1000 }, timeout_ms: 0, profile: 'loose', extra: 1 }, steps: [a('a')] },
    ["defaults: unknown field 'extra'", 'defaults.profile: must be one of permissive, moderate, restrictive', 'defaults.timeout_ms: must be at least 1', 'defaults.retry_policy.max_attempts: must be between 1 and 100'],
  ],
  ['an activity without a body', steps({ id: 'a', type: 'activity' }), ['steps[0]: an activity takes exactly one of run, exec, call']],
  ['an activity with two bodies', steps({ id: 'a', type: 'activity', run: { command: ['x'] }, exec: { sandbox: 's', command: ['y'] } }), ['steps[0]: an activity takes exactly one of run, exec, call (found run, exec)']],
  [
    'a bad run body',
    steps({ id: 'a', type: 'activity', run: { command: [], shell: true, timeout_ms: 'x' } }),
    ['steps[0].run.command: must be a non-empty array of strings', 'steps[0].run.timeout_ms: must be a number', "steps[0].run: unknown field 'shell'"],
  ],
  [
    'an unknown body field holding an expression, and a malformed expression in a body field',
    steps({ id: 'a', type: 'activity', run: { command: ['x'], when: '${input.x}', image: '${input' } }),
    ["steps[0].run: unknown field 'when'", "steps[0].run.image: '${input' has a '${' without its '}'"],
  ],
  ['map items that are a malformed expression', steps({ id: 'm', type: 'map', items: '${', step: { type: 'set', value: 1 } }), ['steps[0].items: must be one expression such as ${steps.list.output} (or an array)']],
  ['an exec without its sandbox', steps({ id: 'a', type: 'activity', exec: { command: ['x'] } }), ['steps[0].exec.sandbox: is required']],
  ['a bad call body', steps({ id: 'a', type: 'activity', call: { class: 'c', method: 'm', extra: 1 } }), ['steps[0].call.object_id: is required', "steps[0].call: unknown field 'extra'"]],
  [
    'bad output, retry_on_interrupt, on_error',
    steps(a('a', { output: 'xml', retry_on_interrupt: 'no', on_error: 'ignore' })),
    ['steps[0].on_error: must be one of fail, continue', 'steps[0].output: must be one of text, json', 'steps[0].retry_on_interrupt: must be a boolean'],
  ],
  ['map items as plain text', steps({ id: 'm', type: 'map', items: 'a,b', step: { type: 'set', value: 1 } }), ['steps[0].items: must be one expression such as ${steps.list.output} (or an array)']],
  ['max_concurrency over 32', steps({ id: 'm', type: 'map', items: '${input.x}', max_concurrency: 33, step: { type: 'set', value: 1 } }), ['steps[0].max_concurrency: must be between 1 and 32']],
  ['a map without its step', steps({ id: 'm', type: 'map', items: '${input.x}' }), ['steps[0].step: is required']],
  ['a literal map of 1001 items', steps({ id: 'm', type: 'map', items: Array.from({ length: 1001 }, () => 1), step: { type: 'set', value: 1 } }), ['steps[0].items: must hold at most 1000 items']],
  ['a parallel without branches', steps({ id: 'p', type: 'parallel', branches: {} }), ['steps[0].branches: must be a JSON object of named step lists']],
  [
    'bad branches',
    steps({ id: 'p', type: 'parallel', branches: { 'Bad Name': [a('a')], ok: [] } }),
    ["steps[0].branches: branch name 'Bad Name' must match ^[a-z][a-z0-9_]{0,62}$", 'steps[0].branches.ok: must be a non-empty array of steps'],
  ],
  ['a set without value', steps({ id: 's', type: 'set' }), ['steps[0].value: is required']],
  ['an unknown condition op', steps(a('a', { when: { path: 'input.x', op: 'like', value: 1 } })), ['steps[0].when.op: must be one of eq, ne, gt, gte, lt, lte, in, exists, truthy']],
  ['an empty all', steps(a('a', { when: { all: [] } })), ['steps[0].when.all: must be a non-empty array of conditions']],
  [
    'in without an array, a condition without op',
    steps(a('a', { when: { any: [{ path: 'input.x', op: 'in', value: 3 }, { not: { path: 'input.y' } }] } })),
    ["steps[0].when.any[0].value: must be an array for op 'in'", 'steps[0].when.any[1].not.op: is required'],
  ],
  ['a combination with other fields', steps(a('a', { when: { all: [{ path: 'input.x', op: 'exists' }], path: 'input.x' } })), ["steps[0].when: a condition with 'all' takes no other field"]],
  ['unknown fields', { name: 'x', stepz: [], steps: [a('a', { retries: 3 })] }, ["body: unknown field 'stepz'", "steps[0]: unknown field 'retries'"]],
  ['no steps', steps(), ['steps: must be a non-empty array of steps']],
  ['a bad name', { name: 'Build And Test', steps: [a('a')] }, ['name: must match ^[a-z0-9][a-z0-9_.-]{0,62}$ (lowercase letters, digits, _ . -; at most 63)']],
  ['not an object', [1, 2], ['body: a JSON object is required']],
  ['an output into nowhere', { name: 'x', steps: [a('a')], output: '${steps.b.output}' }, ["output: refers to unknown step 'b'"]],
];

describe('orchestration DSL validation', () => {
  it.each(INVALID)('%s', (_name, definition, problems) => {
    expect(definitionProblems(definition)).toEqual(problems);
    let thrown: unknown;
    try {
      validateDefinition(definition);
    } catch (err) {
      thrown = err;
    }
    expect(isServiceError(thrown) && thrown.code).toBe('BAD_REQUEST');
    expect((thrown as Error).message).toBe(problems.join('; '));
  });

  it('accepts the example of the contract, and fields holding expressions are typed at run time', () => {
    const example = {
      name: 'build-and-test',
      description: 'clone, test in parallel, wait for approval, deploy',
      defaults: { image: 'sandboxd/base:bookworm', profile: 'moderate', timeout_ms: 600000, retry_policy: { max_attempts: 3, initial_interval_ms: 1000, backoff_coefficient: 2.0, max_interval_ms: 30000, non_retryable_errors: [] } },
      steps: [
        { id: 'list', type: 'activity', output: 'json', run: { command: ['python3', '-c', "print('{}')"] } },
        { id: 'each', type: 'map', items: '${steps.list.output.files}', max_concurrency: 4, step: { type: 'activity', run: { command: ['echo', '${item}'] } } },
        {
          id: 'checks',
          type: 'parallel',
          fail_fast: true,
          branches: {
            lint: [{ id: 'lint', type: 'activity', exec: { sandbox: '${input.sandbox}', command: ['make', 'lint'] } }],
            count: [{ id: 'bump', type: 'activity', call: { class: 'counter', object_id: 'builds', method: 'increment', args: { by: 1 } } }],
          },
        },
        { id: 'approval', type: 'wait_for_event', event: 'approved', timeout: '1h', on_timeout: 'fail' },
        { id: 'cool_down', type: 'timer', duration: '30s' },
        {
          id: 'deploy',
          type: 'activity',
          when: { path: 'steps.approval.output.ok', op: 'eq', value: true },
          exec: { sandbox: '${input.sandbox}', command: ['make', 'deploy'], stdin: '${steps.approval.output}', timeout_ms: '${input.deadline}' },
          retry_policy: { max_attempts: 1 },
        },
      ],
      output: '${steps.deploy.output}',
    };
    expect(definitionProblems(example)).toEqual([]);
    expect(validateDefinition(example).steps).toHaveLength(6);
  });

  it('$${ is a literal ${, and the read-only fields of a definition read back are ignored', () => {
    const definition = validateDefinition({ name: 'x', version: 3, created_at: 'then', updated_at: 'now', steps: [a('a', { run: { command: ['sh', '-c', 'echo $${HOME}'] } })] });
    expect(definition).toEqual({ name: 'x', steps: [a('a', { run: { command: ['sh', '-c', 'echo $${HOME}'] } })] });
  });

  it('counts nested steps against the limit of 500', () => {
    const many = Array.from({ length: 501 }, (_, index) => ({ id: `s${index}`, type: 'set', value: index }));
    expect(definitionProblems(steps(...many))).toEqual(['steps: at most 500 steps in all (found 501)']);
  });
});
