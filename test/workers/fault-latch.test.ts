import { describe, expect, it } from 'vitest';
import { EngineError, describeError } from '../../src/engine/index.js';
import { createFaultLatch } from '../../src/workers/fault-latch.js';

const firstHand = new EngineError('STORE_CORRUPT', 'claim on /db: the database is corrupt (SQLITE_CORRUPT)');
const relayed = new EngineError('STORE_CORRUPT', 'daemon heartbeat on /db: another thread of this process found the database corrupt', { relayed: true });

function latched() {
  const lines: string[] = [];
  return { lines, latch: createFaultLatch((l) => lines.push(l), describeError) };
}

describe('the fault that stops a daemon', () => {
  it('a first-hand fault is told at once, once; later ones change nothing', () => {
    const { lines, latch } = latched();
    expect(latch.offer(firstHand)).toBe(true);
    expect(latch.offer(relayed)).toBe(false);
    expect(latch.offer(new EngineError('STORE_REPLACED', 'other'))).toBe(false);
    latch.tell();
    expect(latch.fault).toBe(firstHand);
    expect(lines).toEqual([`stopping: ${describeError(firstHand)}`]);
  });

  it('a relayed fault that comes first starts the stop, and the first-hand account that follows is the one told', () => {
    const { lines, latch } = latched();
    expect(latch.offer(relayed)).toBe(true);
    expect(lines).toEqual([]);
    expect(latch.offer(relayed)).toBe(false);
    expect(latch.offer(firstHand)).toBe(false);
    expect(latch.fault).toBe(firstHand);
    latch.tell();
    expect(lines).toEqual([`stopping: ${describeError(firstHand)}`]);
  });

  it('a relayed fault whose first-hand account never comes is told by tell, and is what the daemon exits on', () => {
    const { lines, latch } = latched();
    latch.offer(relayed);
    latch.tell();
    latch.offer(firstHand);
    latch.tell();
    expect(latch.fault).toBe(relayed);
    expect(lines).toEqual([`stopping: ${describeError(relayed)}`]);
  });
});
