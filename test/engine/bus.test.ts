import { describe, expect, it } from 'vitest';
import { type TaskEvent, createEventBus } from '../../src/engine/index.js';
import { freshManager, operator } from '../helpers.js';

const event = (type: string): TaskEvent => ({ id: 1, taskId: 1, type, actor: 'a', actorRole: 'agent', data: {}, createdAt: 0 });

describe('the EventBus', () => {
  it('isolates a throwing listener: emit does not throw and the others still run', () => {
    const errors: string[] = [];
    const bus = createEventBus({ onListenerError: (err, e) => errors.push(`${e.type}: ${(err as Error).message}`) });
    const seen: string[] = [];
    bus.on('task.created', () => {
      throw new Error('boom');
    });
    bus.on('task.created', (e) => seen.push(e.type));
    bus.on('*', (e) => seen.push(`*${e.type}`));
    expect(() => bus.emit(event('task.created'))).not.toThrow();
    expect(seen).toEqual(['task.created', '*task.created']);
    expect(errors).toEqual(['task.created: boom']);
  });

  it('a failing error reporter is contained too, and off() removes a listener', () => {
    const bus = createEventBus({
      onListenerError: () => {
        throw new Error('reporter down');
      },
    });
    let calls = 0;
    const off = bus.on('task.claimed', () => {
      calls++;
      throw new Error('x');
    });
    expect(() => bus.emit(event('task.claimed'))).not.toThrow();
    off();
    bus.emit(event('task.claimed'));
    expect(calls).toBe(1);
  });

  it('TaskManager publishes every committed event, in order, and none for a refused call', async () => {
    const tm = freshManager();
    const seen: string[] = [];
    tm.bus.on('*', (e) => seen.push(`${e.type}#${e.taskId}`));
    const { task } = await tm.createTask({ title: 't' }, operator);
    await tm.claimTask({ agent: 'w', start: true });
    await tm.transitionTask({ taskId: task.id, to: 'completed', actor: operator }).catch(() => undefined);
    await tm.cancelTask({ taskId: task.id, actor: operator });
    expect(seen).toEqual([`task.created#${task.id}`, `task.claimed#${task.id}`, `task.transitioned#${task.id}`, `task.cancelled#${task.id}`]);
  });
});
