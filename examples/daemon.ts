// An embedded daemon: worker threads that run cards with the tools module and the plugin
// next to this file. The card bumps one counter and is refused another by the plugin.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { OPERATOR, type Task, startDaemon } from 'taskloop';

const here = (file: string) => fileURLToPath(new URL(file, import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'taskloop-example-daemon-'));
try {
  const daemon = await startDaemon({
    dbPath: join(dir, 'tasks.db'),
    workers: 1,
    agent: 'counter-daemon',
    toolModules: [here('./tools.js')],
    plugins: [{ module: 'task_enforcer' }, { module: here('./plugin.js'), options: { blocked: ['forbidden'] } }],
  });
  const card = {
    goal: 'Bump the visits counter once',
    planner: 'scripted',
    allowed_tools: ['counter_get', 'counter_bump'],
    scope: { counters: ['visits', 'forbidden'] },
    budget: { max_steps: 6 },
    final_state: { visits: { tool: 'counter_get', args: { name: 'visits' } } },
    acceptance: { checks: [{ id: 'bumped', path: 'visits.value', equals: 1 }] },
    script: [
      { action: 'tool', tool: 'counter_bump', args: { name: 'visits' } },
      { action: 'tool', tool: 'counter_bump', args: { name: 'forbidden' } },
      { action: 'done' },
    ],
  };
  const { task } = await daemon.tm.createTask({ title: 'Count a visit', card }, OPERATOR);
  const deadline = Date.now() + 20_000;
  let now: Task = task;
  while (now.state !== 'completed' && now.state !== 'failed') {
    if (Date.now() > deadline) throw new Error(`task ${task.id} is still ${now.state}`);
    await new Promise((r) => setTimeout(r, 50));
    now = await daemon.tm.getTask(task.id);
  }
  await daemon.stop();
  if (now.state !== 'completed') throw new Error(`task ${task.id} ended ${now.state}: ${JSON.stringify(now.result)}`);
  const envelope = JSON.stringify(now.result);
  if (!envelope.includes('may not be bumped')) throw new Error(`the plugin did not refuse the second call: ${envelope}`);
  console.log(`ok daemon: task ${task.id} completed by a worker thread with the example tools; the plugin refused one call`);
} finally {
  rmSync(dir, { recursive: true, force: true });
}
