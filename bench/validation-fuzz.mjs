/**
 * Check (not part of `npm run bench:queue`): the fast validation paths of claimTask and
 * transitionTask (schemas.ts: parseClaimInput, parseTransitionInput) must accept exactly what
 * the zod schemas accept and return the same parsed value; refusals must be VALIDATION_FAILED.
 *
 *   npm run build && node bench/validation-fuzz.mjs      # BENCH_FUZZ inputs per schema (default 200000)
 *
 * Exits with status 1 and prints the input on the first difference.
 */
import { isDeepStrictEqual } from 'node:util';
import * as S from '../dist/engine/schemas.js';

const ROUNDS = Number(process.env.BENCH_FUZZ ?? 200_000);
const pick = (a) => a[Math.floor(Math.random() * a.length)];
const strings = ['a', '', 'agent-1', 'x'.repeat(100), 'x'.repeat(101), 'bad\nname', 'de\u007f', 'ünï', 'a b', 'q.1:z_-', 'x'.repeat(64), 'x'.repeat(65), 'a/b'];
const numbers = [0, -0, 1, 99, 100, 1.5, -1, 2 ** 53 - 1, 2 ** 53, 86_400_000, 86_400_001, NaN, Infinity, '5', 30_000];
const anything = () => pick([...strings, ...numbers, true, false, null, undefined, [], ['a'], ['a', 'b b'], {}, [, 'a']]);
const actor = () =>
  pick([
    { id: pick(strings), role: pick(['agent', 'operator', 'system', 'x']) },
    { id: 'a' },
    { id: 'a', role: 'agent', z: 1 },
    Object.create({ id: 'a', role: 'agent' }),
    null,
    'a',
  ]);
const states = ['pending', 'claimed', 'in_progress', 'review', 'completed', 'failed', 'cancelled', 'waiting', 'bogus'];
const claimValues = {
  agent: strings,
  capabilities: [['a'], ['a', 'b'], Array(33).fill('a'), [1]],
  queue: strings,
  leaseMs: numbers,
  taskId: numbers,
  start: [true, false, 1],
  workerId: strings,
  extra: [1],
};

function claimInput() {
  const o = {};
  for (const k of Object.keys(claimValues)) if (Math.random() < 0.4) o[k] = Math.random() < 0.5 ? anything() : pick(claimValues[k]);
  if (Math.random() < 0.5) o.agent = pick(strings);
  return o;
}

function transitionInput() {
  const o = { taskId: pick(numbers), to: pick(states), actor: actor() };
  const then = () =>
    pick([
      [],
      [{ to: pick(states), actor: actor() }],
      [{ to: 'completed', actor: actor(), reason: pick(strings) }],
      Array(5).fill({ to: 'completed', actor: { id: 'a', role: 'system' } }),
      [{ to: 'x' }],
      'no',
      [{ to: 'completed', actor: { id: 'a', role: 'system' }, result: 1 }],
    ]);
  for (const k of ['claimToken', 'reason', 'result', 'then', 'extra']) {
    if (Math.random() >= 0.35) continue;
    if (k === 'then') o.then = then();
    else if (k === 'reason') o.reason = pick([...strings, 'x'.repeat(2001), 'x'.repeat(2000), 5]);
    else o[k] = anything();
  }
  return o;
}

const cases = [
  [claimInput, S.claimInput, S.parseClaimInput, 'claim'],
  [transitionInput, S.transitionInput, S.parseTransitionInput, 'transition'],
];
let checked = 0;
for (let i = 0; i < ROUNDS; i++) {
  for (const [generate, schema, parse, what] of cases) {
    const input = generate();
    const zod = schema.safeParse(input);
    let ours;
    let error;
    try {
      ours = parse(input);
    } catch (err) {
      error = err;
    }
    checked++;
    if (zod.success !== (error === undefined) || (zod.success && !isDeepStrictEqual(zod.data, ours)) || (error && error.code !== 'VALIDATION_FAILED')) {
      console.log(`difference (${what})`, { input, zod: zod.success ? zod.data : zod.error.issues[0], ours: error ?? ours });
      process.exit(1);
    }
  }
}
console.log(`${checked} inputs: the fast paths and zod agree`);
